/*
 * pull.c - gallery_pull and gallery_resolve_model. See gallery.h for the
 * contract; the order of steps is what keeps a failed pull from damaging
 * an installed model.
 */
#include "gallery.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/base.h"
#include "../gguf/bd_gguf.h"

#define PULL_MAX_FILES GALLERY_STATE_MAX_FILES

void gallery_pull_opts_init(gallery_pull_opts *o) {
    memset(o, 0, sizeof *o);
    o->use_env_indexes = true;
    fetch_opts_init(&o->fetch);
}

__attribute__((format(printf, 2, 3))) static void note(const gallery_pull_opts *o,
                                                       const char *fmt, ...) {
    if (!o->note) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    o->note(o->note_ctx, msg);
}

static void on_wait(void *ctx, const char *what) {
    const gallery_pull_opts *o = ctx;
    note(o, "waiting for another blockdraft process holding %s ...", what);
}

typedef struct pull_file {
    const gallery_file_ref *ref;
    char url[2048];
    char final_path[PATH_MAX];
    char partial_path[PATH_MAX + 16];
    bool fresh;       /* new verified bytes are in partial_path */
    const char *role; /* "target", "drafter", "file" */
    uint64_t size;
    char sha256[65];
    int lock_fd;
} pull_file;

static const char *current_path(const pull_file *f) {
    return f->fresh ? f->partial_path : f->final_path;
}

