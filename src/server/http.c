/*
 * http.c - libmicrohttpd glue: one thread per connection, request bodies
 * collected up to a limit, API keys checked before any body byte is read,
 * routing, CORS, JSON and SSE responses, and the liveness probe that turns
 * a vanished client into a cancelled job.
 *
 * Before a request is read (any route, the public ones included):
 *   Host    when bound to a loopback address, only localhost names and
 *           loopback addresses are answered (403 otherwise): a web page
 *           that rebinds its own DNS name to 127.0.0.1 still sends its
 *           name, so it cannot reach the server (Ollama does the same).
 *   Origin  a request that carries one (a browser's cross-site request)
 *           is refused (403) unless the origin is listed by --cors
 *           (comma-separated; * for any) or is the server's own
 *           http://localhost:PORT; CORS headers are sent only to allowed
 *           origins.
 *   auth    API keys (401).
 *   type    a POST must say Content-Type: application/json (415): the
 *           types a page may send cross-site without a preflight
 *           (text/plain, forms, none) never reach a handler.
 *
 * Connections (slowloris): libmicrohttpd's limit is the configured one
 * plus some slack; above the configured number, a new connection evicts
 * the oldest connection that has not delivered a complete request yet
 * (idle keep-alive, headers or body still trickling), preferring the
 * client address that holds the most connections; one whose request is
 * being handled is never evicted. A connection that has not completed a
 * request within SRV_HEADER_TIMEOUT_S is closed at the next arrival.
 * Eviction is shutdown(2) on the socket: libmicrohttpd's connection
 * thread sees the end of the stream and cleans up as for any client that
 * left.
 */
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "compat.h"

#define ERR_FORBIDDEN "invalid_request_error"
#define SRV_HEADER_TIMEOUT_S 10.0 /* a connection must deliver a whole request within this */
#define SRV_CONN_SLACK 16         /* connections libmicrohttpd accepts beyond conn_limit, to evict from */

/* ------------------------------------------------------------------------
 * Connection tracking
 * ---------------------------------------------------------------------- */

enum { CONN_WAITING = 0, CONN_READING = 1, CONN_HANDLING = 2 };

typedef struct srv_conn {
    int fd;
    char ip[64];
    double since;  /* connected, or last request completed */
    int phase;     /* CONN_* */
    struct srv_conn *next;
} srv_conn;

struct srv_conns {
    pthread_mutex_t mu;
    srv_conn *list;
    int n;
    uint64_t evicted;
};

static srv_conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_phase(server *s, struct MHD_Connection *c, int phase) {
    srv_conn *k = conn_of(c);
    if (!k || !s->conns) return;
    pthread_mutex_lock(&s->conns->mu);
    k->phase = phase;
    if (phase == CONN_WAITING) k->since = bd_time_ms();
    pthread_mutex_unlock(&s->conns->mu);
}

/* Under conns->mu: the evictable connection to close -- of the address
 * holding the most connections, the oldest -- or NULL. */
static srv_conn *evict_pick(struct srv_conns *cs, const srv_conn *except) {
    srv_conn *best = NULL;
    int best_n = 0;
    for (srv_conn *k = cs->list; k; k = k->next) {
        if (k == except || k->phase == CONN_HANDLING || k->fd < 0) continue;
        int same = 0;
        for (srv_conn *o = cs->list; o; o = o->next) same += !strcmp(o->ip, k->ip);
        if (!best || same > best_n || (same == best_n && k->since < best->since)) {
            best = k;
            best_n = same;
        }
    }
    return best;
}

