/*
 * gallery_api.c - LocalAI's gallery API on top of gallery.h, in the shapes
 * LocalAI sends (its documented API, and the Go types of
 * core/http/endpoints/localai/gallery.go, core/gallery and
 * core/services that its clients decode):
 *
 *   POST /models/apply        {"id": "GALLERY@NAME" | "NAME"} or
 *                             {"url": MODEL_DEFINITION_URL} or
 *                             {"config_url": MODEL_CONFIG_URL}, with
 *                             optional "name" (install under another
 *                             name), "overrides" (merged into the model
 *                             config) and "files" (added downloads).
 *                             Answers {"uuid", "status": absolute URL of
 *                             the job} at once; the work runs on a thread.
 *   POST /models/delete/NAME  removes an installed model; a job as well
 *   GET  /models/jobs/UUID    GalleryOpStatus: deletion, file_name, error,
 *                             processed, message, progress (float),
 *                             file_size and downloaded_size (strings, as
 *                             LocalAI's downloader formats them: "512 B",
 *                             "1.1 MiB"), gallery_element_name, cancelled,
 *                             cancellable (+ blockdraft's uuid, model,
 *                             result)
 *   GET  /models/jobs         {UUID: GalleryOpStatus, ...}
 *   GET  /models/galleries    [{"name", "url"}]: the indexes searched
 *   GET  /models/available    [GalleryModel]: url, name, description,
 *                             license, urls, icon, tags, overrides, files
 *                             [{filename, sha256, uri}], gallery {name,
 *                             url}, installed -- never a path of this
 *                             machine (local URIs and index paths are
 *                             blanked)
 *
 * Gallery names: the built-in index is "blockdraft"; an index given by
 * BLOCKDRAFT_GALLERY is named after its file ("localai" for
 * .../localai.yaml). "GALLERY@NAME" looks in that gallery only.
 *
 * `error` is null or an object: LocalAI's field is a Go error value,
 * which encodes as an object; the text is in "message" (also as
 * "error: TEXT" in the job's message, as LocalAI does).
 *
 * Security: URLs and file URIs a request supplies must be http(s),
 * github: or huggingface: -- never file:// (a client must not make the
 * server read its own files). Every file still needs its SHA-256 and the
 * whole install goes through gallery_pull's checks, so a request can add
 * nothing the gallery contract would refuse.
 *
 * A pull installs atomically (gallery.h): a server stopped mid-pull
 * leaves at most `.partial` files, which the next pull resumes.
 */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"

enum pull_kind { PULL_ID = 0, PULL_URL = 1, PULL_CONFIG_URL = 2, PULL_DELETE = 3 };

struct srv_pull {
    server *srv;
    char id[40];
    enum pull_kind kind;
    char element[GALLERY_NAME_MAX + 140]; /* what was asked: "gallery@name", a name, a URL */
    char gallery[128];                    /* "" = any gallery */
    char name[GALLERY_NAME_MAX];          /* entry (PULL_ID) or model (PULL_DELETE) */
    char install_name[GALLERY_NAME_MAX];  /* "" = the entry's own name */
    char url[2048];
    json_t *overrides, *files, *config_file; /* owned; NULL when absent */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    bool finished, ok;
    char file[256];
    uint64_t done, total;
    char message[600];
    char error[1024];
    char model[GALLERY_NAME_MAX];         /* the model installed / removed */
    gallery_pull_result res;
    int n_removed;
};

/* ------------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------- */

/* LocalAI's downloader: "%d B" under 1 KiB, else one decimal and a binary
 * unit ("1.1 KiB", "3.5 MiB"). */
static void format_bytes(uint64_t v, char *out, size_t n) {
    if (v < 1024) {
        snprintf(out, n, "%llu B", (unsigned long long)v);
        return;
    }
    const char *units = "KMGTPE";
    double d = (double)v / 1024.0;
    int e = 0;
    while (d >= 1024.0 && e < 5) {
        d /= 1024.0;
        e++;
    }
    snprintf(out, n, "%.1f %ciB", d, units[e]);
}

/* http(s), github: or huggingface: -- what a request may make us fetch. */
static bool remote_uri(const char *u) {
    return !strncmp(u, "https://", 8) || !strncmp(u, "http://", 7) || !strncmp(u, "github:", 7) ||
           !strncmp(u, "huggingface://", 14) || !strncmp(u, "hf://", 5);
}

static bool is_builtin(const gallery_index *ix) { return !strncmp(ix->source, "builtin:", 8); }

/* A gallery's name: "blockdraft" for the built-in index, else the last
 * path component of its source without the extension. */
