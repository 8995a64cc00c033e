// oracle_dflash.cpp - bd-oracle-dflash: llama.cpp v0.5.0's own DFlash
// speculative decoding (libllama-common, common/speculative.h, type
// draft-dflash), greedy, printing every step's drafts. Built by
// tests/oracle/setup.sh against node-llama-cpp's prebuilt libraries; never
// linked into blockdraft.
//
//   bd-oracle-dflash -m TARGET.gguf -md DRAFT.gguf --ids 1,2,3 -n N --n-max K
//                    [-t THREADS] [-c CTX] [-v]
//   {"prompt_ids":[...],
//    "steps":[{"pos":P,"anchor":A,"drafts":[...],"accepted":a,
//              "second":[...],"gap":[...]}, ...],
//    "generated_ids":[...]}
// second[i] / gap[i]: the runner-up token of draft row i+1 in llama.cpp's
// drafter logits and the logit margin top1 - top2 (for judging near-ties
// when another engine drafts differently).
//
// The prompt is given as token ids so both engines see the same prompt (the
// caller takes them from `blockdraft run --json`'s prompt_ids).
//
// Loop (the llama-server flow, tools/server/server-context.cpp, which matches
// the reference loop of shared/reference/dflash.md 4.1):
//   prefill  the target decodes the whole prompt (logits on the last row),
//            common_speculative_process() injects every row's tapped features
//            into the draft KV, the target's greedy sampler gives the first
//            generated token = the first anchor.
//   step     common_speculative_draft(pos0 = n_past, id_last = anchor): one
//            drafter decode over [anchor, MASK x n_max]; block rows removed
//            from the draft KV; the target decodes [anchor, drafts...] with
//            logits on every row; common_speculative_process() injects all
//            rows; common_sampler_sample_and_accept_n() accepts; both caches
//            are trimmed to the committed length (as in
//            examples/speculative-simple).
// examples/speculative-simple instead keeps the last prompt token as the
// first anchor (prefill of n-1 tokens), which shifts every step by one
// position relative to the reference; the server flow is used here so the
// traces line up with blockdraft's.
//
// The draft length is always --n-max (llama.cpp drafts a block of n_max+1
// rows whatever the remaining budget; the budget only truncates the result,
// and here it is not applied, as in blockdraft); generated_ids is cut to N.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"
#include "arg.h"
#include "sampling.h"
#include "speculative.h"
#include "ggml-backend.h"
#include "llama.h"

#ifndef BD_ORACLE_LIBDIR
#error "BD_ORACLE_LIBDIR must be defined"
#endif

static bool g_verbose = false;

static void log_cb(enum ggml_log_level level, const char *text, void *) {
    if (g_verbose || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void print_ids(const std::vector<llama_token> &v) {
    putchar('[');
    for (size_t i = 0; i < v.size(); i++) printf(i ? ",%d" : "%d", v[i]);
    putchar(']');
}

// "1,2,3" -> ids; false on anything that is not a comma-separated list of
// non-negative integers.
static bool parse_ids(const char *s, std::vector<llama_token> &out) {
    out.clear();
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > 0x7fffffffL) return false;
        out.push_back((llama_token)v);
        s = end;
        if (*s == ',') s++;
        else if (*s) return false;
    }
    return !out.empty();
}

static int usage() {
    fprintf(stderr, "usage: bd-oracle-dflash -m TARGET.gguf -md DRAFT.gguf --ids 1,2,3 -n N --n-max K "
                    "[-t THREADS] [-c CTX] [-v]\n");
    return 2;
}