static void evict(struct srv_conns *cs, srv_conn *k) {
    shutdown(k->fd, SHUT_RDWR); /* the connection's thread sees EOF and closes it */
    k->fd = -1;                 /* once is enough */
    cs->evicted++;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    server *s = cls;
    struct srv_conns *cs = s->conns;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        srv_conn *k = *socket_context;
        if (!k) return;
        pthread_mutex_lock(&cs->mu);
        for (srv_conn **pp = &cs->list; *pp; pp = &(*pp)->next)
            if (*pp == k) {
                *pp = k->next;
                cs->n--;
                break;
            }
        pthread_mutex_unlock(&cs->mu);
        free(k);
        *socket_context = NULL;
        return;
    }
    srv_conn *k = calloc(1, sizeof *k);
    if (!k) return;
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    k->fd = fi ? fi->connect_fd : -1;
    if (ai && ai->client_addr) {
        const struct sockaddr *sa = ai->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, k->ip, sizeof k->ip);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, k->ip, sizeof k->ip);
    }
    k->since = bd_time_ms();
    k->phase = CONN_WAITING;
    *socket_context = k;
    pthread_mutex_lock(&cs->mu);
    /* the ones that had their time, then room for this one */
    double now = k->since;
    for (srv_conn *o = cs->list; o; o = o->next)
        if (o->phase != CONN_HANDLING && o->fd >= 0 && now - o->since > SRV_HEADER_TIMEOUT_S * 1e3) evict(cs, o);
    k->next = cs->list;
    cs->list = k;
    cs->n++;
    int live = 0;
    for (srv_conn *o = cs->list; o; o = o->next) live += o->fd >= 0;
    while (live > s->p.conn_limit) {
        srv_conn *v = evict_pick(cs, k);
        if (!v) v = k; /* every other one is being handled: no room */
        evict(cs, v);
        live--;
        if (v == k) break;
    }
    pthread_mutex_unlock(&cs->mu);
}

/* ------------------------------------------------------------------------
 * Host, Origin, Content-Type
 * ---------------------------------------------------------------------- */

/* host (no port) is a loopback address or a localhost name. */
static bool local_name(const char *h, size_t n) {
    char b[256];
    if (n == 0 || n >= sizeof b) return false;
    for (size_t i = 0; i < n; i++) b[i] = (char)tolower((unsigned char)h[i]);
    b[n] = 0;
    if (!strcmp(b, "localhost") || (n > 10 && !strcmp(b + n - 10, ".localhost"))) return true;
    if (b[0] == '[' && b[n - 1] == ']') {
        b[n - 1] = 0;
        struct in6_addr a6;
        return inet_pton(AF_INET6, b + 1, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
    }
    struct in_addr a4;
    if (inet_pton(AF_INET, b, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    char me[256];
    if (gethostname(me, sizeof me) == 0) {
        me[sizeof me - 1] = 0;
        for (char *p = me; *p; p++) *p = (char)tolower((unsigned char)*p);
        if (!strcmp(b, me)) return true;
    }
    return false;
}

/* "host[:port]" -> the host part's length; *port -1 when absent. */
static size_t split_port(const char *hp, long *port) {
    size_t n = strlen(hp);
    *port = -1;
    const char *colon = NULL;
    if (hp[0] == '[') {
        const char *rb = strchr(hp, ']');
        if (!rb) return n;
        if (rb[1] == ':') colon = rb + 1;
        n = (size_t)(rb + 1 - hp);
    } else if ((colon = strrchr(hp, ':')) != NULL) {
        n = (size_t)(colon - hp);
    }
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end || v < 0 || v > 65535) return 0;
        *port = v;
    }
    return n;
}

/* A --cors entry that matches origin, or NULL (origins compare without
 * regard to case). */
static const char *cors_match(const server *s, const char *origin, char *buf, size_t n) {
    const char *list = s->p.cors_origin;
    if (!list || !origin) return NULL;
    size_t ol = strlen(origin);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t l = strcspn(p, ",");
        while (l && p[l - 1] == ' ') l--;
        if (l == 1 && *p == '*') return snprintf(buf, n, "*"), buf;
        if (l == ol && !strncasecmp(p, origin, l)) return snprintf(buf, n, "%s", origin), buf;
        p += strcspn(p, ",");
    }
    return NULL;
}

/* The server's own origin: http://LOCALNAME:PORT. */
static bool own_origin(const server *s, const char *origin) {
    if (strncasecmp(origin, "http://", 7)) return false;
    long port;
    size_t hl = split_port(origin + 7, &port);
    return hl && port == s->port && local_name(origin + 7, hl);
}

/* NULL when the request may go on, else the 403's message in buf. */
static const char *foreign_request(srv_req *r, char *buf, size_t n) {
    server *s = r->srv;
    const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
    if (s->loopback && host) {
        long port;
        size_t hl = split_port(host, &port);
        if (!hl || !local_name(host, hl)) {
            snprintf(buf, n, "Host '%.200s' is not answered: this server listens on a loopback address and answers "
                     "only localhost names (a protection against DNS rebinding); bind it with --host to serve "
                     "other names", host);
            return buf;
        }
    }
    const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
    char m[8];
    if (origin && !cors_match(s, origin, m, sizeof m) && !own_origin(s, origin)) {
        snprintf(buf, n, "requests from the web origin '%.200s' are not allowed (a page of another site); "
                 "start the server with --cors %.200s to allow them", origin, origin);
        return buf;
    }
    return NULL;
}

