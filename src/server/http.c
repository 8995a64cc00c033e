/*
 * http.c - libmicrohttpd glue: one thread per connection, request bodies
 * collected up to a limit, API keys checked before any body byte is read,
 * routing, CORS, JSON and SSE responses, and the liveness probe that turns
 * a vanished client into a cancelled job.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "server_int.h"

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
    if (r->srv->p.cors_origin) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->srv->p.cors_origin);
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

bool srv_client_alive(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return true;
    if (n == 0) return false; /* orderly shutdown by the peer */
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
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
    if (!strcmp(u, "/health") || !strcmp(u, "/v1/health")) {
        if (!get) goto bad_method;
        return srv_send_text(r, 200, "application/json", "{\"status\":\"ok\"}");
    }
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
    if (!strcmp(u, "/v1/models") || !strcmp(u, "/models")) {
        if (!get) goto bad_method;
        return api_models(r);
    }
    bool work = !strcmp(u, "/v1/chat/completions") || !strcmp(u, "/chat/completions") ||
                !strcmp(u, "/v1/completions") || !strcmp(u, "/completions") || !strcmp(u, "/models/apply");
    if (work && post && atomic_load(&r->srv->stopping))
        return srv_send_error(r, 503, "server_error", "shutting_down", "the server is shutting down");
    if (!strcmp(u, "/v1/chat/completions") || !strcmp(u, "/chat/completions")) {
        if (!post) goto bad_method;
        return api_chat(r);
    }
    if (!strcmp(u, "/v1/completions") || !strcmp(u, "/completions")) {
        if (!post) goto bad_method;
        return api_completions(r);
    }
    if (!strcmp(u, "/models/available")) {
        if (!get) goto bad_method;
        return gallery_api_available(r);
    }
    if (!strcmp(u, "/models/apply")) {
        if (!post) goto bad_method;
        return gallery_api_apply(r);
    }
    if (!strncmp(u, "/models/jobs/", 13)) {
        if (!get) goto bad_method;
        return gallery_api_job(r, u + 13);
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
        /* reject before reading the body: auth, then a declared size over the limit */
        if (!is_public(method, url) && strcmp(method, "OPTIONS") && !authorized(&r)) {
            cx->responded = true;
            enum MHD_Result rc = (enum MHD_Result)send_401(&r);
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
    (void)conn;
    server *s = cls;
    http_ctx *cx = *con_cls;
    if (!cx) return;
    if (s->p.verbose)
        fprintf(stderr, "serve: %d %.1f ms%s\n", cx->status, bd_time_ms() - cx->t0,
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    free(cx->body);
    free(cx);
    *con_cls = NULL;
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
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)s->p.port);
        addr = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, s->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)s->p.port);
        addr = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        return bd_err(err, errlen, "--host '%s' is not a numeric IPv4 or IPv6 address", s->host);
    }
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->p.port, NULL, NULL, on_request, s,
                              MHD_OPTION_EXTERNAL_LOGGER, on_log, s,
                              MHD_OPTION_SOCK_ADDR, addr,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->p.conn_limit,
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
}
