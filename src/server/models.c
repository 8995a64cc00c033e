/*
 * models.c - the models a server can run, by name.
 *
 * The -m/-md pair is registered and loaded at start, named --alias or
 * after its file. Any other name is looked up in the models folder through
 * its gallery config (gallery_resolve_model) on its first request, loaded
 * then, and kept loaded. Names that look like paths are never opened: a
 * client cannot make the server read an arbitrary file.
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

#include "server_int.h"
#include "../chat/toolcall.h"

static char *token_text(const bd_model *m, int32_t id) {
    if (id < 0) return NULL;
    int n = bd_token_piece(m, id, NULL, 0, true);
    if (n >= 0) return NULL; /* empty */
    char *s = malloc((size_t)-n + 1);
    if (!s) return NULL;
    n = bd_token_piece(m, id, s, -n, true);
    if (n <= 0) {
        free(s);
        return NULL;
    }
    s[n] = '\0';
    return s;
}

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
    if (s->p.n_ctx > 0) sp.n_ctx = s->p.n_ctx;
    if (s->p.n_threads > 0) sp.n_threads = s->p.n_threads;
    if (s->p.spec_n_max > 0) m->spp.n_max = s->p.spec_n_max;
    m->n_ctx = sp.n_ctx;
    bool spec = m->spp.type != BD_SPEC_NONE;
    /* each speculative slot needs its own drafter state: default to one */
    m->n_slots = s->p.parallel > 0 ? s->p.parallel
                 : (m->has_cfg && m->cfg.parallel > 0) ? m->cfg.parallel
                 : spec ? 1 : 2;

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
    m->reasoning = strstr(src, "<think>") != NULL;
    m->tool_format = chat_tool_format_detect(src);
    m->bos_str = token_text(m->m, bd_token_bos(m->m));
    m->eos_str = token_text(m->m, bd_token_eos(m->m));
    char terr[512];
    m->tmpl = chat_template_create(src, m->bos_str, m->eos_str, terr, sizeof terr);
    if (!m->tmpl) snprintf(m->tmpl_err, sizeof m->tmpl_err, "the model's chat template cannot be used: %s", terr);

    for (int i = 0; i < m->n_slots; i++) {
        if (pthread_create(&m->slots[i].thread, NULL, srv_slot_main, &m->slots[i]) != 0)
            return bd_err(err, errlen, "cannot start a worker thread");
        m->slots[i].started = true;
    }
    fprintf(stderr, "serve: loaded %s (%s%s%s), %d slot%s, context %d%s\n", m->name, bd_model_arch(m->m),
            spec ? ", speculative " : "", spec ? bd_spec_type_name(m->spp.type) : "", m->n_slots,
            m->n_slots == 1 ? "" : "s", m->n_ctx, m->tmpl_fallback ? ", ChatML template (model has none)" : "");
    return true;
}

static srv_model *model_new(server *s, const char *name) {
    srv_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->srv = s;
    snprintf(m->name, sizeof m->name, "%s", name);
    pthread_mutex_init(&m->load_mu, NULL);
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
            if (!m->from_cli) fprintf(stderr, "serve: %s\n", m->load_err); /* cmd_serve reports the -m one */
        }
    }
    bool ok = m->state == MODEL_LOADED;
    if (!ok) bd_err(err, errlen, "%s", m->load_err);
    pthread_mutex_unlock(&m->load_mu);
    return ok;
}

bool srv_model_register_cli(server *s, char *err, size_t errlen) {
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
    srv_model *m = model_new(s, name);
    if (!m) return bd_err(err, errlen, "out of memory");
    m->from_cli = true;
    snprintf(m->target_path, sizeof m->target_path, "%s", s->p.model_path);
    if (s->p.draft_path) snprintf(m->draft_path, sizeof m->draft_path, "%s", s->p.draft_path);
    pthread_mutex_lock(&s->models_mu);
    m->next = s->models;
    s->models = m;
    pthread_mutex_unlock(&s->models_mu);
    snprintf(s->default_model, sizeof s->default_model, "%s", name);
    return true;
}

bool srv_model_load_cli(server *s, char *err, size_t errlen) {
    pthread_mutex_lock(&s->models_mu);
    srv_model *m = s->models;
    while (m && !m->from_cli) m = m->next;
    pthread_mutex_unlock(&s->models_mu);
    if (!m) return bd_err(err, errlen, "no -m model registered");
    return model_ensure_loaded(s, m, err, errlen);
}

srv_model *srv_model_get(server *s, const char *name, int *status, char *err, size_t errlen) {
    pthread_mutex_lock(&s->models_mu);
    srv_model *m = s->models;
    while (m && strcmp(m->name, name)) m = m->next;
    if (!m) {
        char why[256];
        if (!gallery_name_check(name, why, sizeof why)) {
            pthread_mutex_unlock(&s->models_mu);
            *status = 404;
            return bd_err(err, errlen, "model '%s' does not exist", name), NULL;
        }
        gallery_model gm;
        char e[600];
        if (!gallery_resolve_model(name, NULL, &gm, e, sizeof e)) {
            pthread_mutex_unlock(&s->models_mu);
            char cfg[GALLERY_PATH_MAX + 200];
            struct stat stt;
            bool has = snprintf(cfg, sizeof cfg, "%s/%s.yaml", s->models_dir, name) < (int)sizeof cfg &&
                       stat(cfg, &stt) == 0;
            *status = has ? 400 : 404;
            if (has) return bd_err(err, errlen, "model '%s' is installed but cannot be used: %s", name, e), NULL;
            return bd_err(err, errlen, "model '%s' does not exist", name), NULL;
        }
        m = model_new(s, name);
        if (!m) {
            pthread_mutex_unlock(&s->models_mu);
            *status = 500;
            return bd_err(err, errlen, "out of memory"), NULL;
        }
        snprintf(m->target_path, sizeof m->target_path, "%s", gm.target_path);
        snprintf(m->draft_path, sizeof m->draft_path, "%s", gm.draft_path);
        m->has_cfg = gm.has_config;
        if (gm.has_config) m->cfg = gm.cfg;
        m->next = s->models;
        s->models = m;
    }
    pthread_mutex_unlock(&s->models_mu);
    if (!model_ensure_loaded(s, m, err, errlen)) {
        *status = 500;
        return NULL;
    }
    return m;
}


void srv_models_stop_workers(server *s) {
    pthread_mutex_lock(&s->qmu);
    s->quit = true;
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_mutex_lock(&s->models_mu);
    for (srv_model *m = s->models; m; m = m->next) {
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
    srv_model *m = s->models;
    s->models = NULL;
    while (m) {
        srv_model *nx = m->next;
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
        pthread_mutex_destroy(&m->load_mu);
        free(m);
        m = nx;
    }
    for (int i = 0; i < s->n_pools; i++) bd_threadpool_free(s->pools[i].tp); /* after every session */
    s->n_pools = 0;
}