static void gallery_name_of(const gallery_index *ix, char *out, size_t n) {
    if (is_builtin(ix)) {
        snprintf(out, n, "blockdraft");
        return;
    }
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", ix->source);
    char *q = strpbrk(tmp, "?#");
    if (q) *q = '\0';
    char *at = strrchr(tmp, '@'); /* github:org/repo/file.yaml@branch */
    if (at && strrchr(tmp, '/') && at > strrchr(tmp, '/')) *at = '\0';
    while (strlen(tmp) > 1 && tmp[strlen(tmp) - 1] == '/') tmp[strlen(tmp) - 1] = '\0';
    const char *b = strrchr(tmp, '/');
    b = b ? b + 1 : tmp;
    if (!strncmp(b, "github:", 7)) b += 7;
    snprintf(out, n, "%.127s", b);
    char *dot = strrchr(out, '.');
    if (dot && (!strcasecmp(dot, ".yaml") || !strcasecmp(dot, ".yml") || !strcasecmp(dot, ".json"))) *dot = '\0';
    if (!out[0]) snprintf(out, n, "gallery");
}

/* The URL shown for a gallery: its source unless that is a local path. */
static const char *gallery_url_of(const gallery_index *ix) {
    if (is_builtin(ix)) return ix->source;
    return strstr(ix->source, "://") && strncmp(ix->source, "file://", 7) ? ix->source
           : !strncmp(ix->source, "github:", 7)                          ? ix->source
                                                                         : "";
}

/* YAML to JSON: plain scalars typed (null, booleans, numbers) as YAML
 * reads them, quoted ones strings. Depth-bounded (aliases may cycle). */
static json_t *yaml_to_json(ydoc *d, yaml_node_t *n, int depth) {
    if (!n || depth > 64) return json_null();
    if (ydoc_is_map(n)) {
        json_t *o = json_object();
        ydoc_entry *e = NULL;
        int ne = 0;
        char err[200];
        if (ydoc_map_entries(d, n, &e, &ne, err, sizeof err)) {
            for (int i = 0; i < ne; i++) json_object_set_new(o, e[i].key, yaml_to_json(d, e[i].value, depth + 1));
            free(e);
        }
        return o;
    }
    if (ydoc_is_seq(n)) {
        json_t *a = json_array();
        for (int i = 0; i < ydoc_seq_len(d, n); i++) json_array_append_new(a, yaml_to_json(d, ydoc_seq_at(d, n, i), depth + 1));
        return a;
    }
    const char *s = ydoc_str(n);
    if (!s) return json_null();
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        if (ydoc_is_null(n)) return json_null();
        bool b;
        long long ll;
        double dv;
        if (!strcmp(s, "true") || !strcmp(s, "false") || !strcmp(s, "True") || !strcmp(s, "False"))
            return ydoc_parse_bool(s, &b) ? json_boolean(b) : json_string(s);
        if (ydoc_parse_int(s, -(1LL << 53), 1LL << 53, &ll)) return json_integer(ll);
        if (strpbrk(s, ".eE") && ydoc_parse_double(s, &dv)) return json_real(dv);
    }
    json_t *j = json_string(s);
    return j ? j : json_string("");
}

/* Deep merge: values of src win, objects merge key by key. */
static void json_merge(json_t *dst, json_t *src) {
    const char *k;
    json_t *v;
    json_object_foreach(src, k, v) {
        json_t *cur = json_object_get(dst, k);
        if (json_is_object(cur) && json_is_object(v)) json_merge(cur, v);
        else json_object_set(dst, k, v);
    }
}

