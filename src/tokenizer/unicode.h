/*
 * unicode.h - the little Unicode the tokenizer needs: the pre-tokenizer
 * character classes (UTF-8 decoding with llama.cpp's error handling is
 * base.h's bd_utf8_decode).
 *
 * Internal to src/tokenizer (and its unit test).
 */
#ifndef BD_TOK_UNICODE_H
#define BD_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

/* Pre-tokenizer class of one code point. */
enum bd_uclass {
    BD_UCLASS_OTHER = 0,  /* anything not below (punctuation, symbols, controls, Cf, unassigned) */
    BD_UCLASS_WS = 1,     /* \s: the White_Space property */
    BD_UCLASS_LETTER = 2, /* \p{L} */
    BD_UCLASS_NUMBER = 3, /* \p{N} */
    BD_UCLASS_MARK = 4,   /* \p{M} */
};

typedef struct bd_urange {
    uint32_t lo, hi; /* inclusive */
    uint8_t cls;     /* enum bd_uclass */
} bd_urange;

/* Generated tables (unicode_tables.c). */
extern const char bd_unicode_version[];
extern const bd_urange bd_unicode_ranges[];
extern const int bd_unicode_n_ranges;

/* Class of a code point as llama.cpp's regex sees it. ASCII is classified
 * like std::regex does in the "C" locale (letters A-Z a-z, digits 0-9,
 * \s = TAB LF VT FF CR SPACE, all else OTHER); above 127 White_Space wins,
 * then the general category. Code points above U+10FFFF are OTHER. */
int bd_unicode_class(uint32_t cp);

/* UTF-8 decoding with llama.cpp's error handling (bd_utf8_decode,
 * bd_utf8_encode, bd_utf8_len) is base.h's. */

#endif
