/*
 * fetch.c - URI mapping and verified, resumable downloads. See fetch.h.
 */
#include "fetch.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "../base/base.h"

#define FETCH_USER_AGENT "blockdraft/0.1 (+libcurl)"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static int env_int(const char *name, int def, int min, int max) {
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < min || v > max) return def;
    return (int)v;
}

void fetch_opts_init(fetch_opts *o) {
    memset(o, 0, sizeof *o);
    const char *ep = getenv("BLOCKDRAFT_HF_ENDPOINT");
    if (!ep || !*ep) ep = getenv("HF_ENDPOINT");
    snprintf(o->hf_endpoint, sizeof o->hf_endpoint, "%s", (ep && *ep) ? ep : "https://huggingface.co");
    size_t l = strlen(o->hf_endpoint);
    while (l > 0 && o->hf_endpoint[l - 1] == '/') o->hf_endpoint[--l] = 0;
    const char *tok = getenv("HF_TOKEN");
    if (tok) snprintf(o->hf_token, sizeof o->hf_token, "%s", tok);
    o->stall_timeout_s = env_int("BLOCKDRAFT_STALL_TIMEOUT", 30, 1, 3600);
    o->connect_timeout_s = env_int("BLOCKDRAFT_CONNECT_TIMEOUT", 20, 1, 600);
    o->max_attempts = env_int("BLOCKDRAFT_RETRIES", 4, 1, 20);
    o->retry_delay_ms = env_int("BLOCKDRAFT_RETRY_DELAY_MS", 1000, 0, 60000);
    o->max_file_size = FETCH_DEFAULT_MAX_FILE_SIZE;
    const char *mx = getenv("BLOCKDRAFT_MAX_FILE_SIZE");
    if (mx && *mx) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(mx, &end, 10);
        if (!errno && !*end && v > 0 && mx[0] != '-') o->max_file_size = v;
    }
}

static bool cancelled(const fetch_opts *o) { return o->cancel && atomic_load(o->cancel); }

bool fetch_sha256_valid(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

/* ------------------------------------------------------------------------
 * URIs
 * ---------------------------------------------------------------------- */

/* The origin of a URL: scheme and host (lower-cased) and port (the
 * scheme's default when absent). false when it has none. */
typedef struct url_origin {
    char scheme[16];
    char host[256];
    long port;
} url_origin;

static bool url_origin_of(const char *url, url_origin *o) {
    memset(o, 0, sizeof *o);
    const char *p = strstr(url, "://");
    if (!p || p == url || (size_t)(p - url) >= sizeof o->scheme) return false;
    for (size_t i = 0; url + i < p; i++) o->scheme[i] = (char)tolower((unsigned char)url[i]);
    p += 3;
    const char *end = p + strcspn(p, "/?#");
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@') at = q;
    if (at) p = at + 1;
    const char *hend = end;
    if (*p == '[') { /* [v6]:port */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) return false;
        hend = rb + 1;
    } else {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (colon) hend = colon;
    }
    size_t len = (size_t)(hend - p);
    if (len == 0 || len >= sizeof o->host) return false;
    for (size_t i = 0; i < len; i++) o->host[i] = (char)tolower((unsigned char)p[i]);
    o->port = !strcmp(o->scheme, "https") ? 443 : !strcmp(o->scheme, "http") ? 80 : 0;
    if (hend < end && *hend == ':') {
        char *e;
        long v = strtol(hend + 1, &e, 10);
        if (e != end || v <= 0 || v > 65535) return false;
        o->port = v;
    }
    return true;
}

static bool starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

