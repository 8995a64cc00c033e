/*
 * dflash_load.c - bind a `dflash` drafter GGUF (the architecture table's
 * loader for its `dflash` row).
 *
 * The header is checked by the drafter schema of pairing.c first — the
 * same check the gallery runs at install — so every limit and every
 * refused variant has one definition. This file then only reads the values
 * the schema vouched for and binds the tensors with their exact shapes.
 */
#include <string.h>

#include "model.h"
#include "pairing.h"

bool bd_dflash_load(bd_model *m, char *err, size_t errlen) {
    bd_pairing_report rep;
    bd_dflash_schema sc;
    bd_pairing_report_init(&rep);
    if (!bd_pairing_drafter_check(m->gguf, &sc, &rep)) {
        const bd_pairing_check *c = bd_pairing_report_first(&rep, BD_PAIRING_FAIL);
        return bd_err(err, errlen, "%s: %s", m->path, c ? c->detail : "not a loadable DFlash drafter");
    }
    if (!bd_model_load_hparams(m, "dflash", err, errlen)) return false;
    if (m->hp.hd > BD_MAX_HEAD_DIM) return bd_err(err, errlen, "%s: head dim %d too large", m->path, m->hp.hd);
    if ((uint32_t)m->hp.n_embd != sc.n_embd || (uint32_t)m->hp.n_layer != sc.n_layer)
        return bd_err(err, errlen, "%s: drafter header is inconsistent", m->path);
    m->hp.rope_type = BD_ROPE_NEOX;
    bd_dflash_hp *dh = &m->dflash;
    dh->block_size = (int32_t)sc.block_size;
    dh->n_target_layers = (int32_t)sc.n_taps;
    memcpy(dh->target_layers, sc.target_layers, sizeof dh->target_layers);
    dh->mask_id = (int32_t)sc.mask_token_id;
    dh->causal = sc.causal;
    dh->swa_window = (int32_t)sc.swa_window;
    memcpy(dh->swa_layer, sc.swa_layer, sizeof dh->swa_layer);

    const int64_t E = m->hp.n_embd;
    if (!bd_model_get_mat(m, "fc.weight", (int64_t)dh->n_target_layers * E, E, true, &dh->fc, err, errlen) ||
        !bd_model_get_vec(m, "enc.output_norm.weight", E, true, &dh->enc_norm, err, errlen) ||
        !bd_model_get_vec(m, "output_norm.weight", E, true, &m->output_norm, err, errlen))
        return false;
    if (sc.has_embeddings) {
        m->hp.n_vocab = (int32_t)sc.n_vocab;
        if (!bd_model_get_mat(m, "token_embd.weight", E, m->hp.n_vocab, true, &m->tok_embd, err, errlen) ||
            !bd_model_get_mat(m, "output.weight", E, m->hp.n_vocab, false, &m->output, err, errlen))
            return false;
        if (!m->output.data) m->output = m->tok_embd;
    }
    return bd_model_load_layers(m, "dflash", err, errlen);
}
