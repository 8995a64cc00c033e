/*
 * utf8.c - UTF-8 (base.h): the strict validator for what must be valid
 * (JSON output, escaping for the terminal) and llama.cpp's lenient decoder
 * for what the tokenizer must read exactly as llama.cpp does.
 */
#include "base.h"

#include <stdio.h>
#include <string.h>

size_t bd_utf8_seq(const void *src, size_t n, uint32_t *cp_out) {
    const uint8_t *s = src;
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        if (cp_out) *cp_out = c;
        return 1;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    if (cp_out) *cp_out = cp;
    return len;
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

size_t bd_escape_ctrl(char *out, size_t n, const char *src, size_t len, bool keep_nl) {
    if (n == 0) return 0;
    const uint8_t *s = (const uint8_t *)src;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        char esc[8];
        size_t el = 0, adv = 1;
        uint32_t cp;
        size_t k = bd_utf8_seq(s + i, len - i, &cp);
        if (k == 0) {
            el = (size_t)snprintf(esc, sizeof esc, "\\x%02x", s[i]); /* not UTF-8 */
        } else if ((cp < 0x20 && !(keep_nl && (cp == '\n' || cp == '\t'))) || cp == 0x7f) {
            el = (size_t)snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
        } else if (cp >= 0x80 && cp <= 0x9f) {
            el = (size_t)snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp); /* C1 controls (CSI ...) */
            adv = k;
        } else {
            adv = k;
        }
        const char *piece = el ? esc : (const char *)s + i;
        size_t pl = el ? el : k;
        if (o + pl >= n) break; /* truncated at a whole character */
        memcpy(out + o, piece, pl);
        o += pl;
        i += adv;
    }
    out[o] = 0;
    return o;
}