/* The YAML node of a catalog entry. */
static yaml_node_t *entry_node(const gallery_entry *e) {
    ydoc *d = &e->index->doc;
    yaml_node_t *root = ydoc_root(d);
    for (int i = 0; root && i < ydoc_seq_len(d, root); i++) {
        yaml_node_t *it = ydoc_seq_at(d, root, i);
        if (ydoc_line(it) == e->line) return it;
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Jobs
 * ---------------------------------------------------------------------- */

static void on_progress(void *ctx, const fetch_event *ev) {
    srv_pull *p = ctx;
    pthread_mutex_lock(&p->mu);
    if (ev->label) snprintf(p->file, sizeof p->file, "%s", ev->label);
    p->done = ev->done;
    p->total = ev->total;
    if (ev->phase == FETCH_PHASE_RETRY && ev->message) snprintf(p->message, sizeof p->message, "%s", ev->message);
    else if (ev->phase == FETCH_PHASE_HASHING) snprintf(p->message, sizeof p->message, "verifying %s", p->file);
    else if (ev->phase == FETCH_PHASE_PROGRESS || ev->phase == FETCH_PHASE_START)
        snprintf(p->message, sizeof p->message, "processing: downloading %s", p->file);
    pthread_mutex_unlock(&p->mu);
}

static void on_note(void *ctx, const char *msg) {
    srv_pull *p = ctx;
    pthread_mutex_lock(&p->mu);
    snprintf(p->message, sizeof p->message, "processing: %s", msg);
    pthread_mutex_unlock(&p->mu);
}

/* Check request-supplied files: [{filename, sha256, uri}] with remote URIs. */
static const char *check_files(json_t *files, char *buf, size_t n) {
    if (!json_is_array(files)) return "'files' must be an array of {filename, sha256, uri}";
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        json_t *fn = json_object_get(f, "filename"), *uri = json_object_get(f, "uri"), *sh = json_object_get(f, "sha256");
        if (!json_is_object(f) || !json_is_string(fn) || !json_is_string(uri) || (sh && !json_is_string(sh)))
            return snprintf(buf, n, "files[%zu] must be {\"filename\": ..., \"sha256\": ..., \"uri\": ...}", i), buf;
        if (!remote_uri(json_string_value(uri)))
            return snprintf(buf, n, "files[%zu].uri must be an http(s), github: or huggingface: URI", i), buf;
    }
    return NULL;
}

/* Write [entry] as a one-entry index under the models folder; gallery_pull
 * installs from it (JSON is YAML, so the index reader takes it). */
static bool write_temp_index(srv_pull *p, json_t *entry, char *path, size_t n, char *err, size_t errlen) {
    const char *md = p->srv->models_dir;
    char dir[GALLERY_PATH_MAX + 64];
    if (!gallery_join(dir, sizeof dir, md, ".blockdraft/apply", "") || !gallery_mkdirs(dir, err, errlen))
        return bd_err(err, errlen, "cannot create %s/.blockdraft/apply", md);
    if (!gallery_join(path, n, dir, p->id, ".json")) return bd_err(err, errlen, "models folder path too long");
    json_t *arr = json_array();
    json_array_append(arr, entry);
    char *text = json_dumps(arr, JSON_INDENT(1));
    json_decref(arr);
    if (!text) return bd_err(err, errlen, "out of memory");
    bool ok = gallery_write_atomic(path, text, strlen(text), err, errlen);
    free(text);
    return ok;
}

/* Fetch a YAML document from a request's URL into d (owned text in *buf). */
static bool fetch_yaml(const char *uri, ydoc *d, char **buf, char *err, size_t errlen) {
    fetch_opts fo;
    fetch_opts_init(&fo);
    char url[2048];
    size_t len = 0;
    *buf = NULL;
    if (!fetch_uri_resolve(uri, &fo, url, sizeof url, err, errlen)) return false;
    if (!fetch_to_memory(url, &fo, 4u << 20, buf, &len, err, errlen)) return false;
    return ydoc_load(d, *buf, len, uri, err, errlen);
}

/* Name from a URL's last component without its extension. */
static void name_from_url(const char *u, char *out, size_t n) {
    gallery_index tmp;
    memset(&tmp, 0, sizeof tmp);
    snprintf(tmp.source, sizeof tmp.source, "%.511s", u);
    gallery_name_of(&tmp, out, n);
}

/* Build the index entry a URL or config URL stands for. */
static json_t *entry_from_url(srv_pull *p, char *err, size_t errlen) {
    json_t *entry = json_object();
    json_t *overrides = json_object();
    json_t *files = json_array();
    char name[GALLERY_NAME_MAX] = "";
    bool empty_base = p->kind == PULL_URL && strstr(p->url, "gallery/virtual.yaml"); /* LocalAI's empty base */
    if (!empty_base) {
        ydoc d;
        memset(&d, 0, sizeof d);
        char *buf = NULL;
        if (!fetch_yaml(p->url, &d, &buf, err, errlen)) {
            free(buf);
            goto fail;
        }
        yaml_node_t *root = ydoc_root(&d);
        json_t *doc = ydoc_is_map(root) ? yaml_to_json(&d, root, 0) : NULL;
        ydoc_free(&d);
        free(buf);
        if (!doc) {
            bd_err(err, errlen, "%s: not a YAML mapping", p->url);
            goto fail;
        }
        json_t *nm = json_object_get(doc, "name");
        if (json_is_string(nm)) snprintf(name, sizeof name, "%s", json_string_value(nm));
        if (p->kind == PULL_CONFIG_URL) {
            /* a model config: its download_files are the files */
            json_t *df = json_object_get(doc, "download_files");
            if (json_is_array(df)) json_array_extend(files, df);
            json_object_del(doc, "download_files");
            json_object_del(doc, "name");
            json_merge(overrides, doc);
        } else {
            /* a gallery model definition: config_file (a mapping or YAML text) and files */
            static const char *meta[] = {"description", "license", "urls", "tags", "icon"};
            for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
                json_t *v = json_object_get(doc, meta[i]);
                if (v) json_object_set(entry, meta[i], v);
            }
            json_t *cf = json_object_get(doc, "config_file");
            if (json_is_string(cf)) {
                ydoc cd;
                memset(&cd, 0, sizeof cd);
                if (!ydoc_load(&cd, json_string_value(cf), json_string_length(cf), "config_file", err, errlen)) {
                    json_decref(doc);
                    goto fail;
                }
                yaml_node_t *cr = ydoc_root(&cd);
                if (ydoc_is_map(cr)) {
                    json_t *c = yaml_to_json(&cd, cr, 0);
                    json_merge(overrides, c);
                    json_decref(c);
                }
                ydoc_free(&cd);
            } else if (json_is_object(cf)) {
                json_merge(overrides, cf);
            }
            json_t *ov = json_object_get(doc, "overrides");
            if (json_is_object(ov)) json_merge(overrides, ov);
            json_t *fl = json_object_get(doc, "files");
            if (json_is_array(fl)) json_array_extend(files, fl);
            json_object_del(overrides, "name");
        }
        json_decref(doc);
        /* the document came from a URL the client chose: its files too must be remote */
        char why[200];
        const char *bad = check_files(files, why, sizeof why);
        if (bad) {
            bd_err(err, errlen, "%s: %s", p->url, bad);
            goto fail;
        }
    }
    if (p->config_file) json_merge(overrides, p->config_file);
    if (p->overrides) json_merge(overrides, p->overrides);
    if (p->files) json_array_extend(files, p->files);
    if (p->install_name[0]) snprintf(name, sizeof name, "%s", p->install_name);
    if (!name[0]) name_from_url(p->url, name, sizeof name);
    char why[256];
    if (!gallery_name_check(name, why, sizeof why)) {
        bd_err(err, errlen, "model name '%s': %s (give one with \"name\")", name, why);
        goto fail;
    }
    json_object_set_new(entry, "name", json_string(name));
    json_object_set_new(entry, "overrides", overrides);
    json_object_set_new(entry, "files", files);
    return entry;
fail:
    json_decref(entry);
    json_decref(overrides);
    json_decref(files);
    return NULL;
}

