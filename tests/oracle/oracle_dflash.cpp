// oracle_dflash.cpp - bd-oracle-dflash: llama.cpp v0.5.0's own DFlash
// speculative decoding (libllama-common, common/speculative.h, type
// draft-dflash), greedy, printing every step's drafts. Built by
// tests/oracle/setup.sh against node-llama-cpp's prebuilt libraries; never
// linked into blockdraft.
//
//   bd-oracle-dflash -m TARGET.gguf -md DRAFT.gguf --ids 1,2,3 -n N --n-max K
//                    [-t THREADS] [-c CTX] [-v] [other llama.cpp options]
//   {"prompt_ids":[...],
//    "steps":[{"pos":P,"anchor":A,"drafts":[...],"accepted":a,
//              "second":[...],"gap":[...]}, ...],
//    "generated_ids":[...],"generated_second":[...],"generated_gap":[...]}
// generated_second / generated_gap: the target's runner-up and top1 - top2
// logit margin at each generated token.
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

// Runner-up id and top1 - top2 margin of a logits row whose argmax is `top`
// (the target's greedy choice); second = -1 when the row has one entry.
static void row_margin(const float *lg, int n, llama_token top, llama_token *second, float *gap) {
    int b2 = -1;
    for (int t = 0; t < n; t++)
        if (t != top && (b2 < 0 || lg[t] > lg[b2])) b2 = t;
    *second = b2;
    *gap = b2 < 0 ? 0.0f : lg[top] - lg[b2];
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
    // other setting is llama.cpp's default for `--spec-type draft-dflash`,
    // except the numerics, set as bd-oracle sets them unless given: F32 KV
    // caches for the target and the drafter (not rounded through F16),
    // flash attention off, no weight repacking (ggml's plain vec_dot path);
    // with llama.cpp's own defaults (F16 KV, FA auto, repacking) the tiny
    // qwen3 pair's greedy output already differs at the 4th token. And no
    // memory fitting (-fit off: it costs seconds per start).
    const char *defaults[][2] = {{"-c", "1024"}, {"-t", "1"}, {"-ctk", "f32"}, {"-ctv", "f32"}, {"-ctkd", "f32"},
                                 {"-ctvd", "f32"}, {"-fa", "off"}, {"-fit", "off"}};
    std::vector<std::string> args = {"bd-oracle-dflash", "--spec-type", "draft-dflash", "--temp", "0", "--no-repack"};
    std::vector<std::string> user;
    std::vector<llama_token> inp;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v")) { g_verbose = true; continue; }
        if (!strcmp(argv[i], "--ids")) {
            if (i + 1 >= argc || !parse_ids(argv[++i], inp)) return usage();
            continue;
        }
        user.push_back(strcmp(argv[i], "--n-max") ? argv[i] : "--spec-draft-n-max");
    }
    for (auto &d : defaults)
        if (std::find(user.begin(), user.end(), d[0]) == user.end()) {
            args.push_back(d[0]);
            args.push_back(d[1]);
        }
    args.insert(args.end(), user.begin(), user.end());
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
    // the target's runner-up and margin for every generated token
    std::vector<llama_token> gen_second(1);
    std::vector<float> gen_gap(1);
    row_margin(llama_get_logits_ith(ctx_tgt, -1), n_vocab, id_last, &gen_second[0], &gen_gap[0]);
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
        // runner-up and margin of every draft row. llama.cpp's default
        // (--spec-draft-backend-sampling on) runs the drafter's top-k=10 on
        // the backend, so only those candidates are kept for block rows
        // 1..n; without backend sampling the full logits rows are read.
        // Either stays readable until the next decode on ctx_dft.
        std::vector<llama_token> second(draft.size());
        std::vector<float> gap(draft.size());
        for (size_t r = 0; r < draft.size(); r++) {
            const int32_t row = (int32_t)r + 1;
            const llama_token d = draft[r];
            std::vector<std::pair<llama_token, float>> cand;
            const float *sl = llama_get_sampled_logits_ith(ctx_dft, row);
            const llama_token *sid = llama_get_sampled_candidates_ith(ctx_dft, row);
            if (sl && sid) {
                const uint32_t nc = llama_get_sampled_logits_count_ith(ctx_dft, row);
                for (uint32_t k = 0; k < nc; k++) cand.push_back({sid[k], sl[k]});
            } else {
                const float *lg = llama_get_logits_ith(ctx_dft, row);
                if (!lg) { fprintf(stderr, "bd-oracle-dflash: no drafter logits for row %d\n", row); return 1; }
                for (int t = 0; t < n_vocab_dft; t++) cand.push_back({t, lg[t]});
            }
            int i_d = -1, i_2 = -1;
            for (int k = 0; k < (int)cand.size(); k++)
                if (cand[k].first == d) i_d = k;
            if (i_d < 0) { fprintf(stderr, "bd-oracle-dflash: row %d: draft %d not among the candidates\n", row, d); return 1; }
            for (int k = 0; k < (int)cand.size(); k++) {
                if (cand[k].second > cand[i_d].second) {
                    fprintf(stderr, "bd-oracle-dflash: row %d: draft %d is not the argmax (%d)\n", row, d, cand[k].first);
                    return 1;
                }
                if (k != i_d && (i_2 < 0 || cand[k].second > cand[i_2].second)) i_2 = k;
            }
            second[r] = i_2 < 0 ? -1 : cand[i_2].first;
            gap[r] = i_2 < 0 ? 0.0f : cand[i_d].second - cand[i_2].second;
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
        for (size_t k = 0; k < ids.size(); k++) {
            const float *lg = llama_get_logits_ith(ctx_tgt, (int32_t)k);
            if (!lg) { fprintf(stderr, "bd-oracle-dflash: no target logits for row %zu\n", k); return 1; }
            llama_token s2;
            float g;
            row_margin(lg, n_vocab, ids[k], &s2, &g);
            gen_second.push_back(s2);
            gen_gap.push_back(g);
        }

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
    if ((int)generated.size() > params.n_predict) {
        generated.resize(params.n_predict);
        gen_second.resize(params.n_predict);
        gen_gap.resize(params.n_predict);
    }
    printf("],\"generated_ids\":");
    print_ids(generated);
    printf(",\"generated_second\":");
    print_ids(gen_second);
    printf(",\"generated_gap\":[");
    for (size_t r = 0; r < gen_gap.size(); r++) printf(r ? ",%.6g" : "%.6g", (double)gen_gap[r]);
    putchar(']');
    printf("}\n");
    fflush(stdout);
    llama_batch_free(batch);
    common_speculative_free(spec);
    llama_backend_free();
    return 0;
}
