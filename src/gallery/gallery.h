/*
 * gallery.h - install, find, list and remove models: the API the CLI
 * (pull, list, show, rm, gallery, run NAME) and the server use.
 *
 * Pull contract (gallery_pull):
 *   1. The entry is found in the catalog (index.h) and checked before any
 *      byte is downloaded: its overrides must pass the strict config parser
 *      (config.h), every file needs a SHA-256 (unless insecure), every
 *      filename must stay inside the models folder, and parameters.model /
 *      draft_model must be among the entry's files.
 *   2. A per-model lock serialises pulls of the same model; a per-file lock
 *      protects files shared between models.
 *   3. Files whose final copy already has the right SHA-256 are kept;
 *      others are downloaded to `<file>.partial` (fetch.h).
 *   4. The target and drafter headers are validated (model/pairing.h)
 *      while new bytes are still in `.partial` files: a refused drafter or
 *      a pair that does not fit installs nothing, removes the new partials
 *      and leaves any previous install untouched.
 *   5. Only then are the partials renamed into place and the config
 *      `<models>/<name>.yaml` and the install record written (atomically).
 *   A target whose architecture this build cannot run (one not in
 *   model/arch.c, say gemma3, or a row marked unsupported) is still downloaded and verified, but recorded
 *   with status "unsupported" and the reason; gallery_resolve_model then
 *   refuses it with that reason instead of failing later in the loader.
 */
#ifndef BD_GALLERY_H
#define BD_GALLERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../model/pairing.h"
#include "config.h"
#include "fetch.h"
#include "index.h"
#include "store.h"

typedef struct gallery_pull_opts {
    const char *models_dir;         /* NULL = gallery_models_dir() */
    const char *const *indexes;     /* --index sources, searched first */
    int n_indexes;
    bool use_env_indexes;           /* also BLOCKDRAFT_GALLERY (default true) */
    bool insecure;                  /* allow files without a SHA-256 */
    fetch_opts fetch;               /* progress callback lives here */
    /* Status lines for the user ("waiting for another pull ...",
     * "already present", index warnings). May be NULL. */
    void (*note)(void *ctx, const char *msg);
    void *note_ctx;
} gallery_pull_opts;

void gallery_pull_opts_init(gallery_pull_opts *o);

typedef struct gallery_pull_result {
    char name[GALLERY_NAME_MAX];
    char status[16];   /* "installed" or "unsupported" */
    char reason[320];  /* for "unsupported" */
    char config_path[GALLERY_PATH_MAX + 256];
    int n_downloaded;  /* files fetched (0: everything was already there) */
    bd_pairing_report report;
} gallery_pull_result;

/* Install gallery entry `name` (case-insensitive). See the contract above.
 * On failure err says what happened and what state things were left in. */
bool gallery_pull(const char *name, const gallery_pull_opts *o, gallery_pull_result *res,
                  char *err, size_t errlen);

/* ------------------------------------------------------------------------
 * Using an installed model
 * ---------------------------------------------------------------------- */

typedef struct gallery_model {
    char name[GALLERY_NAME_MAX];         /* "" for a plain file path */
    char target_path[GALLERY_PATH_MAX + 256];
    char draft_path[GALLERY_PATH_MAX + 256]; /* "" = no DFlash drafter */
    bool has_config;
    gallery_config cfg;                  /* valid when has_config */
    bool pulled;                         /* installed by this call */
} gallery_model;

/* Resolve what `blockdraft run X` means:
 *   - X contains '/' or ends in .gguf: a GGUF file used as is (no config);
 *   - otherwise a model name: `<models>/X.yaml` parsed strictly, paths
 *     resolved inside the models folder (symlink escapes refused), files
 *     must exist; a model recorded as "unsupported" is refused with its
 *     reason. When the config is missing and pull is not NULL, the model is
 *     pulled first (with pull's options); with pull NULL it is an error.
 * draft_path is set only when the config enables DFlash (draft_model set
 * and spec_type not "none"). */
bool gallery_resolve_model(const char *name_or_path, const gallery_pull_opts *pull,
                           gallery_model *out, char *err, size_t errlen);
/* Only an installed model's name, in models_dir: a name that looks like a
 * path or a file (x.gguf) is still just a name, never a file opened
 * relative to the working directory (what a server must do with names a
 * client sends). Never pulls. */
bool gallery_resolve_installed(const char *models_dir, const char *name, gallery_model *out, char *err,
                               size_t errlen);

/* ------------------------------------------------------------------------
 * Listing and removal
 * ---------------------------------------------------------------------- */

typedef struct gallery_installed {
    char name[GALLERY_NAME_MAX];
    char status[24];   /* installed, unsupported, manual (no record), invalid, incomplete */
    char reason[640];
    uint64_t bytes;    /* sum of the sizes of its files present on disk */
    char model[GALLERY_PATH_MAX];
    char draft_model[GALLERY_PATH_MAX];
} gallery_installed;

/* Every `<models>/NAME.yaml`, sorted by name. *out is malloc'd (free()). A
 * missing models folder is an empty list. */
bool gallery_list_installed(const char *models_dir, gallery_installed **out, int *n, char *err,
                            size_t errlen);

/* The installed model other than `self` whose config or install record
 * names the file rel (relative to the models folder): its name in owner,
 * and, when its install record lists the file (*recorded), the SHA-256 it
 * was installed with ("" for an --insecure install). false when no other
 * model refers to rel. A pull may reuse such a file only with the same
 * bytes (gallery_pull). */
bool gallery_file_owner(const char *models_dir, const char *rel, const char *self, char *owner, size_t owner_n,
                        char sha[65], bool *recorded);

#define GALLERY_RM_MAX 16
typedef struct gallery_rm_result {
    int n_removed, n_kept;
    char removed[GALLERY_RM_MAX][GALLERY_PATH_MAX];
    char kept[GALLERY_RM_MAX][GALLERY_PATH_MAX];
    char kept_for[GALLERY_RM_MAX][GALLERY_NAME_MAX]; /* a model that still uses it */
} gallery_rm_result;

/* Remove model `name`: its config, its install record, and each of its
 * files that no other model (config or record) refers to, with leftover
 * `.partial` files and directories that become empty. */
bool gallery_remove(const char *models_dir, const char *name, gallery_rm_result *res, char *err,
                    size_t errlen);

#endif