static void pull_finish(srv_pull *p, bool ok, const char *err, const gallery_pull_result *res) {
    pthread_mutex_lock(&p->mu);
    p->ok = ok;
    if (res) p->res = *res;
    if (!ok) snprintf(p->error, sizeof p->error, "%s", err && err[0] ? err : "failed");
    if (ok) snprintf(p->message, sizeof p->message, "completed");
    else snprintf(p->message, sizeof p->message, "error: %.560s", p->error);
    p->finished = true;
    pthread_mutex_unlock(&p->mu);
    fprintf(stderr, "serve: %s %s: %s\n", p->kind == PULL_DELETE ? "delete" : "pull", p->element,
            ok ? (res ? res->status : "done") : p->error);
}

static void run_delete(srv_pull *p) {
    server *s = p->srv;
    gallery_rm_result rm;
    memset(&rm, 0, sizeof rm);
    char err[1024] = "";
    bool ok = gallery_remove(s->models_dir, p->name, &rm, err, sizeof err);
    if (ok) {
        /* a loaded copy is no longer served (its memory is freed at exit) */
        pthread_mutex_lock(&s->models_mu);
        for (srv_model *m = s->models; m; m = m->next)
            if (!m->from_cli && !strcmp(m->name, p->name)) atomic_store(&m->removed, true);
        pthread_mutex_unlock(&s->models_mu);
        pthread_mutex_lock(&p->mu);
        p->n_removed = rm.n_removed;
        snprintf(p->model, sizeof p->model, "%s", p->name);
        pthread_mutex_unlock(&p->mu);
    }
    pull_finish(p, ok, err, NULL);
}