static void iso_now(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Step 1: everything that can be checked without downloading. */
static bool check_entry(const gallery_entry *e, const gallery_pull_opts *o, gallery_config *cfg,
                        char **config_text, pull_file *files, char *err, size_t errlen) {
    char why[640];
    if (e->problem[0]) return bd_err(err, errlen, "entry '%s' cannot be installed: %s", e->name, e->problem);
    if (!gallery_name_check(e->name, why, sizeof why))
        return bd_err(err, errlen, "entry '%s' cannot be installed: %s", e->name, why);
    if (!e->overrides)
        return bd_err(err, errlen, "entry '%s' has no overrides: no model config to write", e->name);
    ydoc *d = &e->index->doc;
    if (!gallery_config_parse_node(d, e->overrides, true, cfg, why, sizeof why))
        return bd_err(err, errlen, "entry '%s': %s", e->name, why);
    if (!ydoc_emit(d, e->overrides, e->name, config_text, why, sizeof why))
        return bd_err(err, errlen, "entry '%s': %s", e->name, why);
    /* The written config must read back as the same thing. */
    gallery_config again;
    if (!gallery_config_parse(*config_text, strlen(*config_text), "(generated config)", &again,
                              why, sizeof why))
        return bd_err(err, errlen, "entry '%s': generated config does not parse: %s", e->name, why);
    snprintf(cfg->name, sizeof cfg->name, "%s", e->name);
    if (e->n_files > PULL_MAX_FILES)
        return bd_err(err, errlen, "entry '%s' lists %d files (at most %d)", e->name, e->n_files,
                      PULL_MAX_FILES);
    bool have_model = false, have_draft = !cfg->draft_model[0];
    for (int i = 0; i < e->n_files; i++) {
        const gallery_file_ref *r = &e->files[i];
        pull_file *f = &files[i];
        memset(f, 0, sizeof *f);
        f->ref = r;
        f->lock_fd = -1;
        if (!gallery_install_name_check(r->filename, why, sizeof why))
            return bd_err(err, errlen, "%s:%d: entry '%s': filename %s", e->index->source, r->line,
                          e->name, why);
        for (int j = 0; j < i; j++)
            if (!strcmp(files[j].ref->filename, r->filename))
                return bd_err(err, errlen, "%s:%d: entry '%s' lists '%s' twice", e->index->source,
                              r->line, e->name, r->filename);
        if (!r->sha256[0]) {
            if (!o->insecure)
                return bd_err(err, errlen,
                              "%s:%d: entry '%s': file '%s' has no sha256; refusing to install "
                              "unverified bytes (use --insecure to allow it)",
                              e->index->source, r->line, e->name, r->filename);
        } else if (!fetch_sha256_valid(r->sha256)) {
            return bd_err(err, errlen, "%s:%d: entry '%s': sha256 of '%s' is not 64 hex digits",
                          e->index->source, r->line, e->name, r->filename);
        }
        if (!fetch_uri_resolve(r->uri, &o->fetch, f->url, sizeof f->url, why, sizeof why))
            return bd_err(err, errlen, "%s:%d: entry '%s': %s", e->index->source, r->line, e->name,
                          why);
        if (!strcmp(r->filename, cfg->model)) {
            f->role = "target";
            have_model = true;
        } else if (cfg->draft_model[0] && !strcmp(r->filename, cfg->draft_model)) {
            f->role = "drafter";
            have_draft = true;
        } else {
            f->role = "file";
        }
    }
    if (!have_model)
        return bd_err(err, errlen, "entry '%s': parameters.model '%s' is not among its files",
                      e->name, cfg->model);
    if (!have_draft)
        return bd_err(err, errlen, "entry '%s': draft_model '%s' is not among its files", e->name,
                      cfg->draft_model);
    return true;
}

/* Step 4: header validation of the (possibly still partial) files. */
static bool validate_files(const pull_file *files, int n, gallery_pull_result *res, char *err,
                           size_t errlen) {
    const pull_file *tf = NULL, *df = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(files[i].role, "target")) tf = &files[i];
        if (!strcmp(files[i].role, "drafter")) df = &files[i];
    }
    char e1[512];
    bd_gguf_file *t = bd_gguf_open(current_path(tf), e1, sizeof e1);
    if (!t) return bd_err(err, errlen, "target %s is not a valid GGUF file: %s", tf->ref->filename, e1);
    bd_gguf_file *d = NULL;
    if (df) {
        d = bd_gguf_open(current_path(df), e1, sizeof e1);
        if (!d) {
            bd_gguf_close(t);
            return bd_err(err, errlen, "drafter %s is not a valid GGUF file: %s",
                          df->ref->filename, e1);
        }
    }
    bd_pairing_report_init(&res->report);
    bool ok = bd_pairing_run(t, d, &res->report, NULL, e1, sizeof e1);
    bd_gguf_close(t);
    if (d) bd_gguf_close(d);
    if (!ok) {
        const bd_pairing_check *c = bd_pairing_report_first(&res->report, BD_PAIRING_FAIL);
        if (c && !strncmp(c->name, "drafter.", 8))
            return bd_err(err, errlen, "drafter %s refused: %s", df->ref->filename, e1);
        if (c && !strncmp(c->name, "fit.", 4))
            return bd_err(err, errlen, "drafter %s does not fit target %s: %s",
                          df->ref->filename, tf->ref->filename, e1);
        return bd_err(err, errlen, "target %s refused: %s", tf->ref->filename, e1);
    }
    const bd_pairing_check *u = bd_pairing_report_first(&res->report, BD_PAIRING_UNSUPPORTED);
    if (u && u->verdict == BD_PAIRING_UNSUPPORTED) {
        snprintf(res->status, sizeof res->status, "unsupported");
        snprintf(res->reason, sizeof res->reason, "%s", u->detail);
    } else {
        snprintf(res->status, sizeof res->status, "installed");
    }
    return true;
}

static void drop_fresh(pull_file *files, int n) {
    for (int i = 0; i < n; i++)
        if (files[i].fresh) {
            unlink(files[i].partial_path);
            files[i].fresh = false;
        }
}

