/*
 * args.h - small helpers shared by the subcommands' option parsers.
 */
#ifndef BD_CLI_ARGS_H
#define BD_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* If argv[*i] equals one of the names (NULL-terminated list), consume it
 * and its value; *val gets the value. Exits with a usage message (status
 * 2) when the value is missing: only CLI code does this. */
bool arg_take(int argc, char **argv, int *i, const char *const *names, const char **val);
bool arg_is(const char *a, const char *n1, const char *n2);

/* Strict number parsing; print "blockdraft: bad value for OPT: VAL" and
 * exit 2 on failure. */
int32_t arg_i32(const char *opt, const char *v, int32_t lo, int32_t hi);
uint64_t arg_u64(const char *opt, const char *v);
float arg_f32(const char *opt, const char *v, float lo, float hi);

/* "auto" | "full" | "short" -> the DFlash block enum (bd_dflash_block, as
 * an int so this header needs no engine header); exits 2 otherwise. */
int arg_dflash_block(const char *opt, const char *v);

/* llama.cpp's RoPE context flags, into a session's parameters:
 * --rope-scaling none|linear|yarn, --rope-scale N (a factor: frequency
 * scale 1/N), --rope-freq-scale F, --rope-freq-base F, --yarn-orig-ctx N.
 * True when argv[*i] was one (consumed with its value); a bad value exits
 * 2 with a message, as arg_i32. */
struct bd_session_params;
bool arg_rope(int argc, char **argv, int *i, struct bd_session_params *sp);
/* Its usage lines. */
#define ARG_ROPE_USAGE                                                                                        \
    "RoPE (llama.cpp's flag names; default: the model file's):\n"                                             \
    "  --rope-scaling none|linear|yarn  --rope-scale N  --rope-freq-scale F  --rope-freq-base F\n"            \
    "  --yarn-orig-ctx N      e.g. Qwen3 at 131072 tokens: --rope-scaling yarn --rope-scale 4\n"               \
    "                         --yarn-orig-ctx 32768\n"

/* llama.cpp's KV cache flags, into a session's parameters: -ctk /
 * --cache-type-k and -ctv / --cache-type-v, BD_KV_TYPE_NAMES; and -fa /
 * --flash-attn on|off|auto, taken and checked but setting nothing: there
 * is one attention kernel, and every cache type runs in it (llama.cpp needs
 * flash attention for a quantized V cache). True when argv[*i] was one
 * (consumed with its value); another type or value exits 2 naming those
 * supported. */
bool arg_cache_type(int argc, char **argv, int *i, struct bd_session_params *sp);
#define ARG_CACHE_TYPE_USAGE                                                                                  \
    "  -ctk, --cache-type-k T  -ctv, --cache-type-v T  KV cache element types, llama.cpp's: f32\n"         \
    "                         (default), f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1 (f16 halves\n"  \
    "                         the cache, q8_0 holds it in about a quarter, q4_0 in a seventh)\n"         \
    "  -fa, --flash-attn on|off|auto  accepted as llama.cpp's; blockdraft has one attention, and\n"          \
    "                         quantized V caches need no flag\n"

/* The drafter's: -ctkd / --cache-type-k-draft / --spec-draft-type-k and
 * -ctvd / --cache-type-v-draft / --spec-draft-type-v into *type_k /
 * *type_v (enum bd_kv_type); as arg_cache_type otherwise. */
bool arg_cache_type_draft(int argc, char **argv, int *i, int32_t *type_k, int32_t *type_v);
#define ARG_CACHE_TYPE_DRAFT_USAGE                                                                            \
    "  -ctkd, --cache-type-k-draft T  -ctvd, --cache-type-v-draft T  the drafter's caches (a DFlash\n"       \
    "                         drafter's context, a draft model's), the same types\n"

/* A --chat-template value: Jinja text, or the one built-in name known here
 * (chatml). Otherwise prints why, naming cmd, and returns false. */
bool arg_chat_template_ok(const char *cmd, const char *v);

/* Flags of llama.cpp's tools that a subcommand takes only to say why they
 * change nothing here (ARG_NOTE: "note: ... ignored: why", and the command
 * goes on) or to refuse with what to use instead (ARG_REFUSE). Never
 * silently ignored. */
enum { ARG_NONE = 0, ARG_VALUE = 1, ARG_OPTIONAL = 2 }; /* the flag's value: none, one, on|off|auto|... or none */
enum { ARG_NOTE = 0, ARG_REFUSE = 1 };
typedef struct arg_compat {
    const char *names[7]; /* NULL-terminated unless all seven are used */
    int arg;              /* ARG_NONE / ARG_VALUE / ARG_OPTIONAL */
    int act;              /* ARG_NOTE / ARG_REFUSE */
    const char *why;      /* note: why it has no effect; refuse: what to use instead */
} arg_compat;