static void *pull_main(void *arg) {
    srv_pull *p = arg;
    server *s = p->srv;
    if (p->kind == PULL_DELETE) {
        run_delete(p);
        return NULL;
    }
    pthread_mutex_lock(&p->mu);
    snprintf(p->message, sizeof p->message, "processing");
    pthread_mutex_unlock(&p->mu);
    gallery_pull_opts o;
    gallery_pull_opts_init(&o);
    o.models_dir = s->models_dir;
    o.fetch.cancel = &s->pull_cancel; /* shutdown stops the download; the partial stays */
    o.fetch.progress = on_progress;
    o.fetch.progress_ctx = p;
    o.note = on_note;
    o.note_ctx = p;
    gallery_pull_result res;
    memset(&res, 0, sizeof res);
    char err[1024] = "";
    char tmp_index[GALLERY_PATH_MAX + 128] = "";
    const char *idx[1];
    char pull_name[GALLERY_NAME_MAX] = "";
    bool ok = false;
    json_t *entry = NULL;
    gallery_catalog cat;
    memset(&cat, 0, sizeof cat);

    if (p->kind == PULL_ID) {
        fetch_opts fo;
        fetch_opts_init(&fo);
        if (!gallery_catalog_load(&cat, NULL, 0, true, &fo, err, sizeof err)) goto done;
        const gallery_entry *e = NULL;
        const gallery_index *in = NULL;
        char names[600] = "";
        for (int i = 0; i < cat.n_idx && !e; i++) {
            char gname[128];
            gallery_name_of(cat.idx[i], gname, sizeof gname);
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", gname);
            if (p->gallery[0] && strcmp(gname, p->gallery)) continue;
            for (int k = 0; k < cat.idx[i]->n_entries && !e; k++)
                if (!strcasecmp(cat.idx[i]->entries[k].name, p->name)) {
                    e = &cat.idx[i]->entries[k];
                    in = cat.idx[i];
                }
        }
        if (!e) {
            if (p->gallery[0])
                bd_err(err, sizeof err, "no model '%s' in a gallery named '%s' (galleries: %s)", p->name, p->gallery,
                       names);
            else
                bd_err(err, sizeof err, "no model '%s' in the galleries (%s)", p->name, names);
            goto done;
        }
        if (!p->install_name[0] && !p->overrides && !p->files && !p->config_file) {
            /* as it is: install straight from its own index */
            if (!is_builtin(in)) {
                idx[0] = in->source;
                o.indexes = idx;
                o.n_indexes = 1;
            }
            o.use_env_indexes = false;
            snprintf(pull_name, sizeof pull_name, "%s", e->name);
        } else {
            yaml_node_t *node = entry_node(e);
            entry = node ? yaml_to_json((ydoc *)&in->doc, node, 0) : NULL;
            if (!json_is_object(entry)) {
                bd_err(err, sizeof err, "cannot read the entry '%s' of %s", e->name, in->source);
                goto done;
            }
            json_t *ov = json_object_get(entry, "overrides");
            if (!json_is_object(ov)) {
                ov = json_object();
                json_object_set_new(entry, "overrides", ov);
            }
            if (p->config_file) json_merge(ov, p->config_file);
            if (p->overrides) json_merge(ov, p->overrides);
            json_t *fl = json_object_get(entry, "files");
            if (p->files) {
                if (!json_is_array(fl)) {
                    fl = json_array();
                    json_object_set_new(entry, "files", fl);
                }
                json_array_extend(fl, p->files);
            }
            if (p->install_name[0]) json_object_set_new(entry, "name", json_string(p->install_name));
        }
    } else {
        entry = entry_from_url(p, err, sizeof err);
        if (!entry) goto done;
    }
    if (entry) {
        if (!write_temp_index(p, entry, tmp_index, sizeof tmp_index, err, sizeof err)) goto done;
        idx[0] = tmp_index;
        o.indexes = idx;
        o.n_indexes = 1;
        o.use_env_indexes = false;
        snprintf(pull_name, sizeof pull_name, "%s", json_string_value(json_object_get(entry, "name")));
    }
    pthread_mutex_lock(&p->mu);
    snprintf(p->model, sizeof p->model, "%s", pull_name);
    pthread_mutex_unlock(&p->mu);
    ok = gallery_pull(pull_name, &o, &res, err, sizeof err);
done:
    if (tmp_index[0]) unlink(tmp_index);
    json_decref(entry);
    gallery_catalog_free(&cat);
    pull_finish(p, ok, err, ok ? &res : NULL);
    return NULL;
}

static void pull_free(srv_pull *p) {
    if (!p) return;
    if (p->started) pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    json_decref(p->overrides);
    json_decref(p->files);
    json_decref(p->config_file);
    free(p);
}

/* A version-4 UUID in its canonical form (LocalAI answers with UUIDs). */
static void make_uuid(char out[40], const void *salt) {
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t t = (uint64_t)(bd_time_ms() * 1e3);
        memcpy(b, &t, 8);
        memcpy(b + 8, &salt, sizeof salt < 8 ? sizeof salt : 8);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        k += snprintf(out + k, 3, "%02x", b[i]);
    }
    out[k] = '\0';
}

/* The job's absolute URL, from the Host the client used (LocalAI answers
 * with its base URL); the bound address when the header is unusable. */
static void status_url(srv_req *r, const char *id, char *out, size_t n) {
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
    bool ok = h && h[0] && strlen(h) < 256;
    for (const char *c = h; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr(".-:[]", *c);
    char host[300];
    if (ok) snprintf(host, sizeof host, "%s", h);
    else {
        const char *bind = r->srv->host;
        if (!strcmp(bind, "0.0.0.0")) bind = "127.0.0.1";
        if (strchr(bind, ':') && strcmp(bind, "::")) snprintf(host, sizeof host, "[%s]:%d", bind, r->srv->port);
        else snprintf(host, sizeof host, "%s:%d", !strcmp(bind, "::") ? "[::1]" : bind, r->srv->port);
    }
    snprintf(out, n, "http://%s/models/jobs/%s", host, id);
}

/* Register p and start its thread; answers {uuid, status}. Takes p. */
static int start_job(srv_req *r, srv_pull *p) {
    server *s = r->srv;
    pthread_mutex_init(&p->mu, NULL);
    snprintf(p->message, sizeof p->message, "queued");
    make_uuid(p->id, p);
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
        pull_free(p);
        r->retry_after = "10";
        return srv_send_error(r, 503, "server_error", "server_busy", "too many gallery jobs in progress");
    }
    if (pthread_create(&p->thread, NULL, pull_main, p) != 0) {
        if (slot == s->n_pulls - 1) s->n_pulls--;
        pthread_mutex_unlock(&s->pulls_mu);
        pull_free(p);
        return srv_send_error(r, 500, "server_error", NULL, "cannot start a thread");
    }
    p->started = true;
    s->pulls[slot] = p;
    pthread_mutex_unlock(&s->pulls_mu);
    char url[400];
    status_url(r, p->id, url, sizeof url);
    return srv_send_json(r, 200, json_pack("{s:s,s:s}", "uuid", p->id, "status", url));
}

