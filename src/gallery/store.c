/*
 * store.c - models folder paths, atomic writes, locks, install records.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/base.h"

/* ------------------------------------------------------------------------
 * Names and paths
 * ---------------------------------------------------------------------- */

bool gallery_name_check(const char *name, char *why, size_t whylen) {
    size_t n = strlen(name);
    if (n == 0) return bd_err(why, whylen, "empty model name");
    if (n > 100) return bd_err(why, whylen, "model name longer than 100 characters");
    if (name[0] == '.' || name[0] == '-')
        return bd_err(why, whylen, "model name '%s' must not start with '.' or '-'", name);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return bd_err(why, whylen,
                          "model name '%s' may only contain letters, digits, '.', '_' and '-'",
                          name);
    }
    return true;
}

bool gallery_relpath_check(const char *rel, char *why, size_t whylen) {
    size_t n = strlen(rel);
    if (n == 0) return bd_err(why, whylen, "empty path");
    if (n > 1000) return bd_err(why, whylen, "path longer than 1000 bytes");
    if (rel[0] == '/') return bd_err(why, whylen, "'%s' is an absolute path; paths must be relative to the models folder", rel);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)rel[i];
        if (c < 0x20 || c == 0x7f || c == '\\')
            return bd_err(why, whylen, "'%s' contains a control character or backslash", rel);
    }
    const char *p = rel;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0) return bd_err(why, whylen, "'%s' has an empty path component", rel);
        if ((len == 2 && p[0] == '.' && p[1] == '.'))
            return bd_err(why, whylen, "'%s' contains '..' and would leave the models folder", rel);
        if (len == 1 && p[0] == '.') return bd_err(why, whylen, "'%s' contains a '.' component", rel);
        if (!slash) break;
        p = slash + 1;
        if (!*p) return bd_err(why, whylen, "'%s' ends with '/'", rel);
    }
    return true;
}

bool gallery_install_name_check(const char *rel, char *why, size_t whylen) {
    if (!gallery_relpath_check(rel, why, whylen)) return false;
    size_t n = strlen(rel);
    if (!strncmp(rel, ".blockdraft", 11) && (rel[11] == 0 || rel[11] == '/'))
        return bd_err(why, whylen, "'%s' is inside blockdraft's state folder", rel);
    bool top = strchr(rel, '/') == NULL;
    if (top && ((n > 5 && !strcmp(rel + n - 5, ".yaml")) || (n > 4 && !strcmp(rel + n - 4, ".yml"))))
        return bd_err(why, whylen, "'%s' is a model config name (<models>/NAME.yaml belongs to model NAME)", rel);
    const char *base = strrchr(rel, '/');
    base = base ? base + 1 : rel;
    size_t bl = strlen(base);
    if (bl > 8 && !strcmp(base + bl - 8, ".partial"))
        return bd_err(why, whylen, "'%s' ends in .partial, the name of an unfinished download", rel);
    const char *t = strstr(base, ".tmp.");
    if (t && t[5] && strspn(t + 5, "0123456789") == strlen(t + 5))
        return bd_err(why, whylen, "'%s' is the name of a temporary file blockdraft writes", rel);
    return true;
}

bool gallery_models_dir(char *out, size_t n, char *err, size_t errlen) {
    const char *env = getenv("BLOCKDRAFT_MODELS");
    int w;
    if (env && *env) {
        w = snprintf(out, n, "%s", env);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return bd_err(err, errlen, "neither BLOCKDRAFT_MODELS nor HOME is set");
        w = snprintf(out, n, "%s/.local/share/blockdraft/models", home);
    }
    if (w < 0 || (size_t)w >= n) return bd_err(err, errlen, "models folder path too long");
    /* Drop trailing slashes so joined paths look clean. */
    size_t l = strlen(out);
    while (l > 1 && out[l - 1] == '/') out[--l] = 0;
    return true;
}

static bool under(const char *real_base, const char *real) {
    size_t bl = strlen(real_base);
    if (!strcmp(real_base, "/")) return true;
    return !strncmp(real, real_base, bl) && (real[bl] == 0 || real[bl] == '/');
}