/* Rows that `run` and `serve` share (llama.cpp's common flags). */
#define ARG_COMPAT_CPU_ONLY                                                                                  \
    {{"-ngl", "--gpu-layers", "--n-gpu-layers", NULL}, ARG_VALUE, ARG_NOTE, "blockdraft runs on the CPU"},      \
        {{"-ngld", "--spec-draft-ngl", "--gpu-layers-draft", "--n-gpu-layers-draft", NULL}, ARG_VALUE, ARG_NOTE, \
         "blockdraft runs on the CPU"},                                                                      \
        {{"-dev", "--device", "-devd", "--device-draft", "--spec-draft-device", NULL}, ARG_VALUE, ARG_NOTE,     \
         "blockdraft runs on the CPU"},                                                                      \
        {{"-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu", NULL}, ARG_VALUE, ARG_NOTE,      \
         "blockdraft runs on the CPU"},                                                                      \
        {{"-fit", "--fit", NULL}, ARG_OPTIONAL, ARG_NOTE, "there is no device memory to fit"},                  \
        {{"-fitt", "--fit-target", "-fitc", "--fit-ctx", NULL}, ARG_VALUE, ARG_NOTE,                            \
         "there is no device memory to fit"},                                                                \
        {{"-kvo", "--kv-offload", "-nkvo", "--no-kv-offload", "--no-host", "--op-offload", "--no-op-offload"},  \
         ARG_NONE, ARG_NOTE, "blockdraft runs on the CPU"}
#define ARG_COMPAT_THREADS                                                                                   \
    {{"-tb", "--threads-batch", "-td", "--threads-draft", "--spec-draft-threads", NULL}, ARG_VALUE, ARG_NOTE,   \
     "prompt processing and the drafter use the -t pool"},                                                   \
        {{"-tbd", "--threads-batch-draft", "--spec-draft-threads-batch", NULL}, ARG_VALUE, ARG_NOTE,            \
         "the drafter uses the -t pool"},                                                                    \
        {{"-C", "--cpu-mask", "-Cr", "--cpu-range", "-Cb", "--cpu-mask-batch", "-Crb"}, ARG_VALUE, ARG_NOTE,    \
         "CPU affinity is left to the system"},                                                              \
        {{"--cpu-range-batch", "--cpu-strict", "--cpu-strict-batch", "--prio", "--prio-batch", "--poll",        \
          "--poll-batch"},                                                                                   \
         ARG_VALUE, ARG_NOTE, "thread placement and priority are left to the system"},                       \
        {{"--numa", NULL}, ARG_VALUE, ARG_NOTE, "NUMA placement is left to the system"},                        \
        {{"--mlock", "--no-repack", "--repack", "-nr", NULL}, ARG_NONE, ARG_NOTE,                               \
         "weights are used as the file stores them (--mmap / --no-mmap choose how they are held)"}
#define ARG_COMPAT_REFUSED                                                                                   \
    {{"--hf-token", NULL}, ARG_VALUE, ARG_REFUSE, "set HF_TOKEN in the environment"},                          \
        {{"--lora", "--lora-scaled", "--control-vector", "--control-vector-scaled", NULL}, ARG_VALUE, ARG_REFUSE, \
         "LoRA adapters and control vectors are not supported"},                                             \
        {{"--typical", "--typical-p", "--presence-penalty", "--frequency-penalty", "--dry-multiplier",          \
          "--dry-base", "--dry-allowed-length"},                                                             \
         ARG_VALUE, ARG_REFUSE,                                                                              \
         "samplers: only --temp, --top-k, --top-p, --min-p and --repeat-penalty are supported"},             \
        {{"--dry-penalty-last-n", "--dry-sequence-breaker", "--xtc-probability", "--xtc-threshold",             \
          "--mirostat", "--mirostat-lr", "--mirostat-ent"},                                                  \
         ARG_VALUE, ARG_REFUSE,                                                                              \
         "samplers: only --temp, --top-k, --top-p, --min-p and --repeat-penalty are supported"},             \
        {{"--dynatemp-range", "--dynatemp-exp", "--top-nsigma", "--top-n-sigma", "-l", "--logit-bias", NULL},   \
         ARG_VALUE, ARG_REFUSE,                                                                              \
         "samplers: only --temp, --top-k, --top-p, --min-p and --repeat-penalty are supported"}

/* A value an ARG_OPTIONAL flag takes: on, off, auto, true, false, 1, 0,
 * enabled, disabled. */
bool arg_optional_value(const char *v);

/* If argv[*i] is one of table's n flags: 1 when noted (it and its value
 * consumed, the note printed as "blockdraft CMD: note: ..." unless quiet:
 * for a second pass over the same flags), -1 when refused or its value is
 * missing ("blockdraft CMD: TOOL's FLAG is not supported: why"), 0 when it
 * is not in the table. */
int arg_compat_take(const char *cmd, const char *tool, const arg_compat *table, size_t n, bool quiet, int argc,
                    char **argv, int *i);

/* llama.cpp's string_process_escapes (its -e / --escape, on by default in
 * llama-cli and llama-completion), in place on the len bytes at s: a
 * backslash followed by n, r, t, a quote, a double quote or a backslash
 * becomes the byte it names; a backslash, x and two more bytes that strtol
 * reads whole in base 16 become that byte (NUL included); any other
 * backslash stays as it is. Returns the new length. */
size_t arg_unescape(char *s, size_t len);

/* Parse "1,2,3" into ids (at most max). Returns the count or -1. */
int arg_ids(const char *s, int32_t *ids, int max);

/* Read a whole file into a malloc'd NUL-terminated buffer (NULL on error). */
char *arg_read_file(const char *path, size_t *len);

/* Text from files and the network (index entries, GGUF strings) for the
 * terminal, control bytes escaped (bd_escape_ctrl). cli_put_esc writes s
 * whole; cli_esc returns an escaped copy of at most 1023 bytes in one of
 * four rotating static buffers (several may be used in one printf). */
void cli_put_esc(FILE *f, const char *s, bool keep_nl);
const char *cli_esc(const char *s);

#endif
