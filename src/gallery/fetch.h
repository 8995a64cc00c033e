/*
 * fetch.h - URIs and verified, resumable downloads (libcurl + OpenSSL).
 *
 * fetch_file() downloads into a `.partial` file while hashing with
 * SHA-256, resumes with an HTTP Range request when a partial exists,
 * retries transient failures (transport errors, stalls, 5xx, 408, 429)
 * with exponential backoff, and leaves the partial holding verified bytes
 * on success. The caller renames it into place (so bad bytes never appear
 * at a final path) and holds the lock that serialises writers.
 *
 * End states:
 *   success            partial complete and verified (sha matches)
 *   sha mismatch       partial removed; "expected X, got Y" message. A
 *                      download that started from a resumed partial is
 *                      retried once from scratch (the old bytes may be
 *                      stale); a fresh download is not retried, so a wrong
 *                      gallery SHA costs one download, not three.
 *   permanent HTTP err partial kept as it was (404 etc. do not retry)
 *   too many bytes     more than the index's `size` (or the announced
 *                      length disagrees with it), or more than
 *                      max_file_size: stopped at once, partial removed
 *   write error        (disk full, file size limit) partial removed: its
 *                      bytes are unverified and would keep the disk full
 *   cancelled          fetch_opts.cancel set: partial kept for a resume
 *   transient err      retried; after the last attempt the partial keeps
 *                      the bytes received so far, for a later resume
 *
 * Environment (read by fetch_opts_init): BLOCKDRAFT_HF_ENDPOINT (or
 * HF_ENDPOINT) mirror for huggingface.co; HF_TOKEN sent as a bearer token
 * to the Hugging Face endpoint's exact origin only (scheme, host and port);
 * BLOCKDRAFT_MAX_FILE_SIZE bytes per file; BLOCKDRAFT_STALL_TIMEOUT seconds
 * without data before a stall aborts (default 30); BLOCKDRAFT_RETRIES
 * attempts per file (default 4); BLOCKDRAFT_RETRY_DELAY_MS first backoff
 * (default 1000, doubling, capped at 30 s).
 */
#ifndef BD_GALLERY_FETCH_H
#define BD_GALLERY_FETCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest file fetch_file writes when the index gives no size (1 TiB;
 * BLOCKDRAFT_MAX_FILE_SIZE overrides it). */
#define FETCH_DEFAULT_MAX_FILE_SIZE (1ull << 40)

enum fetch_phase {
    FETCH_PHASE_START = 0,   /* about to request (attempt n) */
    FETCH_PHASE_HASHING = 1, /* re-hashing existing bytes (resume or cached file) */
    FETCH_PHASE_PROGRESS = 2,
    FETCH_PHASE_RETRY = 3,   /* attempt failed; message says why and the delay */
    FETCH_PHASE_DONE = 4,
};

typedef struct fetch_event {
    enum fetch_phase phase;
    const char *label;  /* file name for display */
    uint64_t done;      /* bytes present (resumed bytes included) */
    uint64_t total;     /* 0 = unknown */
    double rate;        /* bytes/s over this attempt */
    int attempt;
    const char *message;
} fetch_event;

typedef void (*fetch_progress_fn)(void *ctx, const fetch_event *ev);

typedef struct fetch_opts {
    char hf_endpoint[256]; /* no trailing slash */
    char hf_token[512];    /* "" = none */
    int stall_timeout_s;
    int connect_timeout_s;
    int max_attempts;
    int retry_delay_ms;
    uint64_t max_file_size; /* bytes; see FETCH_DEFAULT_MAX_FILE_SIZE */
    /* When set (e.g. by a server shutting down), transfers, re-hashing,
     * retry waits and lock waits stop soon with a "cancelled" error; the
     * partial keeps its bytes for a later resume. NULL: never. */
    const atomic_bool *cancel;
    fetch_progress_fn progress;
    void *progress_ctx;
} fetch_opts;

/* Defaults overridden by the environment (see above). */
void fetch_opts_init(fetch_opts *o);

/* Map a gallery URI to a URL:
 *   huggingface://owner/repo/path[@branch], hf://…  -> ENDPOINT/owner/repo/resolve/BRANCH/path
 *   https://huggingface.co/…                        -> rewritten to ENDPOINT when a mirror is set
 *   github:owner/repo/path[@branch], github://…     -> https://raw.githubusercontent.com/…
 *   http://, https://, file://                      -> as is
 * Anything else (oci://, ollama://, …) is refused with a message. */
bool fetch_uri_resolve(const char *uri, const fetch_opts *o, char *url, size_t n, char *err,
                       size_t errlen);

/* GET a small document (an index) into memory, at most max bytes, with the
 * same retries. *buf is NUL-terminated; free() it. */
bool fetch_to_memory(const char *url, const fetch_opts *o, size_t max, char **buf, size_t *len,
                     char *err, size_t errlen);

typedef struct fetch_result {
    uint64_t bytes;   /* size of the verified file */
    char sha256[65];  /* its hash, lowercase hex */
    int attempts;
    bool resumed;     /* some bytes came from an earlier partial */
    bool no_network;  /* the partial was already complete */
} fetch_result;

/* Download url into partial_path, verifying expected_sha256 (64 hex chars;
 * NULL or "" = no check, only for --insecure) and, when expected_size is
 * not 0, the size. label names the file in progress events and messages.
 * partial_path is only ever written when it is a regular file with one
 * link (a planted symlink or hard link is refused). */
bool fetch_file(const char *url, const char *partial_path, const char *expected_sha256, uint64_t expected_size,
                const char *label, const fetch_opts *o, fetch_result *res, char *err,
                size_t errlen);

/* SHA-256 of a whole file as lowercase hex. */
bool fetch_sha256_file(const char *path, char out[65], uint64_t *size, const fetch_opts *o,
                       const char *label, char *err, size_t errlen);

/* true if s is exactly 64 hex digits (either case). */
bool fetch_sha256_valid(const char *s);

#endif