bool gallery_path_inside(const char *models_dir, const char *rel, char *out, size_t n, char *err,
                         size_t errlen) {
    char why[300];
    if (!gallery_relpath_check(rel, why, sizeof why)) return bd_err(err, errlen, "%s", why);
    int w = snprintf(out, n, "%s/%s", models_dir, rel);
    if (w < 0 || (size_t)w >= n) return bd_err(err, errlen, "path too long: %s", rel);
    char base[PATH_MAX], real[PATH_MAX];
    if (!realpath(models_dir, base))
        return bd_err(err, errlen, "models folder %s: %s", models_dir, strerror(errno));
    /* Deepest existing prefix of models_dir/rel. */
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s", out);
    size_t blen = strlen(models_dir);
    for (;;) {
        struct stat st;
        if (lstat(probe, &st) == 0) {
            if (!realpath(probe, real))
                return bd_err(err, errlen, "'%s' resolves through a broken symlink (%s)", rel,
                              probe);
            if (!under(base, real))
                return bd_err(err, errlen,
                              "'%s' resolves to %s, outside the models folder %s (symlink escape)",
                              rel, real, base);
            return true;
        }
        char *slash = strrchr(probe, '/');
        if (!slash || (size_t)(slash - probe) <= blen) return true; /* nothing below base exists */
        *slash = 0;
    }
}

bool gallery_strcpy(char *dst, size_t n, const char *src) {
    size_t l = strlen(src);
    if (n == 0) return false;
    if (l >= n) {
        memcpy(dst, src, n - 1);
        dst[n - 1] = 0;
        return false;
    }
    memcpy(dst, src, l + 1);
    return true;
}

bool gallery_join(char *dst, size_t n, const char *a, const char *b, const char *suffix) {
    size_t la = strlen(a), lb = strlen(b), ls = strlen(suffix);
    if (la + 1 + lb + ls + 1 > n) {
        if (n) dst[0] = 0;
        return false;
    }
    memcpy(dst, a, la);
    dst[la] = '/';
    memcpy(dst + la + 1, b, lb);
    memcpy(dst + la + 1 + lb, suffix, ls + 1);
    return true;
}

bool gallery_mkdirs(const char *path, char *err, size_t errlen) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return bd_err(err, errlen, "path too long");
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return bd_err(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return bd_err(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
        return bd_err(err, errlen, "%s is not a directory", tmp);
    return true;
}

bool gallery_mkdirs_parent(const char *path, char *err, size_t errlen) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return bd_err(err, errlen, "path too long");
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp) return true;
    *slash = 0;
    return gallery_mkdirs(tmp, err, errlen);
}