/* ------------------------------------------------------------------------
 * POST /models/apply, POST /models/delete/{name}
 * ---------------------------------------------------------------------- */

static int bad_request(srv_req *r, const char *fmt, const char *arg) {
    return srv_send_error(r, 400, "invalid_request_error", "invalid_value", fmt, arg ? arg : "");
}

int gallery_api_apply(srv_req *r) {
    int rc = 0;
    json_t *root = srv_parse_object(r, false, &rc);
    if (!root) return rc;
    srv_pull *p = calloc(1, sizeof *p);
    if (!p) {
        json_decref(root);
        return srv_send_error(r, 500, "server_error", NULL, "out of memory");
    }
    p->srv = r->srv;
    char why[256];
    json_t *jid = json_object_get(root, "id"), *jurl = json_object_get(root, "url"),
           *jcfg = json_object_get(root, "config_url"), *jname = json_object_get(root, "name");
    const char *fields[4] = {"id", "url", "config_url", "name"};
    json_t *vals[4] = {jid, jurl, jcfg, jname};
    for (int i = 0; i < 4; i++)
        if (vals[i] && !json_is_null(vals[i]) && !json_is_string(vals[i])) {
            rc = srv_send_error(r, 400, "invalid_request_error", "invalid_value", "'%s' must be a string", fields[i]);
            goto fail;
        }
    const char *id = json_is_string(jid) && json_string_length(jid) ? json_string_value(jid) : NULL;
    const char *url = json_is_string(jurl) && json_string_length(jurl) ? json_string_value(jurl) : NULL;
    const char *cfg = json_is_string(jcfg) && json_string_length(jcfg) ? json_string_value(jcfg) : NULL;
    const char *name = json_is_string(jname) && json_string_length(jname) ? json_string_value(jname) : NULL;
    if (!id && !url && !cfg && name) {
        id = name; /* {"name": ENTRY} alone: the entry to install */
        name = NULL;
    }
    if (!id && !url && !cfg) {
        rc = bad_request(r, "the body needs \"id\" (GALLERY@NAME or NAME), \"url\" or \"config_url\"%s", NULL);
        goto fail;
    }
    if (name && !gallery_name_check(name, why, sizeof why)) {
        rc = bad_request(r, "bad model name in 'name': %s", why);
        goto fail;
    }
    if (name) snprintf(p->install_name, sizeof p->install_name, "%s", name);
    if (id) {
        p->kind = PULL_ID;
        snprintf(p->element, sizeof p->element, "%s", id);
        const char *at = strchr(id, '@'); /* LocalAI's "gallery@model" */
        const char *entry = at ? at + 1 : id;
        if (at) {
            size_t gl = (size_t)(at - id);
            bool gok = gl > 0 && gl < sizeof p->gallery;
            for (size_t i = 0; gok && i < gl; i++)
                gok = (id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9') ||
                      strchr("._-", id[i]);
            if (!gok) {
                rc = bad_request(r, "bad gallery name in 'id' (expected GALLERY@NAME)%s", NULL);
                goto fail;
            }
            memcpy(p->gallery, id, gl);
            p->gallery[gl] = '\0';
        }
        if (!gallery_name_check(entry, why, sizeof why)) {
            rc = bad_request(r, "bad model name: %s", why);
            goto fail;
        }
        snprintf(p->name, sizeof p->name, "%s", entry);
    } else {
        const char *u = url ? url : cfg;
        p->kind = url ? PULL_URL : PULL_CONFIG_URL;
        if (!remote_uri(u) || strlen(u) >= sizeof p->url) {
            rc = bad_request(r, "'%s' must be an http(s), github: or huggingface: URL (local files are refused)",
                             url ? "url" : "config_url");
            goto fail;
        }
        snprintf(p->url, sizeof p->url, "%s", u);
        snprintf(p->element, sizeof p->element, "%s", name ? name : u);
    }
    json_t *ov = json_object_get(root, "overrides"), *fl = json_object_get(root, "files"),
           *cf = json_object_get(root, "config_file");
    if (ov && !json_is_null(ov)) {
        if (!json_is_object(ov)) {
            rc = bad_request(r, "'overrides' must be an object%s", NULL);
            goto fail;
        }
        if (json_object_size(ov)) p->overrides = json_deep_copy(ov);
    }
    if (cf && !json_is_null(cf)) {
        if (!json_is_object(cf)) {
            rc = bad_request(r, "'config_file' must be an object%s", NULL);
            goto fail;
        }
        if (json_object_size(cf)) p->config_file = json_deep_copy(cf);
    }
    if (fl && !json_is_null(fl)) {
        char buf[200];
        const char *bad = check_files(fl, buf, sizeof buf);
        if (bad) {
            rc = bad_request(r, "%s", bad);
            goto fail;
        }
        if (json_array_size(fl)) p->files = json_deep_copy(fl);
    }
    if (!r->srv->models_dir[0]) {
        rc = srv_send_error(r, 500, "server_error", NULL, "no models folder (set BLOCKDRAFT_MODELS or --models-dir)");
        goto fail;
    }
    json_decref(root);
    return start_job(r, p);
fail:
    json_decref(p->overrides);
    json_decref(p->files);
    json_decref(p->config_file);
    free(p);
    json_decref(root);
    return rc;
}

int gallery_api_delete(srv_req *r, const char *name) {
    char why[256];
    if (!gallery_name_check(name, why, sizeof why))
        return srv_send_error(r, 400, "invalid_request_error", "invalid_value", "bad model name: %s", why);
    if (!r->srv->models_dir[0])
        return srv_send_error(r, 500, "server_error", NULL, "no models folder (set BLOCKDRAFT_MODELS or --models-dir)");
    srv_pull *p = calloc(1, sizeof *p);
    if (!p) return srv_send_error(r, 500, "server_error", NULL, "out of memory");
    p->srv = r->srv;
    p->kind = PULL_DELETE;
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->element, sizeof p->element, "%s", name);
    return start_job(r, p);
}