static bool json_content_type(const char *ct) {
    if (!ct) return false;
    while (*ct == ' ') ct++;
    size_t l = strlen("application/json");
    if (strncasecmp(ct, "application/json", l)) return false;
    return ct[l] == 0 || ct[l] == ';' || ct[l] == ' ';
}

/* Per-connection request state (MHD's con_cls). */
typedef struct http_ctx {
    char *body; /* [cap] */
    size_t len, cap;
    bool too_big;
    bool responded; /* a response was queued before the body was read */
    double t0;
    int status;
} http_ctx;

/* ------------------------------------------------------------------------
 * Response helpers
 * ---------------------------------------------------------------------- */

static void add_common_headers(srv_req *r, struct MHD_Response *resp) {
    const char *list = r->srv->p.cors_origin;
    if (list) {
        /* the request's origin when --cors lists it; without an Origin
         * header, a single listed origin (or *) as before */
        const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
        char buf[512];
        const char *allow = origin ? cors_match(r->srv, origin, buf, sizeof buf) : (!strchr(list, ',') ? list : NULL);
        if (allow) MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    if (r->retry_after) MHD_add_response_header(resp, "Retry-After", r->retry_after);
}

static int queue(srv_req *r, int status, struct MHD_Response *resp) {
    if (!resp) {
        r->status = 500;
        return MHD_NO;
    }
    add_common_headers(r, resp);
    enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->status = status;
    srv_metrics_request(r->srv, status);
    return rc;
}

int srv_send_text(srv_req *r, int status, const char *ctype, const char *text) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (resp) MHD_add_response_header(resp, "Content-Type", ctype);
    return queue(r, status, resp);
}

int srv_send_json(srv_req *r, int status, json_t *body) {
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!s) return srv_send_text(r, 500, "application/json",
                                 "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(s);
        return queue(r, 500, NULL);
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    return queue(r, status, resp);
}

