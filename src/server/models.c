/*
 * models.c - the models a server can run, by name.
 *
 * The -m/-md pair is registered and loaded at start, named --alias or
 * after its file. Any other name is looked up in the models folder through
 * its gallery config (gallery_resolve_installed) on its first request,
 * loaded then, and kept loaded. A name is only ever a name: "x.gguf" or
 * "../x" is never opened as a file, so a client cannot make the server
 * read a file of its working directory or anywhere else.
 *
 * Reloading: before each request the model's files (target, drafter,
 * config) are compared with what they were at load (device, inode, size,
 * mtime), and the mappings with the SIGBUS guard's verdict
 * (bd_model_intact). A model whose files changed or whose mapping faulted
 * -- a file replaced or truncated while served -- is retired and loaded
 * afresh for that request; a model whose load failed is retried the same
 * way once one of its files changes (a failure is not cached forever).
 * Requests already holding the retired model finish with it (a truncated
 * file makes their generation fail with an error, never a crash: see
 * bd_mmap_guard_install); it is freed when the last lets go. Remaining
 * race: a file rewritten in place with the same size within one mtime
 * tick, and without ever being shorter, is not noticed.
 *
 * Bounds (a config from an index is untrusted): a config's context_size
 * is capped at the model's trained context, its threads at the machine's
 * CPUs and its parallel at SRV_MAX_SLOTS; whatever asks for it, a model
 * whose slots' KV caches would not fit the memory available is refused
 * before anything is allocated.
 *
 * Loading a model creates its slots: each slot has its own target session
 * and, with a drafter, its own bd_spec (drafter state; bd_spec_open), plus
 * a worker thread. Every session runs on a thread pool shared by all slots
 * of all models that ask for the same thread count (one pool in the usual
 * case): slots working at once take turns on its threads instead of each
 * running an all-core pool (bd_threadpool). The chat template is parsed
 * once per model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_int.h"
#include "../chat/toolcall.h"
#include "../decode/grammar.h"

/* The shared pool for n_threads (0: all CPUs), created on first use. */
static bd_threadpool *pool_get(server *s, int n_threads, char *err, size_t errlen) {
    bd_threadpool *tp = NULL;
    pthread_mutex_lock(&s->pools_mu);
    for (int i = 0; i < s->n_pools && !tp; i++)
        if (s->pools[i].n_threads == n_threads) tp = s->pools[i].tp;
    if (!tp && s->n_pools == (int)(sizeof s->pools / sizeof s->pools[0]))
        bd_err(err, errlen, "too many different thread counts among the served models");
    else if (!tp && (tp = bd_threadpool_create(n_threads, err, errlen)) != NULL)
        s->pools[s->n_pools++] = (struct srv_pool){n_threads, tp};
    pthread_mutex_unlock(&s->pools_mu);
    return tp;
}

#define SRV_MAX_SLOTS 64