bool fetch_uri_resolve(const char *uri, const fetch_opts *o, char *url, size_t n, char *err,
                       size_t errlen) {
    int w = -1;
    const char *rest = NULL;
    if (starts(uri, "huggingface://")) rest = uri + 14;
    else if (starts(uri, "hf://")) rest = uri + 5;
    else if (starts(uri, "hf.co/")) rest = uri + 6;
    if (rest) {
        /* owner/repo/path[@branch] */
        const char *s1 = strchr(rest, '/');
        const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
        if (!s1 || !s2 || s1 == rest || s2 == s1 + 1 || !s2[1])
            return bd_err(err, errlen, "'%s': expected huggingface://owner/repo/path/to/file", uri);
        char path[1024], branch[128] = "main";
        snprintf(path, sizeof path, "%s", s2 + 1);
        char *at = strrchr(path, '@');
        if (at && !strchr(at, '/')) {
            snprintf(branch, sizeof branch, "%s", at + 1);
            *at = 0;
        }
        w = snprintf(url, n, "%s/%.*s/resolve/%s/%s", o->hf_endpoint, (int)(s2 - rest), rest,
                     branch, path);
    } else if (starts(uri, "github:")) {
        const char *r = uri + 7;
        if (starts(r, "//")) r += 2;
        const char *s1 = strchr(r, '/');
        const char *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
        if (!s1 || !s2 || !s2[1])
            return bd_err(err, errlen, "'%s': expected github:owner/repo/path[@branch]", uri);
        char path[1024], branch[128] = "main";
        snprintf(path, sizeof path, "%s", s2 + 1);
        char *at = strrchr(path, '@');
        if (at) {
            snprintf(branch, sizeof branch, "%s", at + 1);
            *at = 0;
        }
        w = snprintf(url, n, "https://raw.githubusercontent.com/%.*s/%s/%s", (int)(s2 - r), r,
                     branch, path);
    } else if (starts(uri, "https://huggingface.co/")) {
        w = snprintf(url, n, "%s/%s", o->hf_endpoint, uri + strlen("https://huggingface.co/"));
    } else if (starts(uri, "https://") || starts(uri, "http://") || starts(uri, "file://")) {
        w = snprintf(url, n, "%s", uri);
    } else {
        return bd_err(err, errlen,
                      "'%s': unsupported URI scheme (blockdraft understands huggingface://, "
                      "hf://, github:, https://, http://, file://)",
                      uri);
    }
    if (w < 0 || (size_t)w >= n) return bd_err(err, errlen, "URI too long: %s", uri);
    return true;
}

/* ------------------------------------------------------------------------
 * Common curl setup
 * ---------------------------------------------------------------------- */

/* HF_TOKEN goes to the Hugging Face endpoint's exact origin only: the same
 * scheme, host and port (https://huggingface.co by default, else the
 * configured mirror), never to another port or scheme of that host. */
static struct curl_slist *auth_headers(const char *url, const fetch_opts *o) {
    if (!o->hf_token[0]) return NULL;
    url_origin a, b;
    if (!url_origin_of(url, &a) || !url_origin_of(o->hf_endpoint, &b)) return NULL;
    if (strcmp(a.scheme, b.scheme) || strcmp(a.host, b.host) || a.port != b.port) return NULL;
    if (strcmp(a.scheme, "https") && strcmp(a.scheme, "http")) return NULL;
    char hdr[600];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", o->hf_token);
    /* On a redirect libcurl (>= 7.83) drops a custom Authorization header
     * unless the new URL has the same host, port and scheme
     * (CURLOPT_UNRESTRICTED_AUTH stays off): the token never reaches the
     * CDN, a third party or another port (gallery_hostile.sh checks it). */
    return curl_slist_append(NULL, hdr);
}

static void setup_common(CURL *c, const char *url, const fetch_opts *o, struct curl_slist *hdrs) {
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,file");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS | CURLPROTO_FILE));
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_USERAGENT, FETCH_USER_AGENT);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)o->connect_timeout_s);
    /* A stall is "fewer than 1 byte/s for stall_timeout_s", which also
     * covers a server that accepts and never answers. */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)o->stall_timeout_s);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    if (hdrs) curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
}

/* Whether an attempt's failure is worth retrying. */
static bool transient(CURLcode rc, long status) {
    if (rc == CURLE_HTTP_RETURNED_ERROR)
        return status >= 500 || status == 408 || status == 429;
    switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_FILE_COULDNT_READ_FILE:
    case CURLE_REMOTE_FILE_NOT_FOUND:
    case CURLE_LOGIN_DENIED:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_WRITE_ERROR:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_ABORTED_BY_CALLBACK:
        return false;
    default:
        return true;
    }
}