/* Step 1: the entry, from the catalog of every index in use. */
static const gallery_entry *find_entry(gallery_catalog *cat, const char *name, const gallery_pull_opts *o, char *err,
                                       size_t errlen) {
    if (!gallery_catalog_load(cat, o->indexes, o->n_indexes, o->use_env_indexes, &o->fetch, err, errlen))
        return NULL;
    for (int i = 0; i < cat->n_warnings; i++) note(o, "warning: %s", cat->warnings[i]);
    const gallery_entry *e = gallery_catalog_find(cat, name);
    if (!e) {
        char where[1024] = "";
        size_t used = 0;
        for (int i = 0; i < cat->n_idx && used < sizeof where - 2; i++)
            used += (size_t)snprintf(where + used, sizeof where - used, "%s%s", i ? ", " : "", cat->idx[i]->source);
        bd_err(err, errlen, "model '%s' is not in the gallery (searched %s); `blockdraft gallery` lists entries",
               name, where);
    }
    return e;
}

/* Step 3a, one file: its paths, inside the models folder (checked again
 * once its directories exist: a symlinked directory could point
 * elsewhere). */
static bool place_one(const char *models, pull_file *f, char *err, size_t errlen) {
    const gallery_file_ref *r = f->ref;
    if (!gallery_path_inside(models, r->filename, f->final_path, sizeof f->final_path, err, errlen)) return false;
    if (!gallery_mkdirs_parent(f->final_path, err, errlen)) return false;
    if (!gallery_path_inside(models, r->filename, f->final_path, sizeof f->final_path, err, errlen)) return false;
    /* partial_path has 16 bytes more room than final_path */
    size_t fl = strnlen(f->final_path, sizeof f->final_path - 1);
    memcpy(f->partial_path, f->final_path, fl);
    memcpy(f->partial_path + fl, ".partial", 9);
    return true;
}

static int cmp_file_name(const void *a, const void *b) {
    const pull_file *const *x = a, *const *y = b;
    return strcmp((*x)->ref->filename, (*y)->ref->filename);
}

/* Step 3b: the per-file locks, all of them, in one order every pull uses
 * (by file name): two pulls whose entries share files in opposite orders
 * would otherwise each hold one and wait for the other forever. */
static bool lock_files(const char *models, pull_file *files, int n, const gallery_pull_opts *o, char *err,
                       size_t errlen) {
    pull_file *order[PULL_MAX_FILES];
    for (int i = 0; i < n; i++) order[i] = &files[i];
    qsort(order, (size_t)n, sizeof *order, cmp_file_name);
    for (int i = 0; i < n; i++) {
        char fkey[1100];
        snprintf(fkey, sizeof fkey, "file-%s", order[i]->ref->filename);
        order[i]->lock_fd = gallery_lock(models, fkey, on_wait, (void *)o, o->fetch.cancel, err, errlen);
        if (order[i]->lock_fd < 0) return false;
    }
    return true;
}

/* Step 3c: a file another installed model uses is only shared, never
 * replaced: the entry must list the bytes that model was installed with
 * (its record's SHA-256, else the bytes on disk). Checked for every file
 * before anything is downloaded. */
static bool check_owner(const char *models, const char *self, const pull_file *f, const gallery_pull_opts *o,
                        char *err, size_t errlen) {
    char owner[GALLERY_NAME_MAX], rsha[65];
    bool recorded;
    if (!gallery_file_owner(models, f->ref->filename, self, owner, sizeof owner, rsha, &recorded)) return true;
    const char *want = f->ref->sha256;
    if (recorded && rsha[0] && want[0] && !strcasecmp(rsha, want)) return true;
    struct stat st;
    bool present = stat(f->final_path, &st) == 0;
    if (!(recorded && rsha[0]) && present) {
        if (!want[0]) return true; /* --insecure: kept as it is, never written */
        char have[65];
        uint64_t sz;
        if (!fetch_sha256_file(f->final_path, have, &sz, &o->fetch, f->ref->filename, err, errlen)) return false;
        if (!strcasecmp(have, want)) return true;
    }
    return bd_err(err, errlen,
                  "file '%s' belongs to the installed model %s%s%s; this entry lists other bytes (%s%s), so it is "
                  "not installed (a model's file is shared only when the SHA-256 is the same)",
                  f->ref->filename, owner, recorded && rsha[0] ? ", SHA-256 " : "", recorded ? rsha : "",
                  want[0] ? "SHA-256 " : "no SHA-256", want);
}