bool gallery_read_file(const char *path, size_t max, char **buf, size_t *len, char *err,
                       size_t errlen) {
    *buf = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO must not block the open; it is refused below */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return bd_err(err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return bd_err(err, errlen, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return bd_err(err, errlen, "%s: larger than %zu bytes", path, max);
    }
    char *b = malloc((size_t)st.st_size + 1);
    if (!b) {
        close(fd);
        return bd_err(err, errlen, "out of memory");
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    b[got] = 0;
    *buf = b;
    *len = got;
    return true;
}

void gallery_sync_parent(const char *path) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

bool gallery_write_atomic(const char *path, const void *data, size_t len, char *err,
                          size_t errlen) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return bd_err(err, errlen, "path too long");
    /* A fresh file: whatever is at the temporary name (a stale file, or a
     * symlink or hard link someone planted) is removed, never written
     * through. */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return bd_err(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return bd_err(err, errlen, "cannot write %s: %s", tmp, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return bd_err(err, errlen, "cannot write %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return bd_err(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    gallery_sync_parent(path);
    return true;
}

/* ------------------------------------------------------------------------
 * Locks
 * ---------------------------------------------------------------------- */

int gallery_lock(const char *models_dir, const char *key, gallery_wait_fn waiting, void *ctx,
                 const atomic_bool *cancel, char *err, size_t errlen) {
    char dir[PATH_MAX], path[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/.blockdraft/locks", models_dir);
    if (!gallery_mkdirs(dir, err, errlen)) return -1;
    /* The key may be a relative file name: flatten it. */
    char flat[512];
    size_t j = 0;
    for (size_t i = 0; key[i] && j < sizeof flat - 1; i++)
        flat[j++] = (key[i] == '/') ? '%' : key[i];
    flat[j] = 0;
    if (snprintf(path, sizeof path, "%s/%s.lock", dir, flat) >= (int)sizeof path) {
        bd_err(err, errlen, "lock path too long");
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
        bd_err(err, errlen, "cannot open lock %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    if (errno != EWOULDBLOCK) {
        bd_err(err, errlen, "cannot lock %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (waiting) waiting(ctx, key);
    /* polled, so that a cancel (a server shutting down) ends the wait */
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            bd_err(err, errlen, "cannot lock %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (cancel && atomic_load(cancel)) {
            bd_err(err, errlen, "cancelled while waiting for %s", key);
            close(fd);
            return -1;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return fd;
}

void gallery_unlock(int fd) {
    if (fd >= 0) {
        flock(fd, LOCK_UN);
        close(fd);
    }
}

/* ------------------------------------------------------------------------
 * Install record (JSON)
 * ---------------------------------------------------------------------- */

bool gallery_state_path(const char *models_dir, const char *name, char *out, size_t n) {
    int w = snprintf(out, n, "%s/.blockdraft/state/%s.json", models_dir, name);
    return w > 0 && (size_t)w < n;
}

bool gallery_state_write(const char *models_dir, const gallery_state *s, char *err, size_t errlen) {
    char path[PATH_MAX];
    if (!gallery_state_path(models_dir, s->name, path, sizeof path))
        return bd_err(err, errlen, "state path too long");
    if (!gallery_mkdirs_parent(path, err, errlen)) return false;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(s->name));
    json_object_set_new(o, "status", json_string(s->status));
    json_object_set_new(o, "reason", json_string(s->reason));
    json_object_set_new(o, "gallery", json_string(s->gallery));
    json_object_set_new(o, "installed_at", json_string(s->installed_at));
    json_t *files = json_array();
    for (int i = 0; i < s->n_files; i++) {
        json_t *f = json_object();
        json_object_set_new(f, "filename", json_string(s->files[i].filename));
        json_object_set_new(f, "sha256", json_string(s->files[i].sha256));
        json_object_set_new(f, "role", json_string(s->files[i].role));
        json_object_set_new(f, "size", json_integer((json_int_t)s->files[i].size));
        json_array_append_new(files, f);
    }
    json_object_set_new(o, "files", files);
    json_t *checks = json_array();
    for (int i = 0; i < s->n_checks; i++) {
        json_t *c = json_object();
        json_object_set_new(c, "name", json_string(s->checks[i].name));
        json_object_set_new(c, "verdict", json_string(s->checks[i].verdict));
        json_object_set_new(c, "detail", json_string(s->checks[i].detail));
        json_array_append_new(checks, c);
    }
    json_object_set_new(o, "checks", checks);
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text) return bd_err(err, errlen, "out of memory (or invalid UTF-8 in a message)");
    size_t len = strlen(text);
    bool ok = gallery_write_atomic(path, text, len, err, errlen);
    free(text);
    return ok;
}

static void jcopy(json_t *o, const char *key, char *dst, size_t n) {
    const char *v = json_string_value(json_object_get(o, key));
    snprintf(dst, n, "%s", v ? v : "");
}

bool gallery_state_read(const char *models_dir, const char *name, gallery_state *s, bool *absent,
                        char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    *absent = false;
    char path[PATH_MAX];
    if (!gallery_state_path(models_dir, name, path, sizeof path))
        return bd_err(err, errlen, "state path too long");
    struct stat st;
    if (stat(path, &st) != 0) {
        *absent = true;
        return bd_err(err, errlen, "%s: not installed by blockdraft pull", name);
    }
    json_error_t je;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        if (o) json_decref(o);
        return bd_err(err, errlen, "%s:%d: %s", path, je.line, je.text);
    }
    jcopy(o, "name", s->name, sizeof s->name);
    jcopy(o, "status", s->status, sizeof s->status);
    jcopy(o, "reason", s->reason, sizeof s->reason);
    jcopy(o, "gallery", s->gallery, sizeof s->gallery);
    jcopy(o, "installed_at", s->installed_at, sizeof s->installed_at);
    json_t *files = json_object_get(o, "files");
    size_t i;
    json_t *v;
    json_array_foreach(files, i, v) {
        if (s->n_files >= GALLERY_STATE_MAX_FILES) break;
        gallery_state_file *f = &s->files[s->n_files++];
        jcopy(v, "filename", f->filename, sizeof f->filename);
        jcopy(v, "sha256", f->sha256, sizeof f->sha256);
        jcopy(v, "role", f->role, sizeof f->role);
        json_int_t sz = json_integer_value(json_object_get(v, "size"));
        f->size = sz > 0 ? (uint64_t)sz : 0;
    }
    json_t *checks = json_object_get(o, "checks");
    json_array_foreach(checks, i, v) {
        if (s->n_checks >= GALLERY_STATE_MAX_CHECKS) break;
        gallery_state_check *c = &s->checks[s->n_checks++];
        jcopy(v, "name", c->name, sizeof c->name);
        jcopy(v, "verdict", c->verdict, sizeof c->verdict);
        jcopy(v, "detail", c->detail, sizeof c->detail);
    }
    json_decref(o);
    if (strcmp(s->name, name) != 0) return bd_err(err, errlen, "%s: record names '%s'", path, s->name);
    return true;
}