/* ------------------------------------------------------------------------
 * GET /models/jobs/{uuid}, GET /models/jobs
 * ---------------------------------------------------------------------- */

static json_t *job_json(srv_pull *p) {
    pthread_mutex_lock(&p->mu);
    json_t *o = json_object();
    json_object_set_new(o, "deletion", json_boolean(p->kind == PULL_DELETE));
    json_t *fn = json_string(p->file);
    json_object_set_new(o, "file_name", fn ? fn : json_string(""));
    if (p->finished && !p->ok) json_object_set_new(o, "error", json_pack("{s:o}", "message", srv_jstr(p->error, strlen(p->error))));
    else json_object_set_new(o, "error", json_null());
    json_object_set_new(o, "processed", json_boolean(p->finished));
    json_object_set_new(o, "message", srv_jstr(p->message, strlen(p->message)));
    double pct = p->finished && p->ok ? 100.0 : p->total ? 100.0 * (double)p->done / (double)p->total : 0.0;
    json_object_set_new(o, "progress", json_real(pct));
    char a[32] = "", b[32] = "";
    if (p->total) format_bytes(p->total, a, sizeof a);
    if (p->total || p->done) format_bytes(p->done, b, sizeof b);
    json_object_set_new(o, "file_size", json_string(a));
    json_object_set_new(o, "downloaded_size", json_string(b));
    json_object_set_new(o, "gallery_element_name", srv_jstr(p->element, strlen(p->element)));
    json_object_set_new(o, "cancelled", json_false());
    json_object_set_new(o, "cancellable", json_false());
    /* blockdraft's own */
    json_object_set_new(o, "uuid", json_string(p->id));
    json_object_set_new(o, "model", srv_jstr(p->model, strlen(p->model)));
    if (p->finished && p->ok && p->kind != PULL_DELETE) {
        json_t *res = json_object();
        json_object_set_new(res, "name", json_string(p->res.name));
        json_object_set_new(res, "status", json_string(p->res.status));
        if (p->res.reason[0]) json_object_set_new(res, "reason", srv_jstr(p->res.reason, strlen(p->res.reason)));
        json_object_set_new(res, "files_downloaded", json_integer(p->res.n_downloaded));
        json_object_set_new(o, "result", res);
    } else if (p->finished && p->ok) {
        json_object_set_new(o, "result", json_pack("{s:s,s:i}", "name", p->model, "files_removed", (json_int_t)p->n_removed));
    } else {
        json_object_set_new(o, "result", json_null());
    }
    pthread_mutex_unlock(&p->mu);
    return o;
}

int gallery_api_job(srv_req *r, const char *id) {
    server *s = r->srv;
    pthread_mutex_lock(&s->pulls_mu);
    srv_pull *p = NULL;
    for (int i = 0; i < s->n_pulls && !p; i++)
        if (s->pulls[i] && !strcmp(s->pulls[i]->id, id)) p = s->pulls[i];
    json_t *o = p ? job_json(p) : NULL;
    pthread_mutex_unlock(&s->pulls_mu);
    if (!o) return srv_send_error(r, 404, "invalid_request_error", "not_found", "could not find any status for ID");
    return srv_send_json(r, 200, o);
}

