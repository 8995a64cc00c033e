/*
 * unicode.c - pre-tokenizer classes (see unicode.h); UTF-8 is in src/base.
 */
#include "unicode.h"

int bd_unicode_class(uint32_t cp) {
    if (cp < 128) {
        if ((cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z')) return BD_UCLASS_LETTER;
        if (cp >= '0' && cp <= '9') return BD_UCLASS_NUMBER;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return BD_UCLASS_WS;
        return BD_UCLASS_OTHER;
    }
    // Binary search over the sorted, disjoint ranges.
    int lo = 0, hi = bd_unicode_n_ranges - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const bd_urange *r = &bd_unicode_ranges[mid];
        if (cp < r->lo) hi = mid - 1;
        else if (cp > r->hi) lo = mid + 1;
        else return r->cls;
    }
    return BD_UCLASS_OTHER;
}