static void describe_failure(char *buf, size_t n, CURLcode rc, long status, const char *cerr,
                             const fetch_opts *o, uint64_t got, curl_off_t expect) {
    if (rc == CURLE_HTTP_RETURNED_ERROR)
        snprintf(buf, n, "HTTP %ld%s", status,
                 status == 404 ? " (not found: check the file name, it is case-sensitive)"
                 : status == 401 || status == 403 ? " (access denied: gated repo? set HF_TOKEN)"
                                                  : "");
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        snprintf(buf, n, "stalled: no data for %d s (BLOCKDRAFT_STALL_TIMEOUT)", o->stall_timeout_s);
    else if (rc == CURLE_PARTIAL_FILE)
        snprintf(buf, n,
                 "connection closed after %llu of %lld announced bytes (Content-Length not "
                 "honoured)",
                 (unsigned long long)got, (long long)expect);
    else
        snprintf(buf, n, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static int backoff_ms(const fetch_opts *o, int attempt) {
    long d = o->retry_delay_ms;
    for (int i = 1; i < attempt && d < 30000; i++) d *= 2;
    return (int)(d > 30000 ? 30000 : d);
}

/* ------------------------------------------------------------------------
 * Memory download
 * ---------------------------------------------------------------------- */

typedef struct membuf {
    char *p;
    size_t n, cap, max;
    bool too_big;
} membuf;

static size_t mem_write(char *data, size_t sz, size_t nm, void *ctx) {
    membuf *m = ctx;
    size_t len = sz * nm;
    if (m->n + len > m->max) {
        m->too_big = true;
        return 0;
    }
    if (!bd_grow(&m->p, &m->cap, m->n + len + 1, 1)) return 0;
    memcpy(m->p + m->n, data, len);
    m->n += len;
    m->p[m->n] = 0;
    return len;
}

bool fetch_to_memory(const char *url, const fetch_opts *o, size_t max, char **buf, size_t *len,
                     char *err, size_t errlen) {
    pthread_once(&curl_once, curl_init_once);
    *buf = NULL;
    *len = 0;
    char last[512] = "";
    for (int attempt = 1; attempt <= o->max_attempts; attempt++) {
        CURL *c = curl_easy_init();
        if (!c) return bd_err(err, errlen, "cannot initialise libcurl");
        struct curl_slist *hdrs = auth_headers(url, o);
        membuf m = {.max = max};
        char cerr[CURL_ERROR_SIZE] = "";
        setup_common(c, url, o, hdrs);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
        CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        if (rc == CURLE_OK) {
            if (!m.p) m.p = calloc(1, 1);
            if (!m.p) return bd_err(err, errlen, "out of memory");
            *buf = m.p;
            *len = m.n;
            return true;
        }
        free(m.p);
        if (m.too_big) return bd_err(err, errlen, "%s: larger than %zu bytes", url, max);
        describe_failure(last, sizeof last, rc, status, cerr, o, 0, 0);
        if (!transient(rc, status) || attempt == o->max_attempts) break;
        sleep_ms(backoff_ms(o, attempt));
    }
    return bd_err(err, errlen, "%s: %s", url, last);
}

/* ------------------------------------------------------------------------
 * Hashing
 * ---------------------------------------------------------------------- */

static void hex(const unsigned char *d, unsigned n, char *out) {
    static const char x[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = x[d[i] >> 4];
        out[2 * i + 1] = x[d[i] & 15];
    }
    out[2 * n] = 0;
}

/* Hash the whole open file into a fresh md context; returns bytes hashed. */
static bool hash_fd(int fd, EVP_MD_CTX *md, uint64_t *bytes, const fetch_opts *o,
                    const char *label, char *err, size_t errlen) {
    if (!EVP_DigestInit_ex(md, EVP_sha256(), NULL)) return bd_err(err, errlen, "SHA-256 init failed");
    struct stat st;
    if (fstat(fd, &st) != 0) return bd_err(err, errlen, "%s: %s", label, strerror(errno));
    enum { HASH_BUF = 1 << 20 };
    unsigned char *buf = malloc(HASH_BUF);
    if (!buf) return bd_err(err, errlen, "out of memory");
    uint64_t done = 0;
    double last = 0;
    while (true) {
        ssize_t r = pread(fd, buf, HASH_BUF, (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            return bd_err(err, errlen, "%s: read: %s", label, strerror(errno));
        }
        if (r == 0) break;
        if (o && cancelled(o)) {
            free(buf);
            return bd_err(err, errlen, "%s: cancelled", label);
        }
        EVP_DigestUpdate(md, buf, (size_t)r);
        done += (uint64_t)r;
        if (o && o->progress && bd_time_ms() - last > 200) {
            last = bd_time_ms();
            fetch_event ev = {FETCH_PHASE_HASHING, label, done, (uint64_t)st.st_size, 0, 0, NULL};
            o->progress(o->progress_ctx, &ev);
        }
    }
    free(buf);
    *bytes = done;
    return true;
}

static void md_hex(EVP_MD_CTX *md, char out[65]) {
    EVP_MD_CTX *cp = EVP_MD_CTX_new();
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (cp && EVP_MD_CTX_copy_ex(cp, md) && EVP_DigestFinal_ex(cp, d, &n) && n == 32)
        hex(d, n, out);
    else
        out[0] = 0;
    EVP_MD_CTX_free(cp);
}

bool fetch_sha256_file(const char *path, char out[65], uint64_t *size, const fetch_opts *o,
                       const char *label, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return bd_err(err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return bd_err(err, errlen, "%s: not a regular file", path);
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint64_t n = 0;
    bool ok = md && hash_fd(fd, md, &n, o, label ? label : path, err, errlen);
    close(fd);
    if (ok) {
        md_hex(md, out);
        if (size) *size = n;
    }
    EVP_MD_CTX_free(md);
    return ok;
}

/* ------------------------------------------------------------------------
 * File download
 * ---------------------------------------------------------------------- */

typedef struct xfer {
    int fd;
    EVP_MD_CTX *md;
    uint64_t base;       /* bytes in the partial when this attempt started */
    uint64_t got;        /* bytes written in this attempt */
    bool range;          /* this attempt asked for bytes base- */
    bool decided;        /* the first body bytes have been checked */
    bool restarted;      /* the server ignored the range: started over */
    char content_range[160];
    char why[400];       /* set when the write callback aborts */
    bool why_retry;      /* ...and the abort is worth a fresh retry */
    bool why_remove;     /* ...and the partial's bytes cannot be trusted: remove it */
    uint64_t expected;   /* size the index lists (0: none) */
    bool is_file;        /* a file:// URL (libcurl honours ranges without a 206) */
    bool cancelled;      /* aborted because fetch_opts.cancel was set */
    CURL *c;
    const fetch_opts *o;
    const char *label;
    double t0, last_cb;
    double last_data;    /* when the last body bytes arrived (or the start) */
    bool stalled;        /* aborted by the stall watchdog */
    int attempt;
} xfer;

static size_t on_header(char *data, size_t sz, size_t nm, void *ctx) {
    xfer *x = ctx;
    size_t len = sz * nm;
    if (len >= 5 && !strncmp(data, "HTTP/", 5)) x->content_range[0] = 0; /* new response */
    if (len > 14 && !strncasecmp(data, "content-range:", 14)) {
        size_t l = len - 14;
        if (l >= sizeof x->content_range) l = sizeof x->content_range - 1;
        memcpy(x->content_range, data + 14, l);
        x->content_range[l] = 0;
    }
    return len;
}

static bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* The size the response announces for the whole file (Content-Range's
 * total, else base + Content-Length): it must agree with the index's size,
 * and fit the cap and the free space of the disk. At the first body bytes. */
static bool check_announced(xfer *x) {
    unsigned long long a, b, total = 0;
    curl_off_t cl = -1;
    if (x->content_range[0] && sscanf(x->content_range, " bytes %llu-%llu/%llu", &a, &b, &total) == 3) {
    } else if (curl_easy_getinfo(x->c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK && cl >= 0) {
        total = x->base + (unsigned long long)cl;
    } else {
        return true; /* unknown: on_body's limits apply */
    }
    x->why_remove = true;
    if (x->expected && total != x->expected) {
        snprintf(x->why, sizeof x->why, "the server announces %llu bytes; the index lists %llu", total,
                 (unsigned long long)x->expected);
        return false;
    }
    if (total > x->o->max_file_size) {
        snprintf(x->why, sizeof x->why, "the server announces %llu bytes, more than the limit of %llu "
                 "(BLOCKDRAFT_MAX_FILE_SIZE)", total, (unsigned long long)x->o->max_file_size);
        return false;
    }
    struct statvfs vs;
    if (total > x->base && fstatvfs(x->fd, &vs) == 0 &&
        (unsigned long long)vs.f_bavail * vs.f_frsize < total - x->base) {
        snprintf(x->why, sizeof x->why, "%llu more bytes do not fit: %llu bytes free on the disk",
                 total - x->base, (unsigned long long)vs.f_bavail * vs.f_frsize);
        x->why_remove = false; /* the bytes so far are fine; resume once there is room */
        return false;
    }
    x->why_remove = false;
    return true;
}

static size_t on_body(char *data, size_t sz, size_t nm, void *ctx) {
    xfer *x = ctx;
    size_t len = sz * nm;
    if (!x->decided) {
        x->decided = true;
        long status = 0;
        curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &status);
        if (x->range && x->is_file) {
            /* libcurl's file:// reads the requested range itself: the body
             * continues the partial (there is no status or Content-Range) */
        } else if (x->range && status == 206) {
            unsigned long long start = 0;
            if (sscanf(x->content_range, " bytes %llu-", &start) != 1 || start != x->base) {
                snprintf(x->why, sizeof x->why,
                         "server answered the resume request with Content-Range '%s', expected "
                         "bytes %llu-",
                         x->content_range, (unsigned long long)x->base);
                x->why_retry = true;
                return 0;
            }
        } else if (x->base > 0) {
            /* 200 (or a scheme without ranges): the body is the whole file. */
            if (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0 ||
                !EVP_DigestInit_ex(x->md, EVP_sha256(), NULL)) {
                snprintf(x->why, sizeof x->why, "cannot restart the partial file: %s",
                         strerror(errno));
                return 0;
            }
            x->base = 0;
            x->restarted = true;
        }
        if (!check_announced(x)) return 0;
    }
    /* Never more than the index's size or the cap, whatever the server
     * sends (a body without a length can be endless). */
    uint64_t limit = x->expected ? x->expected : x->o->max_file_size;
    if (x->base + x->got + len > limit) {
        if (x->expected)
            snprintf(x->why, sizeof x->why, "the server sent more than the %llu bytes the index lists",
                     (unsigned long long)x->expected);
        else
            snprintf(x->why, sizeof x->why,
                     "the server sent more than the limit of %llu bytes (BLOCKDRAFT_MAX_FILE_SIZE)",
                     (unsigned long long)limit);
        x->why_remove = true;
        return 0;
    }
    if (!write_all(x->fd, data, len)) {
        /* the disk is full or the file cannot grow: the bytes written so
         * far cannot be verified, and keeping them would keep the disk full */
        snprintf(x->why, sizeof x->why, "cannot write %s: %s", x->label, strerror(errno));
        x->why_remove = true;
        return 0;
    }
    EVP_DigestUpdate(x->md, data, len);
    x->got += len;
    x->last_data = bd_time_ms();
    return len;
}

static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    (void)ultotal;
    (void)ulnow;
    (void)dlnow;
    xfer *x = ctx;
    double now = bd_time_ms();
    if (cancelled(x->o)) {
        x->cancelled = true;
        return 1;
    }
    /* Stall watchdog: libcurl's low-speed limit averages over a window of
     * several seconds, so a burst followed by silence is noticed late;
     * this checks the time since the last byte directly (libcurl calls
     * this function at least once a second while idle). */
    if (now - x->last_data > x->o->stall_timeout_s * 1000.0) {
        x->stalled = true;
        return 1;
    }
    if (!x->o->progress) return 0;
    if (now - x->last_cb < 100) return 0;
    x->last_cb = now;
    double secs = (now - x->t0) / 1000.0;
    fetch_event ev = {FETCH_PHASE_PROGRESS,
                      x->label,
                      x->base + x->got,
                      dltotal > 0 ? x->base + (uint64_t)dltotal : 0,
                      secs > 0 ? (double)x->got / secs : 0,
                      x->attempt,
                      NULL};
    x->o->progress(x->o->progress_ctx, &ev);
    return 0;
}

static void emit(const fetch_opts *o, enum fetch_phase ph, const char *label, uint64_t done,
                 uint64_t total, int attempt, const char *msg) {
    if (!o->progress) return;
    fetch_event ev = {ph, label, done, total, 0, attempt, msg};
    o->progress(o->progress_ctx, &ev);
}

/* One fetch_file call: the partial file, its running hash and what the
 * attempts have learnt. */
typedef struct fetch_state {
    const char *url, *partial_path, *label;
    const fetch_opts *o;
    fetch_result *res;
    uint64_t expected;   /* the index's size, 0 when none */
    bool remove;         /* the partial is to be removed when the call fails */
    bool check;          /* an expected SHA-256 was given */
    char want[65];       /* it, lower-case */
    int fd;
    EVP_MD_CTX *md;      /* SHA-256 of the partial's first `hashed` bytes */
    uint64_t hashed;
    bool fresh_retry_used;
    char last[512];      /* the last failure, for the retry message */
    char *err;
    size_t errlen;
} fetch_state;

/* What to do after an attempt (judge_*). */
enum { FETCH_DONE = 0, FETCH_RETRY = 1, FETCH_RETRY_NOW = 2, FETCH_FAIL = 3 };

/* Empty the partial file and its hash (its bytes are wrong or cannot be
 * continued). */
static bool restart_partial(fetch_state *f) {
    if (ftruncate(f->fd, 0) != 0 || !EVP_DigestInit_ex(f->md, EVP_sha256(), NULL))
        return bd_err(f->err, f->errlen, "%s: %s", f->partial_path, strerror(errno));
    f->hashed = 0;
    f->res->resumed = false;
    return true;
}

/* Open the partial file and hash what it holds, before any request (so
 * the stall timer never runs during a long re-hash). *complete: it already
 * has the expected bytes (finished earlier, not yet moved into place). */
static bool open_partial(fetch_state *f, const char *expected_sha256, bool *complete) {
    *complete = false;
    if (f->check) {
        if (!fetch_sha256_valid(expected_sha256))
            return bd_err(f->err, f->errlen, "%s: '%s' is not a SHA-256 (64 hex digits)", f->label,
                          expected_sha256);
        for (int i = 0; i < 64; i++) {
            char ch = expected_sha256[i];
            f->want[i] = (ch >= 'A' && ch <= 'F') ? (char)(ch - 'A' + 'a') : ch;
        }
        f->want[64] = 0;
    }
    /* Written through only when it is a plain file of its own: a symlink
     * or a hard link planted at the partial's name could point anywhere
     * (O_NOFOLLOW refuses the first, the link count the second;
     * O_NONBLOCK keeps a FIFO from blocking the open). */
    f->fd = open(f->partial_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (f->fd < 0 && errno == ELOOP)
        return bd_err(f->err, f->errlen, "%s is not a regular file (a symlink); remove it and pull again",
                      f->partial_path);
    if (f->fd < 0) return bd_err(f->err, f->errlen, "cannot open %s: %s", f->partial_path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0) return bd_err(f->err, f->errlen, "%s: %s", f->partial_path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return bd_err(f->err, f->errlen, "%s is not a regular file; remove it and pull again", f->partial_path);
    if (st.st_nlink != 1)
        return bd_err(f->err, f->errlen, "%s has other links (hard links to it); remove it and pull again",
                      f->partial_path);
    if (f->expected && (uint64_t)st.st_size > f->expected) {
        /* more bytes than the file can have: nothing to resume */
        if (ftruncate(f->fd, 0) != 0) return bd_err(f->err, f->errlen, "%s: %s", f->partial_path, strerror(errno));
    }
    f->md = EVP_MD_CTX_new();
    if (!f->md) return bd_err(f->err, f->errlen, "out of memory");
    if (!hash_fd(f->fd, f->md, &f->hashed, f->o, f->label, f->err, f->errlen)) return false;
    if (f->hashed > 0) {
        f->res->resumed = true;
        if (f->check) {
            char have[65];
            md_hex(f->md, have);
            if (!strcmp(have, f->want)) {
                f->res->no_network = true;
                f->res->bytes = f->hashed;
                snprintf(f->res->sha256, sizeof f->res->sha256, "%s", have);
                *complete = true;
            }
        }
    }
    return true;
}

/* One libcurl transfer appending to the partial from byte `hashed` (a
 * range request when there is something to continue). */
static bool transfer(fetch_state *f, int attempt, xfer *x, CURLcode *rc, long *status, curl_off_t *expect,
                     char cerr[CURL_ERROR_SIZE]) {
    struct stat st;
    if (fstat(f->fd, &st) != 0) return bd_err(f->err, f->errlen, "%s: %s", f->partial_path, strerror(errno));
    if ((uint64_t)st.st_size != f->hashed) { /* never trust a hash of other bytes */
        if (!hash_fd(f->fd, f->md, &f->hashed, f->o, f->label, f->err, f->errlen)) return false;
    }
    if (lseek(f->fd, (off_t)f->hashed, SEEK_SET) < 0)
        return bd_err(f->err, f->errlen, "%s: %s", f->partial_path, strerror(errno));
    *x = (xfer){.fd = f->fd, .md = f->md, .base = f->hashed, .range = f->hashed > 0, .o = f->o,
                .label = f->label, .attempt = attempt, .expected = f->expected,
                .is_file = !strncasecmp(f->url, "file://", 7)};
    CURL *c = curl_easy_init();
    if (!c) return bd_err(f->err, f->errlen, "cannot initialise libcurl");
    x->c = c;
    struct curl_slist *hdrs = auth_headers(f->url, f->o);
    char range[32];
    cerr[0] = 0;
    setup_common(c, f->url, f->o, hdrs);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    if (x->range) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)f->hashed);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    emit(f->o, FETCH_PHASE_START, f->label, f->hashed, 0, attempt, NULL);
    x->t0 = x->last_cb = x->last_data = bd_time_ms();
    *rc = curl_easy_perform(c);
    if (*rc == CURLE_ABORTED_BY_CALLBACK && x->stalled) *rc = CURLE_OPERATION_TIMEDOUT;
    *status = 0;
    *expect = -1;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, expect);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    f->hashed = x->base + x->got;
    if (x->restarted) f->res->resumed = false;
    return true;
}

/* A transfer that completed: keep the file if its hash is right; a wrong
 * file is never kept (one fresh download if it was a resume). */
static int judge_complete(fetch_state *f, int attempt, const xfer *x) {
    if (fsync(f->fd) != 0) return bd_err(f->err, f->errlen, "%s: fsync: %s", f->partial_path, strerror(errno)), FETCH_FAIL;
    char have[65];
    md_hex(f->md, have);
    if (f->expected && f->hashed != f->expected) {
        f->remove = true;
        bd_err(f->err, f->errlen, "%s: got %llu bytes; the index lists %llu (%s); the partial download was removed",
               f->label, (unsigned long long)f->hashed, (unsigned long long)f->expected, f->url);
        return FETCH_FAIL;
    }
    if (!f->check || !strcmp(have, f->want)) {
        f->res->bytes = f->hashed;
        snprintf(f->res->sha256, sizeof f->res->sha256, "%s", have);
        emit(f->o, FETCH_PHASE_DONE, f->label, f->hashed, f->hashed, attempt, NULL);
        return FETCH_DONE;
    }
    bool was_resumed = f->res->resumed;
    if (!restart_partial(f)) return FETCH_FAIL;
    if (was_resumed && !f->fresh_retry_used) {
        /* The old partial may have come from an earlier upload of the
         * file; one download from scratch settles it. */
        f->fresh_retry_used = true;
        snprintf(f->last, sizeof f->last,
                 "SHA-256 mismatch after resuming (got %s); downloading once more from scratch", have);
        emit(f->o, FETCH_PHASE_RETRY, f->label, 0, 0, attempt, f->last);
        return FETCH_RETRY_NOW;
    }
    unlink(f->partial_path);
    bd_err(f->err, f->errlen,
           "SHA-256 mismatch for %s: expected %s, got %s (%llu bytes from %s); the partial download was removed",
           f->label, f->want, have, (unsigned long long)x->base + x->got, f->url);
    return FETCH_FAIL;
}

/* A transfer that failed: FETCH_RETRY (f->last says why) or FETCH_FAIL. */
static int judge_failure(fetch_state *f, const xfer *x, CURLcode rc, long status, curl_off_t expect,
                         const char *cerr) {
    if (x->cancelled) {
        bd_err(f->err, f->errlen, "%s: cancelled%s%s%s", f->label, f->hashed ? "; the bytes so far are kept in " : "",
               f->hashed ? f->partial_path : "", f->hashed ? " for a later resume" : "");
        return FETCH_FAIL;
    }
    if (x->why[0]) {
        if (x->why_remove) {
            f->remove = true;
            bd_err(f->err, f->errlen, "%s: %s (%s); the partial download was removed", f->label, x->why, f->url);
            return FETCH_FAIL;
        }
        if (!x->why_retry) return bd_err(f->err, f->errlen, "%s: %s", f->label, x->why), FETCH_FAIL;
        /* Inconsistent resume: drop the partial and start over. */
        if (!restart_partial(f)) return FETCH_FAIL;
        snprintf(f->last, sizeof f->last, "%s", x->why);
        return FETCH_RETRY;
    }
    if (rc == CURLE_HTTP_RETURNED_ERROR && status == 416 && x->range) {
        /* The partial is not a prefix the server can continue. */
        if (!restart_partial(f)) return FETCH_FAIL;
        snprintf(f->last, sizeof f->last, "server refused to resume (HTTP 416); starting over");
        return FETCH_RETRY;
    }
    describe_failure(f->last, sizeof f->last, rc, status, cerr, f->o, x->base + x->got,
                     expect >= 0 ? (curl_off_t)x->base + expect : -1);
    if (!transient(rc, status)) return bd_err(f->err, f->errlen, "%s: %s (%s)", f->label, f->last, f->url), FETCH_FAIL;
    return FETCH_RETRY;
}

bool fetch_file(const char *url, const char *partial_path, const char *expected_sha256, uint64_t expected_size,
                const char *label, const fetch_opts *o, fetch_result *res, char *err,
                size_t errlen) {
    pthread_once(&curl_once, curl_init_once);
    memset(res, 0, sizeof *res);
    fetch_state f = {.url = url, .partial_path = partial_path, .label = label, .o = o, .res = res,
                     .check = expected_sha256 && *expected_sha256, .fd = -1, .err = err, .errlen = errlen,
                     .expected = expected_size};
    bool ok = false, complete;
    if (!open_partial(&f, expected_sha256, &complete)) goto out;
    if (complete) {
        ok = true;
        goto out;
    }
    for (int attempt = 1;; attempt++) {
        res->attempts = attempt;
        xfer x;
        CURLcode rc = CURLE_OK;
        long status = 0;
        curl_off_t expect = -1;
        char cerr[CURL_ERROR_SIZE];
        if (!transfer(&f, attempt, &x, &rc, &status, &expect, cerr)) goto out;
        int verdict = rc == CURLE_OK ? judge_complete(&f, attempt, &x) : judge_failure(&f, &x, rc, status, expect, cerr);
        if (verdict == FETCH_DONE) {
            ok = true;
            goto out;
        }
        if (verdict == FETCH_FAIL) goto out;
        if (verdict == FETCH_RETRY_NOW) continue; /* at once: no back-off, no limit check this time */
        if (attempt >= o->max_attempts) {
            if (f.hashed > 0)
                bd_err(err, errlen,
                       "%s: giving up after %d attempts: %s (%s); %llu bytes kept in %s for a later resume", label,
                       attempt, f.last, url, (unsigned long long)f.hashed, partial_path);
            else
                bd_err(err, errlen, "%s: giving up after %d attempts: %s (%s)", label, attempt, f.last, url);
            goto out;
        }
        int delay = backoff_ms(o, attempt);
        char msg[700];
        snprintf(msg, sizeof msg, "%s; retrying in %.1f s (attempt %d of %d)", f.last, delay / 1000.0, attempt + 1,
                 o->max_attempts);
        emit(o, FETCH_PHASE_RETRY, label, f.hashed, 0, attempt, msg);
        for (int waited = 0; waited < delay && !cancelled(o); waited += 100) sleep_ms(delay - waited < 100 ? delay - waited : 100);
        if (cancelled(o)) {
            bd_err(err, errlen, "%s: cancelled%s%s", label, f.hashed ? "; the bytes so far are kept in " : "",
                   f.hashed ? partial_path : "");
            goto out;
        }
    }
out:
    EVP_MD_CTX_free(f.md);
    if (f.fd >= 0) {
        /* An empty partial carries nothing worth resuming. */
        struct stat fin;
        if (!ok && (f.remove || (fstat(f.fd, &fin) == 0 && fin.st_size == 0))) unlink(partial_path);
        close(f.fd);
    }
    return ok;
}
