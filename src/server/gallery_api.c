/*
 * gallery_api.c - LocalAI-style gallery endpoints on top of gallery.h:
 *   GET  /models/available   entries of the catalog (built-in index plus
 *                            BLOCKDRAFT_GALLERY), with an `installed` flag
 *   POST /models/apply       {"id": "NAME"} (also "GALLERY@NAME", or
 *                            {"name": ...}): starts gallery_pull on a thread
 *                            and answers {"uuid", "status"} at once
 *   GET  /models/jobs/{id}   progress (file, bytes), then result or error
 * A pull installs atomically (gallery.h): a server stopped mid-pull leaves
 * at most `.partial` files, which the next pull resumes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "server_int.h"

struct srv_pull {
    server *srv;
    char id[40];
    char name[GALLERY_NAME_MAX];
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    bool finished, ok;
    char file[256];
    uint64_t done, total;
    char message[600];
    char error[1024];
    gallery_pull_result res;
};

static void on_progress(void *ctx, const fetch_event *ev) {
    srv_pull *p = ctx;
    pthread_mutex_lock(&p->mu);
    if (ev->label) snprintf(p->file, sizeof p->file, "%s", ev->label);
    p->done = ev->done;
    p->total = ev->total;
    if (ev->phase == FETCH_PHASE_RETRY && ev->message) snprintf(p->message, sizeof p->message, "%s", ev->message);
    else if (ev->phase == FETCH_PHASE_HASHING) snprintf(p->message, sizeof p->message, "verifying %s", p->file);
    else if (ev->phase == FETCH_PHASE_PROGRESS || ev->phase == FETCH_PHASE_START)
        snprintf(p->message, sizeof p->message, "downloading %s", p->file);
    pthread_mutex_unlock(&p->mu);
}

static void on_note(void *ctx, const char *msg) {
    srv_pull *p = ctx;
    pthread_mutex_lock(&p->mu);
    snprintf(p->message, sizeof p->message, "%s", msg);
    pthread_mutex_unlock(&p->mu);
}

static void *pull_main(void *arg) {
    srv_pull *p = arg;
    gallery_pull_opts o;
    gallery_pull_opts_init(&o);
    o.models_dir = p->srv->models_dir;
    o.fetch.cancel = &p->srv->pull_cancel; /* shutdown stops the download; the partial stays */
    o.fetch.progress = on_progress;
    o.fetch.progress_ctx = p;
    o.note = on_note;
    o.note_ctx = p;
    gallery_pull_result res;
    memset(&res, 0, sizeof res);
    char err[1024] = "";
    bool ok = gallery_pull(p->name, &o, &res, err, sizeof err);
    pthread_mutex_lock(&p->mu);
    p->ok = ok;
    p->res = res;
    if (!ok) snprintf(p->error, sizeof p->error, "%s", err[0] ? err : "pull failed");
    snprintf(p->message, sizeof p->message, "%s", ok ? "completed" : "failed");
    p->finished = true;
    pthread_mutex_unlock(&p->mu);
    fprintf(stderr, "serve: pull %s: %s\n", p->name, ok ? res.status : err);
    return NULL;
}

static void pull_free(srv_pull *p) {
    if (!p) return;
    if (p->started) pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int gallery_api_apply(srv_req *r) {
    server *s = r->srv;
    json_error_t je;
    json_t *root = r->body_len ? json_loadb(r->body, r->body_len, 0, &je) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return srv_send_error(r, 400, "invalid_request_error", "invalid_json",
                              "the body must be a JSON object like {\"id\": \"MODEL\"}");
    }
    json_t *jid = json_object_get(root, "id");
    if (!jid || json_is_null(jid)) jid = json_object_get(root, "name");
    if (!json_is_string(jid)) {
        json_decref(root);
        return srv_send_error(r, 400, "invalid_request_error", "invalid_value",
                              "'id' must be a string naming a gallery entry");
    }
    const char *name = json_string_value(jid);
    const char *at = strchr(name, '@'); /* LocalAI's "gallery@model" */
    if (at) name = at + 1;
    char why[256];
    if (!gallery_name_check(name, why, sizeof why)) {
        int rc = srv_send_error(r, 400, "invalid_request_error", "invalid_value", "bad model name: %s", why);
        json_decref(root);
        return rc;
    }
    srv_pull *p = calloc(1, sizeof *p);
    if (!p) {
        json_decref(root);
        return srv_send_error(r, 500, "server_error", NULL, "out of memory");
    }
    p->srv = s;
    snprintf(p->name, sizeof p->name, "%s", name);
    json_decref(root);
    pthread_mutex_init(&p->mu, NULL);
    snprintf(p->message, sizeof p->message, "queued");
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t t = (uint64_t)(bd_time_ms() * 1e3);
        memcpy(b, &t, 8);
        memcpy(b + 8, &p, sizeof p < 8 ? sizeof p : 8);
    }
    for (int i = 0; i < 16; i++) snprintf(p->id + 2 * i, 3, "%02x", b[i]);

    pthread_mutex_lock(&s->pulls_mu);
    int slot = -1;
    if (s->n_pulls < SRV_MAX_PULLS) {
        slot = s->n_pulls++;
    } else {
        /* reuse the oldest finished job */
        for (int i = 0; i < SRV_MAX_PULLS && slot < 0; i++) {
            pthread_mutex_lock(&s->pulls[i]->mu);
            bool fin = s->pulls[i]->finished;
            pthread_mutex_unlock(&s->pulls[i]->mu);
            if (fin) {
                pull_free(s->pulls[i]);
                s->pulls[i] = NULL;
                slot = i;
            }
        }
    }
    if (slot < 0 || atomic_load(&s->stopping)) {
        if (slot >= 0 && slot == s->n_pulls - 1 && !s->pulls[slot]) s->n_pulls--;
        pthread_mutex_unlock(&s->pulls_mu);
        pthread_mutex_destroy(&p->mu);
        free(p);
        r->retry_after = "10";
        return srv_send_error(r, 503, "server_error", "server_busy", "too many pulls in progress");
    }
    if (pthread_create(&p->thread, NULL, pull_main, p) != 0) {
        if (slot == s->n_pulls - 1) s->n_pulls--;
        pthread_mutex_unlock(&s->pulls_mu);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return srv_send_error(r, 500, "server_error", NULL, "cannot start a thread");
    }
    p->started = true;
    s->pulls[slot] = p;
    pthread_mutex_unlock(&s->pulls_mu);
    char status[80];
    snprintf(status, sizeof status, "/models/jobs/%s", p->id);
    return srv_send_json(r, 200, json_pack("{s:s,s:s}", "uuid", p->id, "status", status));
}