int main(int argc, char **argv) {
    // Everything not handled here goes to llama.cpp's own parser, so every
    // other setting is llama.cpp's default for `--spec-type draft-dflash`.
    std::vector<std::string> args = {"bd-oracle-dflash", "--spec-type", "draft-dflash", "--temp", "0",
                                     "-c", "1024", "-t", "1"};
    std::vector<llama_token> inp;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v")) { g_verbose = true; continue; }
        if (!strcmp(argv[i], "--ids")) {
            if (i + 1 >= argc || !parse_ids(argv[++i], inp)) return usage();
            continue;
        }
        if (!strcmp(argv[i], "--n-max")) { args.push_back("--spec-draft-n-max"); continue; }
        args.push_back(argv[i]);
    }
    if (inp.empty()) return usage();
    std::vector<char *> av;
    for (auto &s : args) av.push_back(&s[0]);
    av.push_back(nullptr);

    llama_log_set(log_cb, nullptr);
    ggml_backend_load_all_from_path(BD_ORACLE_LIBDIR);
    common_params params;
    if (!common_params_parse((int)args.size(), av.data(), params, LLAMA_EXAMPLE_SPECULATIVE)) return usage();
    llama_log_set(log_cb, nullptr); // the parser may have installed its own logger
    if (params.n_predict < 1) return usage();
    params.n_gpu_layers = 0;
    const auto limits = common_speculative_get_output_limits(params.n_batch, params.n_parallel,
                                                             common_speculative_n_max(&params.speculative));
    params.n_outputs_max = limits.total;
    params.n_outputs_max_per_seq = limits.per_seq;

    llama_backend_init();
    auto init_tgt = common_init_from_params(params);
    llama_model *model_tgt = init_tgt->model();
    llama_context *ctx_tgt = init_tgt->context();
    if (!model_tgt || !ctx_tgt) { fprintf(stderr, "bd-oracle-dflash: cannot load the target\n"); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model_tgt));
    for (llama_token t : inp)
        if (t >= n_vocab) { fprintf(stderr, "bd-oracle-dflash: prompt id %d >= vocab %d\n", t, n_vocab); return 1; }
    if ((int)inp.size() + params.n_predict + 64 > (int)llama_n_ctx(ctx_tgt) ||
        (int)inp.size() > (int)llama_n_batch(ctx_tgt)) {
        fprintf(stderr, "bd-oracle-dflash: prompt + n does not fit the context/batch\n");
        return 1;
    }

    common_speculative_init_result_ptr spec_init;
    {
        common_params params_dft = common_base_params_to_speculative(params);
        spec_init = common_speculative_init_from_params(params_dft, model_tgt, ctx_tgt);
        params.speculative.draft.ctx_tgt = ctx_tgt;
        params.speculative.draft.ctx_dft = spec_init->context();
    }
    llama_context *ctx_dft = params.speculative.draft.ctx_dft;
    if (!ctx_dft) { fprintf(stderr, "bd-oracle-dflash: cannot load the drafter\n"); return 1; }
    const int n_vocab_dft = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx_dft)));

    common_sampler_ptr smpl(common_sampler_init(model_tgt, params.sampling));
    common_speculative *spec = common_speculative_init(params.speculative, 1);
    if (!spec) { fprintf(stderr, "bd-oracle-dflash: speculative init failed\n"); return 1; }
    const llama_seq_id seq = 0;

    // Prefill: the whole prompt, logits on the last row, features of every
    // row into the draft KV; the first generated token is the first anchor.
    {
        llama_batch b = llama_batch_init((int)inp.size(), 0, 1);
        for (size_t i = 0; i < inp.size(); i++)
            common_batch_add(b, inp[i], (llama_pos)i, {seq}, i + 1 == inp.size());
        if (llama_decode(ctx_tgt, b) != 0) { fprintf(stderr, "bd-oracle-dflash: prefill failed\n"); return 1; }
        if (!common_speculative_process(spec, b)) { fprintf(stderr, "bd-oracle-dflash: process failed\n"); return 1; }
        llama_batch_free(b);
    }
    std::vector<llama_token> committed(inp.begin(), inp.end()); // tokens in the target KV
    int n_past = (int)inp.size();
    llama_token id_last = common_sampler_sample(smpl.get(), ctx_tgt, -1);
    common_sampler_accept(smpl.get(), id_last, true);
    std::vector<llama_token> generated = {id_last};
    common_speculative_begin(spec, seq, committed);

    llama_batch batch = llama_batch_init(llama_n_batch(ctx_tgt), 0, 1);
    std::vector<llama_token> draft;
    printf("{\"prompt_ids\":");
    print_ids(inp);
    printf(",\"steps\":[");
    int n_steps = 0;
    while ((int)generated.size() < params.n_predict) {
        const int n_draft_max = (int)llama_n_ctx(ctx_tgt) - n_past - 2;
        draft.clear();
        if (n_draft_max > 0) {
            common_speculative_get_draft_params(spec, seq) = {true, n_draft_max, n_past, id_last, &committed, &draft};
            common_speculative_draft(spec);
        }
        // runner-up and margin of every draft row (the drafter's logits of
        // block rows 1..n stay readable until the next decode on ctx_dft)
        std::vector<llama_token> second(draft.size());
        std::vector<float> gap(draft.size());
        for (size_t r = 0; r < draft.size(); r++) {
            const float *lg = llama_get_logits_ith(ctx_dft, (int32_t)r + 1);
            if (!lg) { fprintf(stderr, "bd-oracle-dflash: no drafter logits for row %zu\n", r + 1); return 1; }
            if (getenv("BD_DBG")) { for (int rr = -1; rr <= (int)draft.size(); rr++) { const float *l2 = llama_get_logits_ith(ctx_dft, rr); if (!l2) { fprintf(stderr, "row %d null\n", rr); continue; } int bb = 0; for (int t = 1; t < n_vocab_dft; t++) if (l2[t] > l2[bb]) bb = t; fprintf(stderr, "row %d argmax %d (%g) l[0]=%g l[d]=%g\n", rr, bb, l2[bb], l2[0], l2[draft[r]]); } }
            const llama_token d = draft[r];
            if (d < 0 || d >= n_vocab_dft) { fprintf(stderr, "bd-oracle-dflash: draft id %d out of range\n", d); return 1; }
            int b2 = -1;
            for (int t = 0; t < n_vocab_dft; t++) {
                if (lg[t] > lg[d]) {
                    fprintf(stderr, "bd-oracle-dflash: row %zu: draft %d is not the logits argmax (%d)\n", r + 1, d, t);
                    return 1;
                }
                if (t != d && (b2 < 0 || lg[t] > lg[b2])) b2 = t;
            }
            second[r] = b2;
            gap[r] = lg[d] - lg[b2];
        }
        // drop the block rows from the draft KV: only committed features stay
        llama_memory_seq_rm(llama_get_memory(ctx_dft), seq, n_past, -1);

        common_batch_clear(batch);
        common_batch_add(batch, id_last, n_past, {seq}, true);
        for (size_t i = 0; i < draft.size(); i++)
            common_batch_add(batch, draft[i], n_past + 1 + (llama_pos)i, {seq}, true);
        if (llama_decode(ctx_tgt, batch) != 0) { fprintf(stderr, "bd-oracle-dflash: verify failed\n"); return 1; }
        if (!common_speculative_process(spec, batch)) { fprintf(stderr, "bd-oracle-dflash: process failed\n"); return 1; }
        const std::vector<llama_token> ids = common_sampler_sample_and_accept_n(smpl.get(), ctx_tgt, draft);
        if (ids.empty()) { fprintf(stderr, "bd-oracle-dflash: no token accepted\n"); return 1; }
        common_speculative_accept(spec, seq, (uint16_t)(ids.size() - 1));

        printf("%s{\"pos\":%d,\"anchor\":%d,\"drafts\":", n_steps++ ? "," : "", n_past, id_last);
        print_ids(draft);
        printf(",\"accepted\":%d,\"second\":", (int)ids.size() - 1);
        print_ids(second);
        printf(",\"gap\":[");
        for (size_t r = 0; r < gap.size(); r++) printf(r ? ",%.6g" : "%.6g", (double)gap[r]);
        printf("]}");

        // commit the anchor and the accepted drafts; the last id is the next anchor
        n_past += (int)ids.size();
        for (llama_token t : ids) {
            committed.push_back(id_last);
            id_last = t;
            generated.push_back(t);
        }
        llama_memory_seq_rm(llama_get_memory(ctx_tgt), seq, n_past, -1);
        llama_memory_seq_rm(llama_get_memory(ctx_dft), seq, n_past, -1);
    }
    if ((int)generated.size() > params.n_predict) generated.resize(params.n_predict);
    printf("],\"generated_ids\":");
    print_ids(generated);
    printf("}\n");
    fflush(stdout);
    llama_batch_free(batch);
    common_speculative_free(spec);
    llama_backend_free();
    return 0;
}
