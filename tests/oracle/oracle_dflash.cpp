// oracle_dflash.cpp - bd-oracle-dflash: llama.cpp v0.5.0's own DFlash
// speculative decoding (libllama-common, common/speculative.h), greedy, with
// every step's drafted tokens printed. Built by tests/oracle/setup.sh against
// node-llama-cpp's prebuilt libraries; never linked into blockdraft.
//
//   bd-oracle-dflash -m TARGET.gguf -md DRAFT.gguf -p PROMPT -n N
//                    [--draft-n-max K] [-t THREADS] [-c CTX]
//   {"prompt_ids":[...],"steps":[{"pos0":P,"anchor":A,"draft":[...],
//     "accepted":a,"emitted":[...]},...],"generated_ids":[...]}
//
// The options are handed to llama.cpp's own argument parser (so every other
// setting is its default for `--spec-type draft-dflash`), with --temp 0.
// The loop follows the reference flow (shared/reference/dflash.md 4.3): draft
// from the anchor, verify [anchor, draft...] on the target with logits on all
// rows, feed that batch to the drafter (common_speculative_process), accept
// with the target's sampler, trim both caches to the committed length.
#include <cstdio>
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

int main(int argc, char **argv) {
    std::vector<std::string> args = {"bd-oracle-dflash", "--spec-type", "draft-dflash", "--temp", "0",
                                     "-c", "1024", "-t", "1"};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v")) { g_verbose = true; continue; }
        if (!strcmp(argv[i], "--draft-n-max")) { args.push_back("--spec-draft-n-max"); continue; }
        args.push_back(argv[i]);
    }
    std::vector<char *> av;
    for (auto &s : args) av.push_back(&s[0]);
    av.push_back(nullptr);

    llama_log_set(log_cb, nullptr);
    ggml_backend_load_all_from_path(BD_ORACLE_LIBDIR);
    common_params params;
    if (!common_params_parse((int)args.size(), av.data(), params, LLAMA_EXAMPLE_SPECULATIVE)) return 2;
    llama_log_set(log_cb, nullptr); // the parser may have installed its own logger
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
    const llama_vocab *vocab = llama_model_get_vocab(model_tgt);

    common_speculative_init_result_ptr spec_init;
    {
        common_params params_dft = common_base_params_to_speculative(params);
        spec_init = common_speculative_init_from_params(params_dft, model_tgt, ctx_tgt);
        params.speculative.draft.ctx_tgt = ctx_tgt;
        params.speculative.draft.ctx_dft = spec_init->context();
    }
    llama_context *ctx_dft = params.speculative.draft.ctx_dft;
    if (!ctx_dft) { fprintf(stderr, "bd-oracle-dflash: cannot load the drafter\n"); return 1; }

    std::vector<llama_token> inp = common_tokenize(ctx_tgt, params.prompt, true, true);
    if (inp.empty()) { fprintf(stderr, "bd-oracle-dflash: empty prompt\n"); return 1; }
    common_sampler_ptr smpl(common_sampler_init(model_tgt, params.sampling));
    common_speculative *spec = common_speculative_init(params.speculative, 1);
    if (!spec) { fprintf(stderr, "bd-oracle-dflash: speculative init failed\n"); return 1; }
    const llama_seq_id seq = 0;

    // Prompt minus its last token: the last one is the first anchor.
    {
        llama_batch b = llama_batch_init((int)inp.size(), 0, 1);
        for (size_t i = 0; i + 1 < inp.size(); i++) common_batch_add(b, inp[i], (llama_pos)i, {seq}, false);
        if (b.n_tokens > 0 && llama_decode(ctx_tgt, b) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
        if (!common_speculative_process(spec, b)) { fprintf(stderr, "process failed\n"); return 1; }
        llama_batch_free(b);
    }
    llama_token id_last = inp.back();
    std::vector<llama_token> committed(inp.begin(), inp.end() - 1);
    int n_past = (int)inp.size() - 1;
    common_speculative_begin(spec, seq, committed);

    llama_batch batch = llama_batch_init(llama_n_batch(ctx_tgt), 0, 1);
    std::vector<llama_token> generated, draft;
    printf("{\"prompt_ids\":");
    print_ids(inp);
    printf(",\"steps\":[");
    int n_steps = 0;
    while ((int)generated.size() < params.n_predict) {
        int n_draft_max = std::min((int)llama_n_ctx(ctx_tgt) - n_past - 2,
                                   params.n_predict - (int)generated.size() - 1);
        n_draft_max = std::max(n_draft_max, 0);
        draft.clear();
        common_speculative_get_draft_params(spec, seq) = {true, n_draft_max, n_past, id_last, &committed, &draft};
        common_speculative_draft(spec);
        llama_memory_seq_rm(llama_get_memory(ctx_dft), seq, n_past, -1);

        common_batch_clear(batch);
        common_batch_add(batch, id_last, n_past, {seq}, true);
        for (size_t i = 0; i < draft.size(); i++) common_batch_add(batch, draft[i], n_past + 1 + (llama_pos)i, {seq}, true);
        if (llama_decode(ctx_tgt, batch) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
        if (!common_speculative_process(spec, batch)) { fprintf(stderr, "process failed\n"); return 1; }
        std::vector<llama_token> ids = common_sampler_sample_and_accept_n(smpl.get(), ctx_tgt, draft);
        common_speculative_accept(spec, seq, (uint16_t)(ids.size() - 1));

        printf("%s{\"pos0\":%d,\"anchor\":%d,\"draft\":", n_steps++ ? "," : "", n_past, id_last);
        print_ids(draft);
        printf(",\"accepted\":%d,\"emitted\":", (int)ids.size() - 1);
        print_ids(ids);
        putchar('}');

        n_past += (int)ids.size();
        for (llama_token t : ids) {
            committed.push_back(id_last);
            id_last = t;
            generated.push_back(t);
        }
        llama_memory_seq_rm(llama_get_memory(ctx_tgt), seq, n_past, -1);
        llama_memory_seq_rm(llama_get_memory(ctx_dft), seq, n_past, -1);
        (void)vocab;
    }
    if ((int)generated.size() > params.n_predict) generated.resize(params.n_predict);
    printf("],\"generated_ids\":");
    print_ids(generated);
    printf("}\n");
    llama_batch_free(batch);
    common_speculative_free(spec);
    llama_backend_free();
    return 0;
}
