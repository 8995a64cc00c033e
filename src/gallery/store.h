/*
 * store.h - the models folder: where it is, safe paths inside it, atomic
 * writes, locks, and the per-model install record.
 *
 * Layout (LocalAI-compatible where LocalAI defines it):
 *   <models>/<name>.yaml                    model config (config.h)
 *   <models>/<files[].filename>             downloaded files
 *   <models>/<file>.partial                 download in progress (resumable)
 *   <models>/.blockdraft/state/<name>.json  install record (status, files, checks)
 *   <models>/.blockdraft/locks/KEY.lock      flock(2) files (never deleted)
 * The models folder is $BLOCKDRAFT_MODELS, else ~/.local/share/blockdraft/models.
 */
#ifndef BD_GALLERY_STORE_H
#define BD_GALLERY_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GALLERY_STATE_MAX_FILES 16
#define GALLERY_STATE_MAX_CHECKS 24

/* Model name: 1..100 chars of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool gallery_name_check(const char *name, char *why, size_t whylen);
/* A relative path that stays inside its base by construction: not empty,
 * not absolute, no '..' or '.' or empty components, no backslash or
 * control characters, at most 1000 bytes. */
bool gallery_relpath_check(const char *rel, char *why, size_t whylen);

/* A file name a gallery entry may install: gallery_relpath_check, and not
 * one of the names blockdraft itself owns -- a top-level NAME.yaml (model
 * NAME's config), anything under .blockdraft/ (install records, locks), a
 * `*.partial` or `*.tmp.<digits>` name (unfinished downloads, atomic
 * writes). */
bool gallery_install_name_check(const char *rel, char *why, size_t whylen);

/* The models folder (not created). */
bool gallery_models_dir(char *out, size_t n, char *err, size_t errlen);

/* Join models_dir and rel into out after gallery_relpath_check, and make
 * sure no existing component is a symlink that leads outside models_dir
 * (the deepest existing ancestor, and the path itself if it exists, must
 * resolve inside realpath(models_dir)). */
bool gallery_path_inside(const char *models_dir, const char *rel, char *out, size_t n, char *err,
                         size_t errlen);

/* Copy src into dst[n] (always NUL-terminated); false if truncated. */
bool gallery_strcpy(char *dst, size_t n, const char *src);
/* dst = a + "/" + b + suffix; false (dst emptied) if it does not fit. */
bool gallery_join(char *dst, size_t n, const char *a, const char *b, const char *suffix);

/* mkdir -p (mode 0755). */
bool gallery_mkdirs(const char *path, char *err, size_t errlen);
/* mkdir -p of the parent directory of path. */
bool gallery_mkdirs_parent(const char *path, char *err, size_t errlen);
/* Read a whole file (at most max bytes) into a new NUL-terminated buffer. */
bool gallery_read_file(const char *path, size_t max, char **buf, size_t *len, char *err,
                       size_t errlen);
/* Write PATH.tmp.<pid>, fsync, rename over path, fsync the directory. */
bool gallery_write_atomic(const char *path, const void *data, size_t len, char *err,
                          size_t errlen);
/* fsync the directory containing path (after a rename). */
void gallery_sync_parent(const char *path);

/* Exclusive flock on <models>/.blockdraft/locks/<key>.lock. If another
 * process holds it and `waiting` is not NULL, waiting(ctx) is called once
 * before waiting; the wait ends with a "cancelled" error when *cancel
 * (may be NULL) becomes true. Returns the fd (>= 0) or -1 with a message. */
typedef void (*gallery_wait_fn)(void *ctx, const char *what);
int gallery_lock(const char *models_dir, const char *key, gallery_wait_fn waiting, void *ctx,
                 const atomic_bool *cancel, char *err, size_t errlen);
void gallery_unlock(int fd);

/* ------------------------------------------------------------------------
 * Install record
 * ---------------------------------------------------------------------- */

typedef struct gallery_state_file {
    char filename[1024]; /* relative to the models folder */
    char sha256[65];     /* "" when installed with --insecure */
    char role[16];       /* "target", "drafter", "file" */
    uint64_t size;
} gallery_state_file;

typedef struct gallery_state_check {
    char name[32];
    char verdict[16]; /* ok, warn, fail, unsupported */
    char detail[320];
} gallery_state_check;

typedef struct gallery_state {
    char name[128];
    char status[16];   /* "installed" or "unsupported" */
    char reason[320];  /* why unsupported, else "" */
    char gallery[512]; /* index the entry came from */
    char installed_at[32];
    int n_files;
    gallery_state_file files[GALLERY_STATE_MAX_FILES];
    int n_checks;
    gallery_state_check checks[GALLERY_STATE_MAX_CHECKS];
} gallery_state;

bool gallery_state_path(const char *models_dir, const char *name, char *out, size_t n);
bool gallery_state_write(const char *models_dir, const gallery_state *s, char *err, size_t errlen);
/* Returns false with err when absent or unreadable; *absent tells which. */
bool gallery_state_read(const char *models_dir, const char *name, gallery_state *s, bool *absent,
                        char *err, size_t errlen);

#endif