/* Step 3d, one file (its lock held): either the installed copy when its
 * SHA-256 matches or a download into partial_path (f->fresh). */
static bool fetch_one(pull_file *f, const gallery_pull_opts *o, gallery_pull_result *res, char *err,
                      size_t errlen) {
    const gallery_file_ref *r = f->ref;
    struct stat st;
    if (stat(f->final_path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) return bd_err(err, errlen, "%s exists and is not a regular file", f->final_path);
        if (!r->sha256[0]) {
            note(o, "%s: present (no sha256 to check, --insecure)", r->filename);
            f->size = (uint64_t)st.st_size;
            return true;
        }
        char have[65];
        uint64_t sz;
        if (!fetch_sha256_file(f->final_path, have, &sz, &o->fetch, r->filename, err, errlen)) return false;
        if (!strcasecmp(have, r->sha256)) {
            note(o, "%s: already present, SHA-256 verified", r->filename);
            f->size = sz;
            snprintf(f->sha256, sizeof f->sha256, "%s", have);
            return true;
        }
        note(o, "%s: present but its SHA-256 differs (%s); downloading the listed version", r->filename, have);
    }
    fetch_result fr;
    if (!fetch_file(f->url, f->partial_path, r->sha256, r->size, r->filename, &o->fetch, &fr, err, errlen))
        return false;
    f->fresh = true;
    f->size = fr.bytes;
    snprintf(f->sha256, sizeof f->sha256, "%s", fr.sha256);
    res->n_downloaded++;
    return true;
}

/* Step 5: the verified downloads into place. */
static bool install_files(pull_file *files, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        pull_file *f = &files[i];
        if (!f->fresh) continue;
        if (rename(f->partial_path, f->final_path) != 0)
            return bd_err(err, errlen, "cannot move %s into place: %s", f->partial_path, strerror(errno));
        f->fresh = false;
        gallery_sync_parent(f->final_path);
    }
    return true;
}

/* Step 6: <models>/NAME.yaml, the entry's config under a header comment. */
static bool write_config(const char *models, const gallery_entry *e, const char *config_text,
                         gallery_pull_result *res, char *err, size_t errlen) {
    if (!gallery_join(res->config_path, sizeof res->config_path, models, e->name, ".yaml"))
        return bd_err(err, errlen, "models folder path too long");
    size_t tl = strlen(config_text);
    char *text = malloc(tl + 600);
    if (!text) return bd_err(err, errlen, "out of memory");
    int hl = snprintf(text, 600, "# Written by `blockdraft pull %s` from %s.\n"
                      "# Parsed strictly: unknown keys and options are errors.\n",
                      e->name, e->index->source);
    if (hl < 0 || hl >= 600) hl = 0;
    memcpy(text + hl, config_text, tl + 1);
    bool w = gallery_write_atomic(res->config_path, text, (size_t)hl + tl, err, errlen);
    free(text);
    return w;
}

/* Step 7: the install record (files, hashes, roles, pairing checks). */
static bool write_state(const char *models, const gallery_entry *e, const pull_file *files, int n,
                        const gallery_pull_result *res, char *err, size_t errlen) {
    gallery_state st;
    memset(&st, 0, sizeof st);
    snprintf(st.name, sizeof st.name, "%s", e->name);
    snprintf(st.status, sizeof st.status, "%s", res->status);
    snprintf(st.reason, sizeof st.reason, "%s", res->reason);
    snprintf(st.gallery, sizeof st.gallery, "%s", e->index->source);
    iso_now(st.installed_at, sizeof st.installed_at);
    for (int i = 0; i < n; i++) {
        gallery_state_file *sf = &st.files[st.n_files++];
        snprintf(sf->filename, sizeof sf->filename, "%s", files[i].ref->filename);
        snprintf(sf->sha256, sizeof sf->sha256, "%s", files[i].sha256);
        snprintf(sf->role, sizeof sf->role, "%s", files[i].role);
        sf->size = files[i].size;
    }
    for (int i = 0; i < res->report.n_checks && st.n_checks < GALLERY_STATE_MAX_CHECKS; i++) {
        gallery_state_check *c = &st.checks[st.n_checks++];
        snprintf(c->name, sizeof c->name, "%s", res->report.checks[i].name);
        snprintf(c->verdict, sizeof c->verdict, "%s", bd_pairing_verdict_name(res->report.checks[i].verdict));
        snprintf(c->detail, sizeof c->detail, "%s", res->report.checks[i].detail);
    }
    return gallery_state_write(models, &st, err, errlen);
}

