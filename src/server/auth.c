/*
 * auth.c - API keys. Keys are stored as SHA-256 digests and a presented
 * key is hashed and compared with every stored digest by CRYPTO_memcmp,
 * without stopping at the first match: the time taken does not depend on
 * how much of a key is right, nor (beyond one hash) on its length.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

#include "server_int.h"

static bool sha256(const char *s, size_t n, unsigned char out[32]) {
    unsigned int len = 0;
    return EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32;
}

/* Fills s->key_hash from s->p.api_keys. Empty keys are refused: an empty
 * key would let "Authorization: Bearer " in. */
bool srv_auth_init(server *s, char *err, size_t errlen) {
    s->n_keys = 0;
    for (int i = 0; i < s->p.n_api_keys && i < SERVER_MAX_KEYS; i++) {
        const char *k = s->p.api_keys[i];
        if (!k || !*k) return bd_err(err, errlen, "an API key is empty");
        if (!sha256(k, strlen(k), s->key_hash[s->n_keys])) return bd_err(err, errlen, "SHA-256 failed");
        s->n_keys++;
    }
    return true;
}

bool srv_auth_check(const server *s, const char *key) {
    unsigned char h[32];
    if (!key || !sha256(key, strlen(key), h)) return false;
    int match = 0;
    for (int i = 0; i < s->n_keys; i++) match |= CRYPTO_memcmp(h, s->key_hash[i], 32) == 0;
    return match != 0;
}
