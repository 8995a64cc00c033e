/*
 * buf.c - growable storage (base.h): bd_grow for arrays of any element,
 * bd_buf for byte strings. The one place the doubling policy and its
 * overflow checks are written.
 */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool bd_grow(void *pp, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) {
            nc = need;
            break;
        }
        nc *= 2;
    }
    if (elem && nc > SIZE_MAX / elem) return false;
    /* *pp is some T *: read and write it as bytes (object pointers share
     * one representation here), not through a void ** lvalue */
    void *old, *p;
    memcpy(&old, pp, sizeof old);
    p = realloc(old, nc * elem);
    if (!p) return false;
    memcpy(pp, &p, sizeof p);
    *cap = nc;
    return true;
}

bool bd_buf_reserve(bd_buf *b, size_t extra) {
    if (b->failed) return false;
    if (b->n + extra < b->n || (b->limit && b->n + extra > b->limit)) {
        b->failed = b->over_limit = true;
        return false;
    }
    if (!bd_grow(&b->p, &b->cap, b->n + extra + 1, 1)) {
        b->failed = true;
        return false;
    }
    return true;
}

bool bd_buf_put(bd_buf *b, const void *s, size_t n) {
    if (b->failed) return false;
    if (n == 0) return true;
    if (!bd_buf_reserve(b, n)) return false;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    BD_ASSERT(b->n < b->cap && (!b->limit || b->n <= b->limit));
    return true;
}

bool bd_buf_putc(bd_buf *b, char c) { return bd_buf_put(b, &c, 1); }

bool bd_buf_vprintf(bd_buf *b, const char *fmt, va_list ap) {
    va_list cp;
    va_copy(cp, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, cp);
    va_end(cp);
    if (n < 0) return false;
    if ((size_t)n < sizeof tmp) return bd_buf_put(b, tmp, (size_t)n);
    if (!bd_buf_reserve(b, (size_t)n)) return false;
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    b->n += (size_t)n;
    return true;
}

bool bd_buf_printf(bd_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    bool ok = bd_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return ok;
}

char *bd_buf_take(bd_buf *b) {
    char *p = b->p;
    if (!p) p = calloc(1, 1);
    memset(b, 0, sizeof *b);
    return p;
}

void bd_buf_free(bd_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
