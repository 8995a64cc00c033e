/*
 * gguf_internal.h - helpers shared by the GGUF reader and writer. Not part
 * of the public API.
 */
#ifndef BD_GGUF_INTERNAL_H
#define BD_GGUF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bd_gguf.h"

/* Little-endian loads from possibly unaligned bytes. */
static inline uint16_t bd_gguf_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}
static inline uint32_t bd_gguf_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t bd_gguf_le64(const uint8_t *p) {
    return (uint64_t)bd_gguf_le32(p) | (uint64_t)bd_gguf_le32(p + 4) << 32;
}

/* Validate the encoding of one value of `type` in p[0, avail) (the bytes
 * described at bd_gguf_kv: a STRING's length field first, an ARRAY's element
 * type first). depth is the array nesting depth of this value's container
 * (0 at top level). On success stores the bytes the value takes in *size.
 * On failure writes a message (naming the relative offset of the problem,
 * counted from p, plus `base_off`) into why and returns false.
 * Work is linear in the bytes walked; nothing is allocated. */
bool bd_gguf_value_walk(const uint8_t *p, uint64_t avail, uint32_t type, int depth,
                     uint64_t base_off, uint64_t *size, char *why, size_t whylen);

#endif
