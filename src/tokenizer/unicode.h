/*
 * unicode.h - the little Unicode the tokenizer needs: UTF-8 decoding with
 * llama.cpp's error handling, and the pre-tokenizer character classes.
 *
 * Internal to src/tokenizer (and its unit test).
 */
#ifndef BD_TOK_UNICODE_H
#define BD_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

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

/* Decode one code point at s[0..n) (n >= 1) the way llama.cpp does:
 * a lead byte with the right number of continuation bytes decodes without
 * an overlong or surrogate check; anything else (a stray continuation
 * byte, 0xF8..0xFF, a truncated or broken sequence) yields U+FFFD and
 * consumes exactly one byte. Sequences that would decode above U+10FFFF
 * are treated as broken too. Stores the bytes consumed in *used. */
uint32_t bd_utf8_decode(const uint8_t *s, size_t n, int *used);

/* Encode cp (<= 0x10FFFF) as UTF-8 into out[4]; returns the length. */
int bd_utf8_encode(uint32_t cp, uint8_t out[4]);

/* Length of the UTF-8 sequence a lead byte announces (1 for ASCII and for
 * bytes that cannot lead a sequence), as llama.cpp's unicode_len_utf8. */
int bd_utf8_len(uint8_t lead);

#endif