static void file_id(const char *path, srv_file_id *id) {
    memset(id, 0, sizeof *id);
    struct stat st;
    if (!path[0] || stat(path, &st) != 0) return;
    *id = (srv_file_id){true, (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                        (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec, (long long)st.st_mtim.tv_nsec};
}

static bool file_changed(const char *path, const srv_file_id *was) {
    srv_file_id now;
    file_id(path, &now);
    return memcmp(&now, was, sizeof now) != 0;
}

/* Bytes of memory available for new allocations (MemAvailable), 0 when
 * unknown. */
static unsigned long long mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    return pages > 0 && pg > 0 ? (unsigned long long)pages * (unsigned long long)pg : 0;
}

/* The config's sizes, bounded by the model and the machine (a config from
 * an index is untrusted); the command line's are the operator's own. */
static void bound_config(server *s, srv_model *m, bd_session_params *sp, int32_t train) {
    if (!m->has_cfg) return;
    if (m->cfg.context_size > 0 && s->p.n_ctx <= 0 && train > 0 && sp->n_ctx > train) {
        fprintf(stderr, "serve: %s: context_size %d capped at the model's trained context %d\n", m->name, sp->n_ctx,
                train);
        sp->n_ctx = train;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (m->cfg.threads > 0 && s->p.n_threads <= 0 && cpus > 0 && sp->n_threads > cpus) {
        fprintf(stderr, "serve: %s: threads %d capped at the %ld CPUs\n", m->name, sp->n_threads, cpus);
        sp->n_threads = (int32_t)cpus;
    }
}

static bool model_load(server *s, srv_model *m, char *err, size_t errlen) {
    m->m = bd_model_open(m->target_path, err, errlen);
    if (!m->m) return false;
    if (!strcmp(bd_model_arch(m->m), "dflash"))
        return bd_err(err, errlen, "%s is a DFlash drafter, not a model that can be served on its own",
                       m->target_path);
    m->spp = bd_spec_default_params();
    if (m->draft_path[0]) {
        m->dm = bd_model_open(m->draft_path, err, errlen);
        if (!m->dm) return false;
        m->spp.type = bd_spec_type_for_draft(m->dm);
    }
    if (m->from_cli && s->p.spec_type >= 0) m->spp.type = (bd_spec_type)s->p.spec_type;
    if (!m->dm && m->spp.type != BD_SPEC_NGRAM_SIMPLE) m->spp.type = BD_SPEC_NONE;
    /* defaults, then the model's config (the same mapping as `run NAME`),
     * then the server's command-line flags */
    bd_session_params sp = bd_session_default_params();
    int32_t train = bd_model_n_ctx_train(m->m);
    sp.n_ctx = train > 0 && train < 4096 ? train : 4096;
    if (m->has_cfg) gallery_config_apply(&m->cfg, &sp, NULL, NULL, &m->spp);
    bound_config(s, m, &sp, train);
    if (s->p.n_ctx > 0) sp.n_ctx = s->p.n_ctx;
    else if (s->p.n_ctx < 0 && train > 0) sp.n_ctx = train; /* -c 0: the trained context */
    if (s->p.n_threads > 0) sp.n_threads = s->p.n_threads;
    if (s->p.type_k) sp.type_k = s->p.type_k;
    if (s->p.type_v) sp.type_v = s->p.type_v;
    if (s->p.draft_type_k) m->spp.draft_type_k = s->p.draft_type_k;
    if (s->p.draft_type_v) m->spp.draft_type_v = s->p.draft_type_v;
    if (m->from_cli) { /* --rope-scaling and the like (llama-server's, for its one model) */
        sp.rope_scaling = s->p.rope.rope_scaling;
        sp.rope_freq_base = s->p.rope.rope_freq_base;
        sp.rope_freq_scale = s->p.rope.rope_freq_scale;
        sp.yarn_orig_ctx = s->p.rope.yarn_orig_ctx;
    }
    if (s->p.spec_n_max > 0) m->spp.n_max = s->p.spec_n_max;
    if (s->p.spec_n_min > 0) m->spp.n_min = s->p.spec_n_min;
    if (s->p.spec_p_min >= 0) m->spp.p_min = s->p.spec_p_min;
    /* --spec-draft-n-max N alone drafts N every step, as llama-server does
     * with it; with --spec-adaptive N is the bound (a config's n_max is one) */
    m->spp.adaptive = gallery_spec_adaptive(m->has_cfg ? &m->cfg : NULL,
                                            s->p.spec_adaptive >= 0 ? s->p.spec_adaptive
                                            : s->p.spec_n_max > 0   ? 0
                                                                    : -1,
                                            m->spp.type);
    m->n_ctx = sp.n_ctx;
    bool spec = m->spp.type != BD_SPEC_NONE;
    /* each speculative slot needs its own drafter state: default to one */
    m->n_slots = s->p.parallel > 0 ? s->p.parallel
                 : (m->has_cfg && m->cfg.parallel > 0) ? m->cfg.parallel
                 : spec ? 1 : 2;
    if (m->n_slots > SRV_MAX_SLOTS) {
        fprintf(stderr, "serve: %s: parallel %d capped at %d slots\n", m->name, m->n_slots, SRV_MAX_SLOTS);
        m->n_slots = SRV_MAX_SLOTS;
    }
    /* every slot's KV cache is allocated (and zero-filled) now: refuse
     * what the machine cannot hold instead of being killed for it */
    unsigned long long kv = bd_session_kv_bytes(m->m, &sp) +
                            (m->dm && m->spp.type == BD_SPEC_DRAFT_SIMPLE ? bd_session_kv_bytes(m->dm, &sp) : 0);
    unsigned long long need = kv * (unsigned long long)m->n_slots, avail = mem_available();
    if (avail && need > avail)
        return bd_err(err, errlen,
                      "%d slot%s of %d tokens need %.1f GiB of KV cache, more than the %.1f GiB of memory available; "
                      "lower context_size or parallel (or -c / --parallel), or halve the cache with f16 "
                      "(-ctk f16 -ctv f16, cache_type_k / cache_type_v)",
                      m->n_slots, m->n_slots == 1 ? "" : "s", sp.n_ctx, need / 1073741824.0, avail / 1073741824.0);

    sp.threadpool = pool_get(s, sp.n_threads, err, errlen);
    if (!sp.threadpool) return false;
    m->slots = calloc((size_t)m->n_slots, sizeof *m->slots);
    if (!m->slots) return bd_err(err, errlen, "out of memory");
    for (int i = 0; i < m->n_slots; i++) {
        srv_slot *sl = &m->slots[i];
        sl->model = m;
        sl->id = i;
        if (spec) {
            /* the slot's session (with the drafter's taps) and its drafter state */
            char warn[256] = "";
            sl->spec = bd_spec_open(m->m, m->dm, &sp, &m->spp, warn, sizeof warn, err, errlen);
            if (!sl->spec) return false;
            sl->sess = bd_spec_session(sl->spec);
            if (warn[0] && i == 0) fprintf(stderr, "serve: %s: warning: %s\n", m->name, warn);
        } else {
            sl->sess = bd_session_create(m->m, &sp, err, errlen);
            if (!sl->sess) return false;
        }
    }

    /* chat template: the model's own, else ChatML */
    const char *src = m->from_cli && s->template_override ? s->template_override : bd_model_chat_template(m->m);
    m->tmpl_fallback = src == NULL;
    if (!src) src = chat_template_chatml;
    /* --reasoning-format none: thoughts stay in the content */
    m->reasoning = strstr(src, "<think>") != NULL && s->p.reasoning_format != SERVER_REASONING_NONE;
    m->tool_format = chat_tool_format_detect(src);
    m->bos_str = chat_token_text(m->m, bd_token_bos(m->m));
    m->eos_str = chat_token_text(m->m, bd_token_eos(m->m));
    char terr[512];
    m->tmpl = chat_template_create(src, m->bos_str, m->eos_str, terr, sizeof terr);
    if (!m->tmpl) snprintf(m->tmpl_err, sizeof m->tmpl_err, "the model's chat template cannot be used: %s", terr);

    for (int i = 0; i < m->n_slots; i++) {
        if (pthread_create(&m->slots[i].thread, NULL, srv_slot_main, &m->slots[i]) != 0)
            return bd_err(err, errlen, "cannot start a worker thread");
        m->slots[i].started = true;
    }
    fprintf(stderr, "serve: loaded %s (%s%s%s%s), %d slot%s, context %d, KV cache K %s V %s (%.1f MiB a slot)%s\n",
            m->name, bd_model_arch(m->m), spec ? ", speculative " : "", spec ? bd_spec_type_name(m->spp.type) : "",
            spec && m->spp.adaptive ? ", adaptive draft length" : "", m->n_slots, m->n_slots == 1 ? "" : "s", m->n_ctx,
            bd_kv_type_name(sp.type_k), bd_kv_type_name(sp.type_v), bd_session_kv_bytes(m->m, &sp) / 1048576.0,
            m->tmpl_fallback ? ", ChatML template (model has none)" : "");
    return true;
}

static srv_model *model_new(server *s, const char *name) {
    srv_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->srv = s;
    snprintf(m->name, sizeof m->name, "%s", name);
    pthread_mutex_init(&m->load_mu, NULL);
    pthread_mutex_init(&m->gv_mu, NULL);
    atomic_init(&m->quit, false);
    return m;
}

/* Load under the model's own lock so other models stay usable meanwhile. */
static bool model_ensure_loaded(server *s, srv_model *m, char *err, size_t errlen) {
    pthread_mutex_lock(&m->load_mu);
    if (m->state == MODEL_UNLOADED) {
        char e[512] = "";
        m->state = model_load(s, m, e, sizeof e) ? MODEL_LOADED : MODEL_FAILED;
        if (m->state == MODEL_FAILED) {
            snprintf(m->load_err, sizeof m->load_err, "cannot load model '%s': %s", m->name, e);
            if (!m->from_cli || s->cli_name[0] == '\0' || atomic_load(&s->ready))
                fprintf(stderr, "serve: %s\n", m->load_err); /* cmd_serve reports the -m one at start */
        }
    }
    bool ok = m->state == MODEL_LOADED;
    if (!ok) bd_err(err, errlen, "%s", m->load_err);
    pthread_mutex_unlock(&m->load_mu);
    return ok;
}

/* Stop the slot workers of m (each finishes its job first) and fail what
 * is still queued for it. Without any lock held. */
static void model_stop(server *s, srv_model *m) {
    pthread_mutex_lock(&s->qmu);
    atomic_store(&m->quit, true);
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_mutex_lock(&m->load_mu); /* a model still loading holds it */
    for (int i = 0; i < m->n_slots; i++)
        if (m->slots && m->slots[i].started) {
            pthread_join(m->slots[i].thread, NULL);
            m->slots[i].started = false;
        }
    pthread_mutex_unlock(&m->load_mu);
    srv_sched_drop_model(s, m);
}

static void model_destroy(srv_model *m) {
    for (int i = 0; m->slots && i < m->n_slots; i++) {
        if (m->slots[i].spec) bd_spec_free(m->slots[i].spec); /* owns the session */
        else bd_session_free(m->slots[i].sess);
    }
    free(m->slots);
    chat_template_free(m->tmpl);
    free(m->bos_str);
    free(m->eos_str);
    bd_model_free(m->dm);
    bd_model_free(m->m);
    bd_grammar_vocab_free(m->gvocab);
    pthread_mutex_destroy(&m->gv_mu);
    pthread_mutex_destroy(&m->load_mu);
    free(m);
}

/* Free the retired models no request holds any more. */
static void reap_retired(server *s) {
    srv_model *done = NULL;
    pthread_mutex_lock(&s->models_mu);
    for (srv_model **pp = &s->retired; *pp;) {
        srv_model *m = *pp;
        if (m->users == 0) {
            *pp = m->next;
            m->next = done;
            done = m;
        } else {
            pp = &m->next;
        }
    }
    pthread_mutex_unlock(&s->models_mu);
    while (done) {
        srv_model *nx = done->next;
        model_stop(s, done);
        model_destroy(done);
        done = nx;
    }
}

/* Whether m must be loaded afresh: its files changed since it was loaded
 * (or since its load failed), or its mapping faulted. Under models_mu. */
static bool model_stale(const srv_model *m) {
    int st = atomic_load(&m->state);
    if (st == MODEL_UNLOADED) return false; /* being loaded now */
    if (file_changed(m->target_path, &m->id_target) || file_changed(m->draft_path, &m->id_draft) ||
        file_changed(m->cfg_path, &m->id_cfg))
        return true;
    return st == MODEL_LOADED && (!bd_model_intact(m->m) || (m->dm && !bd_model_intact(m->dm)));
}

/* Take m off the list (it stays alive while requests hold it). Under
 * models_mu. */
static void model_retire(server *s, srv_model *m) {
    for (srv_model **pp = &s->models; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    m->retired = true;
    m->next = s->retired;
    s->retired = m;
    fprintf(stderr, "serve: %s: its files changed on disk; loading it again\n", m->name);
}

static void model_ids(srv_model *m) {
    file_id(m->target_path, &m->id_target);
    file_id(m->draft_path, &m->id_draft);
    file_id(m->cfg_path, &m->id_cfg);
}

/* A new, not yet loaded model for name: the -m model, or an installed
 * one. Under models_mu. NULL with *status and err. */
static srv_model *model_resolve(server *s, const char *name, int *status, char *err, size_t errlen) {
    srv_model *m;
    if (s->cli_name[0] && !strcmp(name, s->cli_name)) {
        if (!(m = model_new(s, name))) return *status = 500, bd_err(err, errlen, "out of memory"), NULL;
        m->from_cli = true;
        snprintf(m->target_path, sizeof m->target_path, "%s", s->p.model_path);
        if (s->p.draft_path) snprintf(m->draft_path, sizeof m->draft_path, "%s", s->p.draft_path);
        model_ids(m);
        return m;
    }
    char why[256];
    if (!gallery_name_check(name, why, sizeof why) || !s->models_dir[0])
        return *status = 404, bd_err(err, errlen, "model '%s' does not exist", name), NULL;
    char cfg[GALLERY_PATH_MAX + 200];
    snprintf(cfg, sizeof cfg, "%s/%s.yaml", s->models_dir, name);
    srv_file_id cfg_id;
    file_id(cfg, &cfg_id); /* before reading it: a change after is noticed */
    gallery_model gm;
    char e[600];
    if (!gallery_resolve_installed(s->models_dir, name, &gm, e, sizeof e)) {
        *status = cfg_id.present ? 400 : 404;
        if (cfg_id.present) return bd_err(err, errlen, "model '%s' is installed but cannot be used: %s", name, e), NULL;
        return bd_err(err, errlen, "model '%s' does not exist", name), NULL;
    }
    if (!(m = model_new(s, name))) return *status = 500, bd_err(err, errlen, "out of memory"), NULL;
    snprintf(m->target_path, sizeof m->target_path, "%s", gm.target_path);
    snprintf(m->draft_path, sizeof m->draft_path, "%s", gm.draft_path);
    snprintf(m->cfg_path, sizeof m->cfg_path, "%s", cfg);
    m->has_cfg = gm.has_config;
    if (gm.has_config) m->cfg = gm.cfg;
    model_ids(m);
    m->id_cfg = cfg_id;
    return m;
}

bool srv_model_register_cli(server *s, char *err, size_t errlen) {
    (void)err; /* nothing can fail now; the load reports */
    (void)errlen;
    char name[GALLERY_NAME_MAX];
    if (s->p.alias) {
        snprintf(name, sizeof name, "%s", s->p.alias);
    } else {
        const char *b = strrchr(s->p.model_path, '/');
        b = b ? b + 1 : s->p.model_path;
        snprintf(name, sizeof name, "%s", b);
        size_t n = strlen(name);
        if (n > 5 && !strcmp(name + n - 5, ".gguf")) name[n - 5] = '\0';
    }
    snprintf(s->cli_name, sizeof s->cli_name, "%s", name);
    snprintf(s->default_model, sizeof s->default_model, "%s", name);
    return true;
}

bool srv_model_load_cli(server *s, char *err, size_t errlen) {
    if (!s->cli_name[0]) return bd_err(err, errlen, "no -m model registered");
    int status;
    srv_model *m = srv_model_get(s, s->cli_name, &status, err, errlen);
    srv_model_put(s, m);
    return m != NULL;
}

srv_model *srv_model_get(server *s, const char *name, int *status, char *err, size_t errlen) {
    pthread_mutex_lock(&s->models_mu);
    srv_model *m = s->models;
    while (m && (strcmp(m->name, name) || atomic_load(&m->removed))) m = m->next;
    if (m && model_stale(m)) {
        model_retire(s, m);
        m = NULL;
    }
    if (!m) {
        m = model_resolve(s, name, status, err, errlen);
        if (!m) {
            pthread_mutex_unlock(&s->models_mu);
            reap_retired(s);
            return NULL;
        }
        m->next = s->models;
        s->models = m;
    }
    m->users++;
    pthread_mutex_unlock(&s->models_mu);
    reap_retired(s);
    if (!model_ensure_loaded(s, m, err, errlen)) {
        srv_model_put(s, m);
        *status = 500;
        return NULL;
    }
    return m;
}

srv_model *srv_model_hold(server *s, srv_model *m) {
    pthread_mutex_lock(&s->models_mu);
    m->users++;
    pthread_mutex_unlock(&s->models_mu);
    return m;
}

void srv_model_put(server *s, srv_model *m) {
    if (!m) return;
    pthread_mutex_lock(&s->models_mu);
    m->users--;
    bool reap = m->retired && m->users == 0;
    pthread_mutex_unlock(&s->models_mu);
    if (reap) reap_retired(s);
}

void srv_models_stop_workers(server *s) {
    pthread_mutex_lock(&s->qmu);
    s->quit = true;
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_mutex_lock(&s->models_mu);
    for (int list = 0; list < 2; list++)
        for (srv_model *m = list ? s->retired : s->models; m; m = m->next) {
            /* a model still loading holds load_mu; wait for it */
            pthread_mutex_lock(&m->load_mu);
            for (int i = 0; i < m->n_slots; i++)
                if (m->slots && m->slots[i].started) {
                    pthread_join(m->slots[i].thread, NULL);
                    m->slots[i].started = false;
                }
            pthread_mutex_unlock(&m->load_mu);
        }
    pthread_mutex_unlock(&s->models_mu);
}

void srv_models_free(server *s) {
    srv_models_stop_workers(s);
    for (int list = 0; list < 2; list++) {
        srv_model *m = list ? s->retired : s->models;
        if (list) s->retired = NULL;
        else s->models = NULL;
        while (m) {
            srv_model *nx = m->next;
            model_destroy(m);
            m = nx;
        }
    }
    for (int i = 0; i < s->n_pools; i++) bd_threadpool_free(s->pools[i].tp); /* after every session */
    s->n_pools = 0;
}