bool gallery_pull(const char *name, const gallery_pull_opts *o, gallery_pull_result *res,
                  char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    char models[PATH_MAX];
    if (o->models_dir) snprintf(models, sizeof models, "%s", o->models_dir);
    else if (!gallery_models_dir(models, sizeof models, err, errlen)) return false;

    gallery_catalog cat;
    const gallery_entry *e = find_entry(&cat, name, o, err, errlen);
    if (!e) {
        gallery_catalog_free(&cat);
        return false;
    }
    pull_file files[PULL_MAX_FILES];
    gallery_config cfg;
    char *config_text = NULL;
    bool ok = false;
    int model_lock = -1;
    int n_files = e->n_files;
    for (int i = 0; i < PULL_MAX_FILES; i++) files[i].lock_fd = -1;
    /* Step 2: the entry is checked completely before anything is written */
    if (!check_entry(e, o, &cfg, &config_text, files, err, errlen)) {
        n_files = 0;
        goto out;
    }
    snprintf(res->name, sizeof res->name, "%s", e->name);
    if (!gallery_mkdirs(models, err, errlen)) goto out;
    char lockkey[GALLERY_NAME_MAX + 8];
    snprintf(lockkey, sizeof lockkey, "model-%s", e->name);
    model_lock = gallery_lock(models, lockkey, on_wait, (void *)o, o->fetch.cancel, err, errlen);
    if (model_lock < 0) goto out;

    for (int i = 0; i < n_files; i++)
        if (!place_one(models, &files[i], err, errlen)) goto out;
    if (!lock_files(models, files, n_files, o, err, errlen)) goto out;
    for (int i = 0; i < n_files; i++)
        if (!check_owner(models, e->name, &files[i], o, err, errlen)) goto out;
    for (int i = 0; i < n_files; i++)
        if (!fetch_one(&files[i], o, res, err, errlen)) goto out;
    /* Step 4: the headers of the files as they will be installed */
    char verr[1024];
    if (!validate_files(files, n_files, res, verr, sizeof verr)) {
        drop_fresh(files, n_files);
        bd_err(err, errlen, "%s: %s; nothing was installed%s", e->name, verr,
               res->n_downloaded ? " and the downloaded files were removed" : "");
        goto out;
    }
    ok = install_files(files, n_files, err, errlen) && write_config(models, e, config_text, res, err, errlen) &&
         write_state(models, e, files, n_files, res, err, errlen);
out:
    for (int i = 0; i < n_files; i++) gallery_unlock(files[i].lock_fd);
    gallery_unlock(model_lock);
    free(config_text);
    gallery_catalog_free(&cat);
    return ok;
}

/* ------------------------------------------------------------------------
 * Resolve
 * ---------------------------------------------------------------------- */

static bool looks_like_path(const char *s) {
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 5 && !strcasecmp(s + n - 5, ".gguf"));
}

static bool regular_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Something other than a regular file (a FIFO, a directory) at path. */
static bool exists_irregular(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode);
}

static bool resolve_name(const char *models, const char *name_or_path, const gallery_pull_opts *pull,
                         gallery_model *out, char *err, size_t errlen);