int srv_send_error(srv_req *r, int status, const char *type, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_object();
    /* json_string refuses invalid UTF-8; messages may quote user input */
    json_t *m = json_string(msg);
    json_object_set_new(e, "message", m ? m : json_string("(message not valid UTF-8)"));
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "param", json_null());
    json_object_set_new(e, "code", code ? json_string(code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", e);
    return srv_send_json(r, status, root);
}

/* ------------------------------------------------------------------------
 * Streaming
 * ---------------------------------------------------------------------- */

/* Gone means reset or hung up (POLLHUP/POLLERR). The end of the stream
 * the client sends (a FIN) is not: a client may half-close its socket
 * after its request and still read the answer (HTTP allows it, and some
 * clients do). A client that closed its socket completely looks the same
 * as a half-close until something is written to it: a stream notices at
 * its next token (the write is refused), a non-streamed request runs to
 * its end (bounded by max_tokens and --timeout). */
bool srv_client_alive(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = 0};
    if (poll(&p, 1, 0) < 0) return errno == EINTR;
    return !(p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    srv_stream *st = cls;
    for (;;) {
        if (st->off < st->len) {
            size_t n = st->len - st->off < max ? st->len - st->off : max;
            memcpy(buf, st->buf + st->off, n);
            st->off += n;
            return (ssize_t)n;
        }
        free(st->buf);
        st->buf = NULL;
        st->len = st->off = 0;
        if (st->done) return MHD_CONTENT_READER_END_OF_STREAM;
        size_t n = 0;
        bool done = false;
        char *c = st->next(st, &n, &done);
        if (c) {
            st->buf = c;
            st->len = n;
        }
        if (done) st->done = true;
        if (!c && !done && !srv_client_alive(st->conn)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void stream_free(void *cls) {
    srv_stream *st = cls;
    free(st->buf);
    st->buf = NULL;
    st->release(st);
}

int srv_send_stream(srv_req *r, srv_stream *st) {
    st->conn = r->conn;
    st->srv = r->srv;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
    if (!resp) {
        st->release(st);
        return srv_send_error(r, 500, "server_error", NULL, "out of memory");
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    return queue(r, 200, resp);
}

/* ------------------------------------------------------------------------
 * Auth and routing
 * ---------------------------------------------------------------------- */

static bool authorized(srv_req *r) {
    if (r->srv->n_keys == 0) return true;
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
    const char *key = NULL;
    if (h) {
        key = h;
        if (!strncasecmp(h, "Bearer ", 7)) key = h + 7;
        while (*key == ' ') key++;
    } else {
        key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Api-Key");
    }
    return key && srv_auth_check(r->srv, key);
}

static int send_401(srv_req *r) {
    json_t *e = json_pack("{s:{s:s,s:s,s:n,s:s}}", "error", "message",
                          "Invalid or missing API key (send Authorization: Bearer KEY)", "type",
                          "invalid_request_error", "param", "code", "invalid_api_key");
    char *s = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    struct MHD_Response *resp = s ? MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(s);
        return queue(r, 500, NULL);
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    return queue(r, 401, resp);
}

static bool is_public(const char *method, const char *url) {
    return !strcmp(method, "GET") && (!strcmp(url, "/health") || !strcmp(url, "/ready") ||
                                      !strcmp(url, "/v1/health"));
}

static int route(srv_req *r) {
    const char *m = r->method, *u = r->url;
    bool get = !strcmp(m, "GET"), post = !strcmp(m, "POST");
    conn_phase(r->srv, r->conn, CONN_HANDLING);
    if (!strcmp(m, "OPTIONS") && r->srv->p.cors_origin) {
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (resp) {
            MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            /* allow the headers the browser asks for (the openai client
             * sends x-stainless-*): echoed when they are a plain list of
             * header names, else the ones this server reads */
            const char *rh = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
            bool plain = rh && rh[0] && strlen(rh) <= 2048;
            for (const char *c = rh; plain && *c; c++)
                plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                        strchr("-_, ", *c) != NULL;
            MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                    plain ? rh : "Authorization, Content-Type, X-Api-Key");
            MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
        }
        return queue(r, 204, resp);
    }
    /* /health, /v1/models, llama-server's and LocalAI's endpoints, /v1/responses */
    int crc;
    if (compat_route(r, &crc)) return crc;
    if (!strcmp(u, "/ready")) {
        if (!get) goto bad_method;
        if (atomic_load(&r->srv->stopping))
            return srv_send_text(r, 503, "application/json", "{\"status\":\"stopping\"}");
        if (!atomic_load(&r->srv->ready))
            return srv_send_text(r, 503, "application/json", "{\"status\":\"loading\"}");
        return srv_send_text(r, 200, "application/json", "{\"status\":\"ready\"}");
    }
    if (!strcmp(u, "/metrics")) {
        if (!get) goto bad_method;
        char *t = srv_metrics_text(r->srv);
        if (!t) return srv_send_error(r, 500, "server_error", NULL, "out of memory");
        int rc = srv_send_text(r, 200, "text/plain; version=0.0.4", t);
        free(t);
        return rc;
    }
    bool work = !strcmp(u, "/v1/chat/completions") || !strcmp(u, "/chat/completions") ||
                !strcmp(u, "/v1/completions");
    if (work && post && atomic_load(&r->srv->stopping))
        return srv_send_error(r, 503, "server_error", "shutting_down", "the server is shutting down");
    if (!strcmp(u, "/v1/chat/completions") || !strcmp(u, "/chat/completions")) {
        if (!post) goto bad_method;
        return api_chat(r);
    }
    if (!strcmp(u, "/v1/completions")) {
        if (!post) goto bad_method;
        return api_completions(r);
    }
    return srv_send_error(r, 404, "invalid_request_error", "not_found", "no route for %s %s", m, u);
bad_method:
    return srv_send_error(r, 405, "invalid_request_error", "method_not_allowed", "%s is not allowed on %s", m, u);
}

/* ------------------------------------------------------------------------
 * MHD callbacks
 * ---------------------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    server *s = cls;
    http_ctx *cx = *con_cls;
    srv_req r = {.srv = s, .conn = conn, .method = method, .url = url};
    if (!cx) {
        cx = calloc(1, sizeof *cx);
        if (!cx) return MHD_NO;
        cx->t0 = bd_time_ms();
        *con_cls = cx;
        atomic_fetch_add(&s->active_requests, 1);
        conn_phase(s, conn, CONN_READING);
        /* reject before reading the body: Host and Origin, auth, the body's
         * type, then a declared size over the limit */
        char why[600];
        if (foreign_request(&r, why, sizeof why)) {
            cx->responded = true;
            enum MHD_Result rc = (enum MHD_Result)srv_send_error(&r, 403, ERR_FORBIDDEN, "forbidden", "%s", why);
            cx->status = r.status;
            return rc;
        }
        if (!is_public(method, url) && strcmp(method, "OPTIONS") && !authorized(&r)) {
            cx->responded = true;
            enum MHD_Result rc = (enum MHD_Result)send_401(&r);
            cx->status = r.status;
            return rc;
        }
        if (!strcmp(method, "POST") &&
            !json_content_type(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE))) {
            cx->responded = true;
            enum MHD_Result rc = (enum MHD_Result)srv_send_error(
                &r, 415, "invalid_request_error", "unsupported_media_type",
                "a POST body must be JSON sent with Content-Type: application/json (curl: -H 'Content-Type: "
                "application/json')");
            cx->status = r.status;
            return rc;
        }
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(cl, &end, 10);
            if (errno || end == cl || v > s->p.max_body) {
                cx->responded = true;
                enum MHD_Result rc = (enum MHD_Result)srv_send_error(
                    &r, 413, "invalid_request_error", "body_too_large",
                    "request body larger than the limit of %zu bytes", s->p.max_body);
                cx->status = r.status;
                return rc;
            }
        }
        return MHD_YES;
    }
    if (cx->responded) {
        *upload_data_size = 0; /* discard whatever still arrives */
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cx->too_big || n > s->p.max_body - cx->len) {
            cx->too_big = true;
            return MHD_YES;
        }
        if (!bd_grow(&cx->body, &cx->cap, cx->len + n + 1, 1)) {
            cx->too_big = true;
            return MHD_YES;
        }
        memcpy(cx->body + cx->len, upload_data, n);
        cx->len += n;
        cx->body[cx->len] = '\0';
        return MHD_YES;
    }
    /* the whole request is here */
    enum MHD_Result rc;
    if (cx->too_big) {
        rc = (enum MHD_Result)srv_send_error(&r, 413, "invalid_request_error", "body_too_large",
                                             "request body larger than the limit of %zu bytes", s->p.max_body);
    } else {
        r.body = cx->body ? cx->body : "";
        r.body_len = cx->len;
        rc = (enum MHD_Result)route(&r);
    }
    cx->status = r.status;
    cx->responded = true;
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    server *s = cls;
    http_ctx *cx = *con_cls;
    if (!cx) return;
    if (s->p.verbose)
        fprintf(stderr, "serve: %d %.1f ms%s\n", cx->status, bd_time_ms() - cx->t0,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    free(cx->body);
    free(cx);
    *con_cls = NULL;
    conn_phase(s, conn, CONN_WAITING);
    atomic_fetch_sub(&s->active_requests, 1);
}