int gallery_api_job(srv_req *r, const char *id) {
    server *s = r->srv;
    pthread_mutex_lock(&s->pulls_mu);
    srv_pull *p = NULL;
    for (int i = 0; i < s->n_pulls && !p; i++)
        if (s->pulls[i] && !strcmp(s->pulls[i]->id, id)) p = s->pulls[i];
    if (!p) {
        pthread_mutex_unlock(&s->pulls_mu);
        return srv_send_error(r, 404, "invalid_request_error", "not_found", "no pull job with this id");
    }
    pthread_mutex_lock(&p->mu);
    json_t *o = json_object();
    json_object_set_new(o, "uuid", json_string(p->id));
    json_object_set_new(o, "model", json_string(p->name));
    json_object_set_new(o, "processed", json_boolean(p->finished));
    double pct = p->finished && p->ok ? 100.0 : p->total ? 100.0 * (double)p->done / (double)p->total : 0.0;
    json_object_set_new(o, "progress", json_real(pct));
    json_t *fn = json_string(p->file);
    json_object_set_new(o, "file_name", fn ? fn : json_string(""));
    json_object_set_new(o, "downloaded_size", json_integer((json_int_t)p->done));
    json_object_set_new(o, "file_size", json_integer((json_int_t)p->total));
    json_t *msg = json_string(p->message);
    json_object_set_new(o, "message", msg ? msg : json_string(""));
    if (p->finished && !p->ok) {
        json_t *e = json_string(p->error);
        json_object_set_new(o, "error", e ? e : json_string("pull failed"));
    } else {
        json_object_set_new(o, "error", json_null());
    }
    if (p->finished && p->ok) {
        json_t *res = json_object();
        json_object_set_new(res, "name", json_string(p->res.name));
        json_object_set_new(res, "status", json_string(p->res.status));
        if (p->res.reason[0]) json_object_set_new(res, "reason", json_string(p->res.reason));
        json_object_set_new(res, "files_downloaded", json_integer(p->res.n_downloaded));
        json_object_set_new(o, "result", res);
    } else {
        json_object_set_new(o, "result", json_null());
    }
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&s->pulls_mu);
    return srv_send_json(r, 200, o);
}

static json_t *str_array(const char **v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *e = json_string(v[i] ? v[i] : "");
        if (e) json_array_append_new(a, e);
    }
    return a;
}

int gallery_api_available(srv_req *r) {
    server *s = r->srv;
    gallery_catalog cat;
    memset(&cat, 0, sizeof cat);
    fetch_opts fo;
    fetch_opts_init(&fo);
    char err[700];
    if (!gallery_catalog_load(&cat, NULL, 0, true, &fo, err, sizeof err))
        return srv_send_error(r, 500, "server_error", NULL, "cannot load the gallery: %s", err);
    json_t *arr = json_array();
    for (int i = 0; i < cat.n_idx; i++) {
        gallery_index *ix = cat.idx[i];
        for (int k = 0; k < ix->n_entries; k++) {
            const gallery_entry *e = &ix->entries[k];
            if (!e->name) continue;
            json_t *o = json_object();
            json_t *nm = json_string(e->name);
            if (!nm) {
                json_decref(o);
                continue;
            }
            json_object_set_new(o, "name", nm);
            json_t *d = json_string(e->description ? e->description : "");
            json_object_set_new(o, "description", d ? d : json_string(""));
            json_t *l = json_string(e->license ? e->license : "");
            json_object_set_new(o, "license", l ? l : json_string(""));
            json_object_set_new(o, "tags", str_array(e->tags, e->n_tags));
            json_object_set_new(o, "urls", str_array(e->urls, e->n_urls));
            json_t *g = json_string(ix->source);
            json_object_set_new(o, "gallery", g ? g : json_string(""));
            char cfg[GALLERY_PATH_MAX + 200];
            struct stat st;
            bool installed = snprintf(cfg, sizeof cfg, "%s/%s.yaml", s->models_dir, e->name) < (int)sizeof cfg &&
                             stat(cfg, &st) == 0;
            json_object_set_new(o, "installed", json_boolean(installed));
            if (e->problem[0]) {
                json_t *pr = json_string(e->problem);
                if (pr) json_object_set_new(o, "problem", pr);
            }
            json_array_append_new(arr, o);
        }
    }
    gallery_catalog_free(&cat);
    return srv_send_json(r, 200, arr);
}

void gallery_api_free(server *s) {
    pthread_mutex_lock(&s->pulls_mu);
    for (int i = 0; i < s->n_pulls; i++) {
        pull_free(s->pulls[i]);
        s->pulls[i] = NULL;
    }
    s->n_pulls = 0;
    pthread_mutex_unlock(&s->pulls_mu);
}
