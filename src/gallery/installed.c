/*
 * installed.c - listing and removing installed models.
 */
#include "gallery.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/base.h"

static uint64_t file_size_inside(const char *models, const char *rel, bool *present) {
    char path[PATH_MAX + 16];
    char e[256];
    struct stat st;
    *present = false;
    if (!rel[0] || !gallery_path_inside(models, rel, path, sizeof path, e, sizeof e)) return 0;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    *present = true;
    return (uint64_t)st.st_size;
}

static int cmp_installed(const void *a, const void *b) {
    return strcmp(((const gallery_installed *)a)->name, ((const gallery_installed *)b)->name);
}

/* Names NAME of `<models>/NAME.yaml` that are valid model names. */
static bool config_names(const char *models, char ***names, int *n, char *err, size_t errlen) {
    *names = NULL;
    *n = 0;
    DIR *dir = opendir(models);
    if (!dir) {
        if (errno == ENOENT) return true;
        return bd_err(err, errlen, "%s: %s", models, strerror(errno));
    }
    struct dirent *de;
    size_t cap = 0;
    while ((de = readdir(dir))) {
        size_t l = strlen(de->d_name);
        if (l <= 5 || strcmp(de->d_name + l - 5, ".yaml") != 0) continue;
        char nm[GALLERY_NAME_MAX];
        if (l - 5 >= sizeof nm) continue;
        memcpy(nm, de->d_name, l - 5);
        nm[l - 5] = 0;
        char why[200];
        if (!gallery_name_check(nm, why, sizeof why)) continue;
        if (!bd_grow(names, &cap, (size_t)*n + 1, sizeof **names)) break;
        (*names)[(*n)++] = strdup(nm);
    }
    closedir(dir);
    return true;
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

bool gallery_list_installed(const char *models, gallery_installed **out, int *n, char *err,
                            size_t errlen) {
    *out = NULL;
    *n = 0;
    char **names;
    int nn;
    if (!config_names(models, &names, &nn, err, errlen)) return false;
    gallery_installed *v = calloc((size_t)(nn ? nn : 1), sizeof *v);
    if (!v) {
        free_names(names, nn);
        return bd_err(err, errlen, "out of memory");
    }
    for (int i = 0; i < nn; i++) {
        gallery_installed *m = &v[i];
        snprintf(m->name, sizeof m->name, "%s", names[i]);
        char path[PATH_MAX + 200];
        snprintf(path, sizeof path, "%s/%s.yaml", models, names[i]);
        gallery_config cfg;
        char e1[640];
        if (!gallery_config_load(path, &cfg, e1, sizeof e1)) {
            snprintf(m->status, sizeof m->status, "invalid");
            snprintf(m->reason, sizeof m->reason, "%s", e1);
            continue;
        }
        snprintf(m->model, sizeof m->model, "%s", cfg.model);
        snprintf(m->draft_model, sizeof m->draft_model, "%s", cfg.draft_model);
        gallery_state st;
        bool absent;
        bool have_state = gallery_state_read(models, names[i], &st, &absent, e1, sizeof e1);
        bool present, missing = false;
        if (have_state) {
            snprintf(m->status, sizeof m->status, "%s", st.status);
            snprintf(m->reason, sizeof m->reason, "%s", st.reason);
            for (int f = 0; f < st.n_files; f++) {
                m->bytes += file_size_inside(models, st.files[f].filename, &present);
                if (!present) missing = true;
            }
        } else {
            snprintf(m->status, sizeof m->status, "%s", absent ? "manual" : "invalid");
            if (!absent) snprintf(m->reason, sizeof m->reason, "%s", e1);
            m->bytes += file_size_inside(models, cfg.model, &present);
            if (!present) missing = true;
            if (cfg.draft_model[0]) {
                m->bytes += file_size_inside(models, cfg.draft_model, &present);
                if (!present) missing = true;
            }
        }
        if (missing) {
            snprintf(m->status, sizeof m->status, "incomplete");
            snprintf(m->reason, sizeof m->reason, "files are missing; run `blockdraft pull %s`",
                     names[i]);
        }
    }
    free_names(names, nn);
    qsort(v, (size_t)nn, sizeof *v, cmp_installed);
    *out = v;
    *n = nn;
    return true;
}

/* ------------------------------------------------------------------------
 * Removal
 * ---------------------------------------------------------------------- */

/* Relative file names a model refers to (config and install record). */
static int model_files(const char *models, const char *name, char files[][GALLERY_PATH_MAX],
                       int max) {
    int n = 0;
    char path[PATH_MAX + 200], e1[640];
    snprintf(path, sizeof path, "%s/%s.yaml", models, name);
    gallery_config cfg;
    if (gallery_config_load(path, &cfg, e1, sizeof e1)) {
        if (cfg.model[0] && n < max) snprintf(files[n++], GALLERY_PATH_MAX, "%s", cfg.model);
        if (cfg.draft_model[0] && n < max)
            snprintf(files[n++], GALLERY_PATH_MAX, "%s", cfg.draft_model);
    }
    gallery_state st;
    bool absent;
    if (gallery_state_read(models, name, &st, &absent, e1, sizeof e1))
        for (int i = 0; i < st.n_files && n < max; i++) {
            bool dup = false;
            for (int j = 0; j < n; j++) dup = dup || !strcmp(files[j], st.files[i].filename);
            if (!dup) snprintf(files[n++], GALLERY_PATH_MAX, "%s", st.files[i].filename);
        }
    return n;
}

bool gallery_file_owner(const char *models, const char *rel, const char *self, char *owner, size_t owner_n,
                        char sha[65], bool *recorded) {
    owner[0] = 0;
    sha[0] = 0;
    *recorded = false;
    char **names;
    int nn;
    char e1[640];
    if (!config_names(models, &names, &nn, e1, sizeof e1)) return false;
    bool found = false;
    for (int m = 0; m < nn && !found; m++) {
        if (!strcmp(names[m], self)) continue;
        gallery_state st;
        bool absent;
        if (gallery_state_read(models, names[m], &st, &absent, e1, sizeof e1))
            for (int i = 0; i < st.n_files && !found; i++)
                if (!strcmp(st.files[i].filename, rel)) {
                    found = *recorded = true;
                    snprintf(sha, 65, "%s", st.files[i].sha256);
                }
        if (!found) {
            char path[PATH_MAX + 200];
            snprintf(path, sizeof path, "%s/%s.yaml", models, names[m]);
            gallery_config cfg;
            found = gallery_config_load(path, &cfg, e1, sizeof e1) &&
                    (!strcmp(cfg.model, rel) || (cfg.draft_model[0] && !strcmp(cfg.draft_model, rel)));
        }
        if (found) snprintf(owner, owner_n, "%s", names[m]);
    }
    free_names(names, nn);
    return found;
}

/* rmdir the parents of rel that became empty, up to (not including) the
 * models folder. */
static void prune_dirs(const char *models, const char *rel) {
    char r[GALLERY_PATH_MAX];
    gallery_strcpy(r, sizeof r, rel);
    for (;;) {
        char *slash = strrchr(r, '/');
        if (!slash) return;
        *slash = 0;
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/%s", models, r);
        if (rmdir(path) != 0) return;
    }
}

bool gallery_remove(const char *models, const char *name, gallery_rm_result *res, char *err,
                    size_t errlen) {
    memset(res, 0, sizeof *res);
    char why[200];
    if (!gallery_name_check(name, why, sizeof why)) return bd_err(err, errlen, "%s", why);
    char cfg_path[PATH_MAX + 200], state_path[PATH_MAX + 200];
    snprintf(cfg_path, sizeof cfg_path, "%s/%s.yaml", models, name);
    gallery_state_path(models, name, state_path, sizeof state_path);
    struct stat st;
    if (stat(cfg_path, &st) != 0 && stat(state_path, &st) != 0)
        return bd_err(err, errlen, "model '%s' is not installed in %s", name, models);
    char lockkey[GALLERY_NAME_MAX + 8];
    snprintf(lockkey, sizeof lockkey, "model-%s", name);
    int lk = gallery_lock(models, lockkey, NULL, NULL, NULL, err, errlen);
    if (lk < 0) return false;

    char mine[GALLERY_RM_MAX][GALLERY_PATH_MAX];
    int n_mine = model_files(models, name, mine, GALLERY_RM_MAX);
    char **names;
    int nn;
    if (!config_names(models, &names, &nn, err, errlen)) {
        gallery_unlock(lk);
        return false;
    }
    for (int i = 0; i < n_mine; i++) {
        const char *owner = NULL;
        char theirs[GALLERY_RM_MAX][GALLERY_PATH_MAX];
        for (int m = 0; m < nn && !owner; m++) {
            if (!strcmp(names[m], name)) continue;
            int nt = model_files(models, names[m], theirs, GALLERY_RM_MAX);
            for (int j = 0; j < nt; j++)
                if (!strcmp(theirs[j], mine[i])) owner = names[m];
        }
        if (owner) {
            int k = res->n_kept++;
            gallery_strcpy(res->kept[k], GALLERY_PATH_MAX, mine[i]);
            snprintf(res->kept_for[k], GALLERY_NAME_MAX, "%s", owner);
            continue;
        }
        char path[PATH_MAX + 16], e1[640];
        /* Never delete outside the models folder, whatever a config says. */
        if (!gallery_path_inside(models, mine[i], path, sizeof path - 10, e1, sizeof e1)) continue;
        char fkey[1100] = "file-";
        gallery_strcpy(fkey + 5, sizeof fkey - 5, mine[i]);
        int fl = gallery_lock(models, fkey, NULL, NULL, NULL, e1, sizeof e1);
        bool gone = unlink(path) == 0;
        strcat(path, ".partial");
        unlink(path);
        gallery_unlock(fl);
        if (gone) gallery_strcpy(res->removed[res->n_removed++], GALLERY_PATH_MAX, mine[i]);
        prune_dirs(models, mine[i]);
    }
    free_names(names, nn);
    unlink(cfg_path);
    unlink(state_path);
    gallery_unlock(lk);
    return true;
}