bool gallery_resolve_model(const char *name_or_path, const gallery_pull_opts *pull,
                           gallery_model *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (looks_like_path(name_or_path)) {
        if (exists_irregular(name_or_path)) return bd_err(err, errlen, "%s: not a regular file", name_or_path);
        if (!regular_file(name_or_path))
            return bd_err(err, errlen, "%s: no such model file", name_or_path);
        snprintf(out->target_path, sizeof out->target_path, "%s", name_or_path);
        return true;
    }
    char models[PATH_MAX];
    if (pull && pull->models_dir) snprintf(models, sizeof models, "%s", pull->models_dir);
    else if (!gallery_models_dir(models, sizeof models, err, errlen)) return false;
    return resolve_name(models, name_or_path, pull, out, err, errlen);
}

bool gallery_resolve_installed(const char *models_dir, const char *name, gallery_model *out, char *err,
                               size_t errlen) {
    memset(out, 0, sizeof *out);
    return resolve_name(models_dir, name, NULL, out, err, errlen);
}

/* NAME: `<models>/NAME.yaml`, its files inside the models folder. */
static bool resolve_name(const char *models, const char *name_or_path, const gallery_pull_opts *pull,
                         gallery_model *out, char *err, size_t errlen) {
    char why[640];
    if (!gallery_name_check(name_or_path, why, sizeof why)) return bd_err(err, errlen, "%s", why);
    char cfg_path[PATH_MAX + 200];
    snprintf(cfg_path, sizeof cfg_path, "%s/%s.yaml", models, name_or_path);
    if (exists_irregular(cfg_path)) return bd_err(err, errlen, "%s: not a regular file", cfg_path);
    if (!regular_file(cfg_path)) {
        if (!pull)
            return bd_err(err, errlen,
                          "model '%s' is not installed in %s (run `blockdraft pull %s`)",
                          name_or_path, models, name_or_path);
        gallery_pull_opts po = *pull;
        po.models_dir = models;
        gallery_pull_result pr;
        if (!gallery_pull(name_or_path, &po, &pr, err, errlen)) return false;
        out->pulled = true;
        /* The gallery matches names case-insensitively; use the entry's. */
        snprintf(cfg_path, sizeof cfg_path, "%s", pr.config_path);
    }
    if (!gallery_config_load(cfg_path, &out->cfg, err, errlen)) return false;
    out->has_config = true;
    const char *base = strrchr(cfg_path, '/');
    snprintf(out->name, sizeof out->name, "%.*s", (int)(strlen(base + 1) - 5), base + 1);
    gallery_state st;
    bool absent;
    char serr[512];
    if (gallery_state_read(models, out->name, &st, &absent, serr, sizeof serr)) {
        if (strcmp(st.status, "installed") != 0)
            return bd_err(err, errlen, "model '%s' is %s: %s", out->name, st.status,
                          st.reason[0] ? st.reason : "see `blockdraft show`");
    } else if (!absent) {
        return bd_err(err, errlen, "model '%s': %s", out->name, serr);
    }
    if (!gallery_path_inside(models, out->cfg.model, out->target_path, sizeof out->target_path,
                             why, sizeof why))
        return bd_err(err, errlen, "%s: parameters.model: %s", cfg_path, why);
    if (exists_irregular(out->target_path))
        return bd_err(err, errlen, "%s: parameters.model %s is not a regular file", cfg_path, out->target_path);
    if (!regular_file(out->target_path))
        return bd_err(err, errlen, "%s: parameters.model %s is missing (run `blockdraft pull %s`)",
                      cfg_path, out->target_path, out->name);
    if (gallery_config_uses_dflash(&out->cfg)) {
        if (!gallery_path_inside(models, out->cfg.draft_model, out->draft_path,
                                 sizeof out->draft_path, why, sizeof why))
            return bd_err(err, errlen, "%s: draft_model: %s", cfg_path, why);
        if (exists_irregular(out->draft_path))
            return bd_err(err, errlen, "%s: draft_model %s is not a regular file", cfg_path, out->draft_path);
        if (!regular_file(out->draft_path))
            return bd_err(err, errlen, "%s: draft_model %s is missing (run `blockdraft pull %s`)",
                          cfg_path, out->draft_path, out->name);
    }
    return true;
}