int gallery_api_jobs(srv_req *r) {
    server *s = r->srv;
    json_t *all = json_object();
    pthread_mutex_lock(&s->pulls_mu);
    for (int i = 0; i < s->n_pulls; i++)
        if (s->pulls[i]) json_object_set_new(all, s->pulls[i]->id, job_json(s->pulls[i]));
    pthread_mutex_unlock(&s->pulls_mu);
    return srv_send_json(r, 200, all);
}

/* ------------------------------------------------------------------------
 * GET /models/galleries, GET /models/available
 * ---------------------------------------------------------------------- */

static bool load_catalog(srv_req *r, gallery_catalog *cat, int *rc) {
    memset(cat, 0, sizeof *cat);
    fetch_opts fo;
    fetch_opts_init(&fo);
    char err[700];
    if (gallery_catalog_load(cat, NULL, 0, true, &fo, err, sizeof err)) return true;
    *rc = srv_send_error(r, 500, "server_error", NULL, "cannot load the gallery: %s", err);
    return false;
}

static json_t *gallery_obj(const gallery_index *ix) {
    char name[128];
    gallery_name_of(ix, name, sizeof name);
    const char *u = gallery_url_of(ix);
    return json_pack("{s:s,s:o}", "name", name, "url", srv_jstr(u, strlen(u)));
}

int gallery_api_galleries(srv_req *r) {
    int rc = 0;
    gallery_catalog cat;
    if (!load_catalog(r, &cat, &rc)) return rc;
    json_t *arr = json_array();
    for (int i = 0; i < cat.n_idx; i++) json_array_append_new(arr, gallery_obj(cat.idx[i]));
    gallery_catalog_free(&cat);
    return srv_send_json(r, 200, arr);
}

static json_t *str_array(const char **v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, srv_jstr(v[i] ? v[i] : "", v[i] ? strlen(v[i]) : 0));
    return a;
}

int gallery_api_available(srv_req *r) {
    server *s = r->srv;
    int rc = 0;
    gallery_catalog cat;
    if (!load_catalog(r, &cat, &rc)) return rc;
    json_t *arr = json_array();
    for (int i = 0; i < cat.n_idx; i++) {
        gallery_index *ix = cat.idx[i];
        for (int k = 0; k < ix->n_entries; k++) {
            const gallery_entry *e = &ix->entries[k];
            if (!e->name || !e->name[0]) continue;
            json_t *o = json_object();
            json_object_set_new(o, "url", srv_jstr(e->url, strlen(e->url)));
            json_object_set_new(o, "name", srv_jstr(e->name, strlen(e->name)));
            json_object_set_new(o, "description", srv_jstr(e->description, strlen(e->description)));
            json_object_set_new(o, "license", srv_jstr(e->license, strlen(e->license)));
            json_object_set_new(o, "urls", str_array(e->urls, e->n_urls));
            yaml_node_t *node = entry_node(e);
            const char *icon = node ? ydoc_str(ydoc_map_get(&ix->doc, node, "icon")) : NULL;
            json_object_set_new(o, "icon", srv_jstr(icon ? icon : "", icon ? strlen(icon) : 0));
            json_object_set_new(o, "tags", str_array(e->tags, e->n_tags));
            if (e->overrides) json_object_set_new(o, "overrides", yaml_to_json(&ix->doc, e->overrides, 0));
            json_t *files = json_array();
            for (int f = 0; f < e->n_files; f++) {
                const gallery_file_ref *fr = &e->files[f];
                const char *uri = remote_uri(fr->uri) ? fr->uri : ""; /* never a path of this machine */
                json_t *fo = json_object();
                json_object_set_new(fo, "filename", srv_jstr(fr->filename, strlen(fr->filename)));
                json_object_set_new(fo, "sha256", srv_jstr(fr->sha256, strlen(fr->sha256)));
                json_object_set_new(fo, "uri", srv_jstr(uri, strlen(uri)));
                json_array_append_new(files, fo);
            }
            json_object_set_new(o, "files", files);
            json_object_set_new(o, "gallery", gallery_obj(ix));
            char cfg[GALLERY_PATH_MAX + 200];
            struct stat st;
            bool installed = gallery_join(cfg, sizeof cfg, s->models_dir, e->name, ".yaml") && stat(cfg, &st) == 0;
            json_object_set_new(o, "installed", json_boolean(installed));
            if (e->problem[0]) {
                /* the problem names the index source: keep only the message when that is a local path */
                const char *pr = e->problem;
                if (!gallery_url_of(ix)[0]) {
                    const char *c = strstr(pr, ": ");
                    if (c) pr = c + 2;
                }
                json_object_set_new(o, "problem", srv_jstr(pr, strlen(pr)));
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
