/*
 * unicode.c - UTF-8 decoding and pre-tokenizer classes (see unicode.h).
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

int bd_utf8_len(uint8_t lead) {
    // Indexed by the high nibble: 0-7 ASCII, 8-B continuation (1), C-D 2, E 3, F 4.
    static const int len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[lead >> 4];
}

uint32_t bd_utf8_decode(const uint8_t *s, size_t n, int *used) {
    uint8_t b = s[0];
    *used = 1;
    if (b < 0x80) return b;
    int len;
    uint32_t cp;
    if ((b & 0xE0) == 0xC0) len = 2, cp = b & 0x1F;
    else if ((b & 0xF0) == 0xE0) len = 3, cp = b & 0x0F;
    else if ((b & 0xF8) == 0xF0) len = 4, cp = b & 0x07;
    else return 0xFFFD; // continuation byte or 0xF8..0xFF
    if ((size_t)len > n) return 0xFFFD;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0xFFFD;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    // llama.cpp would decode F4 90.. and up to 0x1FFFFF, then fail to
    // re-encode it; we call that broken input instead.
    if (cp > 0x10FFFF) return 0xFFFD;
    *used = len;
    return cp;
}

int bd_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