static void on_log(void *cls, const char *fmt, va_list ap) {
    server *s = cls;
    if (!s->p.verbose) return;
    fprintf(stderr, "serve: libmicrohttpd: ");
    vfprintf(stderr, fmt, ap);
}

/* Start the daemon on host:port. */

bool srv_http_start(server *s, char *err, size_t errlen) {
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    struct sockaddr *addr;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, s->host, &a4.sin_addr) == 1) {
        s->loopback = (ntohl(a4.sin_addr.s_addr) >> 24) == 127;
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)s->p.port);
        addr = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, s->host, &a6.sin6_addr) == 1) {
        s->loopback = IN6_IS_ADDR_LOOPBACK(&a6.sin6_addr);
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)s->p.port);
        addr = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        return bd_err(err, errlen, "--host '%s' is not a numeric IPv4 or IPv6 address", s->host);
    }
    s->conns = calloc(1, sizeof *s->conns);
    if (!s->conns) return bd_err(err, errlen, "out of memory");
    pthread_mutex_init(&s->conns->mu, NULL);
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->p.port, NULL, NULL, on_request, s,
                              MHD_OPTION_EXTERNAL_LOGGER, on_log, s,
                              MHD_OPTION_SOCK_ADDR, addr,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->p.conn_limit + SRV_CONN_SLACK,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                              MHD_OPTION_END);
    if (!s->mhd) return bd_err(err, errlen, "cannot listen on %s:%d (%s)", s->host, s->p.port, strerror(errno));
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->p.port;
    return true;
}


void srv_http_quiesce(server *s) {
    if (s->mhd) {
        MHD_socket fd = MHD_quiesce_daemon(s->mhd);
        if (fd != MHD_INVALID_SOCKET) close(fd);
    }
}


void srv_http_stop(server *s) {
    if (s->mhd) MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    if (s->conns) {
        pthread_mutex_destroy(&s->conns->mu);
        free(s->conns);
        s->conns = NULL;
    }
}
