#!/usr/bin/env bash
# bench-compare.sh - blockdraft vs llama.cpp v0.5.0 on the same GGUF files,
# the same thread count, back to back, once per instruction-set level:
# blockdraft forced to the level (BLOCKDRAFT_ISA) against llama.cpp loading
# only its CPU backend built for that level. Prints side-by-side markdown
# tables (tools/bench-table.py). Run by `make bench-compare`; not part of
# `make test`: it takes minutes and its figures are measurements, not checks.
#
#   tools/bench-compare.sh [MODEL.gguf ...]
#
# Without arguments the models are the BENCH_SHAPES specs below, written once
# by `blockdraft make-model` into $BENCH_MODEL_DIR (never inside the
# repository; the 4B file is 2.5 GB).
#
# llama.cpp comes from tests/oracle/setup.sh (npm node-llama-cpp@3.22.1: its
# prebuilt libraries, one libggml-cpu-<variant>.so per x86 level, and the
# llama.cpp source bundle it ships). This script adds two programs next to
# bd-oracle:
#   bd-bench-llama            tests/oracle/bench_llama.c: pp, tg, verify curve,
#                             plain greedy generation, through llama.h
#   llama-speculative-simple  llama.cpp's own example, compiled from the
#                             bundled source against the prebuilt
#                             libllama-common (which holds draft-dflash)
#
# How llama.cpp is held to one level: ggml v0.5.0 (ggml-backend-reg.cpp,
# ggml_backend_load_best) lists every libggml-cpu-*.so in its search folders
# (the folder given to ggml_backend_load_all_from_path, or else the
# executable's folder and the working directory), asks each for its score on
# this CPU and loads the best. For each level this script makes a folder
# holding links to the common libraries and to ONE variant; bd-bench-llama
# gets it as --backend-dir, llama-speculative-simple runs with it as its
# working directory (its own folder holds no variant: checked). Evidence, per
# run: bd-bench-llama's JSON names the file ggml's log says it loaded
# ("loaded CPU backend from") and every libggml-cpu-*.so mapped in the
# process; speculative-simple runs under LD_DEBUG=files (the dynamic loader's
# list of opened files). The tables print the variant; a run that loaded
# another one is flagged in bold.
#
# Environment (defaults in brackets):
#   BD_BUILD [build]  BD_BIN [$BD_BUILD/blockdraft]  BD_SHARED [../shared]
#   BENCH_ISAS     levels to run [every level of ISA_LEVELS this host runs,
#                  but ref]; a level this host cannot run is reported and
#                  skipped; ref (the scalar reference kernels, what non-x86
#                  hosts run) only when named: it is slow
#   BENCH_THREADS  thread counts, one set of tables each ["1 2"]
#   BENCH_SPEC_THREADS  thread counts of the speculative runs [the last of
#                  BENCH_THREADS]
#   BENCH_REPS [3] BENCH_P [512] BENCH_N [128] BENCH_DEPTH [512] BENCH_VMAX [16]
#   BENCH_SHAPES   model specs ["0.6b 4b"]: [ARCH-]SHAPE[:LAYERS], ARCH one
#                  of the ARCH_ALIASES below (default qwen3), LAYERS keeps
#                  the shape's per-layer size with fewer layers (make-model
#                  --layers); e.g. "0.6b 4b q35-9b q35moe-35b-a3b:8 q3moe-30b-a3b:8 q3next-80b-a3b:4"
#   BENCH_SPEC_SHAPES  specs of the constructed speculative pairs ["4b"]: a
#                  --constant-output target and drafters right for all / the
#                  first 5 / no block positions (make-model --arch dflash)
#   BENCH_PAIRS    speculative pairs "TARGET.gguf:DRAFT.gguf ..." [the
#                  constructed pairs, then the trained stories260K pair]
#   BENCH_PROMPT   prompt of the speculative runs
#   BENCH_BUSY     oversubscription test: 1 = add it, only = run only it, [0]:
#                  tg of each engine alone, then with BENCH_BUSY_PROCS
#                  busy-loop processes running, back to back
#   BENCH_BUSY_PROCS [1]
#   BENCH_KV       blockdraft's KV cache type (-ctk / -ctv, and the drafters'
#                  -ctkd / -ctvd): f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0
#                  or q5_1 [f32]; llama.cpp takes the same type (flash attention
#                  auto: on where a quantized V cache needs it), but for f32 its
#                  llama-bench default f16
#   BENCH_MODEL_DIR [${TMPDIR:-/tmp}/blockdraft-bench]: files are written
#                  there once and reused (names: <arch>-<shape>[-L<layers>]-q4_k_m.gguf,
#                  qwen3-<shape>-const.gguf, dflash-<shape>-k{all,5,0}.gguf);
#                  other files can be passed as arguments instead
#   BENCH_VOCAB    tokenizer GGUF for make-model [shared qwen3-vocab.gguf];
#                  BENCH_VOCAB_QWEN35 / BENCH_VOCAB_QWEN35MOE per arch
#   BENCH_OUT [$BD_BUILD/bench]  raw JSON and logs, and table.md
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

# ---- instruction-set levels ---------------------------------------------------
# One row per level: blockdraft's BLOCKDRAFT_ISA name | the /proc/cpuinfo flags
# the level needs (blockdraft's and llama.cpp's variant's, both) | the
# llama.cpp CPU variants built for it, best match first (ggml/src/CMakeLists.txt
# of v0.5.0: haswell = AVX2 FMA F16C BMI2; alderlake = + AVX-VNNI; zen4 =
# AVX-512 VBMI VNNI BF16, icelake = AVX-512 VBMI VNNI, cascadelake = AVX-512
# VNNI; sapphirerapids = zen4's + AMX-INT8; x64 = no SIMD flags, its portable
# C). Adding a level is one row. The scalar `ref` level runs only when
# BENCH_ISAS names it (NOT_DEFAULT).
ISA_LEVELS=(
    "ref     |                                                                  | x64"
    "avx2    | avx2 fma f16c bmi2                                               | haswell"
    "avxvnni | avx2 fma f16c bmi2 avx_vnni                                      | alderlake"
    "avx512  | avx2 fma f16c bmi2 avx512f avx512bw avx512vl avx512_vnni         | zen4 icelake cascadelake"
    "amx     | avx2 fma f16c bmi2 avx512f avx512bw avx512vl avx512_vnni amx_tile amx_int8 | sapphirerapids"
)
# Levels every blockdraft build knows. Until `blockdraft bench --json` reports
# the kernel table it ran ("isa"), a level outside this list is run only when
# blockdraft confirms it: today BLOCKDRAFT_ISA=<unknown> silently keeps the
# default table.
BD_ISAS_ALWAYS="avx2 avx512 amx"
NOT_DEFAULT="ref"
# Model spec prefixes: alias=make-model --arch value.
ARCH_ALIASES="qwen3=qwen3 llama=llama q3moe=qwen3moe qwen3moe=qwen3moe q35=qwen35 qwen35=qwen35 q35moe=qwen35moe qwen35moe=qwen35moe q3next=qwen3next qwen3next=qwen3next"

BD_BUILD=${BD_BUILD:-build}
BD_BIN=${BD_BIN:-$BD_BUILD/blockdraft}
BD_SHARED=${BD_SHARED:-../shared}
THREADS=${BENCH_THREADS:-"1 2"}
read -r -a _t <<<"$THREADS"
SPEC_THREADS=${BENCH_SPEC_THREADS:-${_t[${#_t[@]} - 1]}}
R=${BENCH_REPS:-3}
P=${BENCH_P:-512}
N=${BENCH_N:-128}
D=${BENCH_DEPTH:-512}
V=${BENCH_VMAX:-16}
SHAPES=${BENCH_SHAPES-"0.6b 4b"}
SPEC_SHAPES=${BENCH_SPEC_SHAPES-"4b"}
BUSY=${BENCH_BUSY:-0}
BUSY_PROCS=${BENCH_BUSY_PROCS:-1}
KVT=${BENCH_KV:-f32}
case $KVT in f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 | iq4_nl | q5_0 | q5_1) ;;
*) echo "bench-compare: BENCH_KV must be f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1" >&2; exit 2 ;;
esac
BD_KV=(-ctk "$KVT" -ctv "$KVT" -ctkd "$KVT" -ctvd "$KVT")
# llama.cpp: the same type, but its llama-bench default f16 for f32 (the
# runs before 2026-12-07 compared an f32 blockdraft cache with that)
LL_KVT=$KVT LL_KV=() LL_SPEC_KV=()
if [ "$KVT" = f32 ]; then LL_KVT=f16; else LL_KV=(--kv "$KVT") LL_SPEC_KV=(-ctk "$KVT" -ctv "$KVT"); fi
MDIR=${BENCH_MODEL_DIR:-${TMPDIR:-/tmp}/blockdraft-bench}
OUT=${BENCH_OUT:-$BD_BUILD/bench}
VOCAB=${BENCH_VOCAB:-$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf}
PROMPT=${BENCH_PROMPT:-"Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she saw a big red ball under a tree."}

die() { echo "bench-compare: $*" >&2; exit 1; }
log() { echo "bench-compare: $*" >&2; }
case $BUSY in 0 | 1 | only) ;; *) die "BENCH_BUSY must be 0, 1 or only (got '$BUSY')" ;; esac
for t in $THREADS $SPEC_THREADS $BUSY_PROCS; do
    [[ $t =~ ^[1-9][0-9]*$ ]] || die "thread and process counts must be positive integers (got '$t')"
done

[ -x "$BD_BIN" ] || die "$BD_BIN not found (make all first)"
mkdir -p "$OUT" "$MDIR"
BD_BIN=$(cd "$(dirname "$BD_BIN")" && pwd)/$(basename "$BD_BIN")
OUT=$(cd "$OUT" && pwd)
case "$(realpath "$MDIR")/" in "$ROOT"/*) die "BENCH_MODEL_DIR must be outside the repository" ;; esac
# Results of an earlier run would be mixed into the tables: start clean.
rm -rf "${OUT:?}"/runs "$OUT"/groups.tsv "$OUT"/models.tsv "$OUT"/pairs.tsv "$OUT"/skipped.txt "$OUT"/table.md
mkdir -p "$OUT/runs"
: >"$OUT/groups.tsv"
: >"$OUT/models.tsv"
: >"$OUT/pairs.tsv"
: >"$OUT/skipped.txt"
skip() { echo "$*" >>"$OUT/skipped.txt"; log "$*"; }

# Busy-loop processes of the oversubscription test; ended on exit by their ids.
BUSY_PIDS=()
busy_stop() {
    for p in "${BUSY_PIDS[@]+"${BUSY_PIDS[@]}"}"; do kill "$p" 2>/dev/null || true; done
    for p in "${BUSY_PIDS[@]+"${BUSY_PIDS[@]}"}"; do wait "$p" 2>/dev/null || true; done
    BUSY_PIDS=()
}
trap busy_stop EXIT
busy_start() {
    for ((i = 0; i < BUSY_PROCS; i++)); do
        sh -c 'while :; do :; done' &
        BUSY_PIDS+=($!)
    done
    sleep 0.2
}

# ---- llama.cpp: install (setup.sh) and build the two harness programs -----
ORACLE=$(BD_BUILD="$BD_BUILD" tests/oracle/setup.sh | tail -n 1) || die "tests/oracle/setup.sh failed"
O=$(cd "$(dirname "$ORACLE")" && pwd) # absolute: the llama.cpp runs below cd into level folders
# Same layout as setup.sh lays out.
LIBDIR="$O/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
SRC="$O/src/llama.cpp"
[ -f "$LIBDIR/libllama-common.so" ] || die "$LIBDIR/libllama-common.so missing"
# (rebuilt when this script changes too: it sets the rpath)
if [ ! -x "$O/bd-bench-llama" ] || [ tests/oracle/bench_llama.c -nt "$O/bd-bench-llama" ] ||
    [ tools/bench-compare.sh -nt "$O/bd-bench-llama" ]; then
    log "building bd-bench-llama"
    gcc -std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -I"$SRC/include" -I"$SRC/ggml/include" \
        -DBD_ORACLE_LIBDIR="\"$LIBDIR\"" -o "$O/bd-bench-llama.tmp" tests/oracle/bench_llama.c \
        -L"$LIBDIR" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
        -Wl,-rpath,"$LIBDIR" -lm || die "compiling bench_llama.c failed"
    mv "$O/bd-bench-llama.tmp" "$O/bd-bench-llama"
fi
SPEC="$O/llama-speculative-simple"
if [ ! -x "$SPEC" ] || [ tools/bench-compare.sh -nt "$SPEC" ]; then
    log "building llama-speculative-simple from the bundled llama.cpp source"
    if [ ! -f "$SRC/examples/speculative-simple/speculative-simple.cpp" ]; then
        git -C "$SRC" -c advice.detachedHead=false checkout -q HEAD -- examples/speculative-simple ||
            die "cannot check out examples/speculative-simple from the bundle"
    fi
    command -v g++ >/dev/null || die "g++ is needed for llama-speculative-simple"
    g++ -std=c++17 -O2 -I"$SRC/include" -I"$SRC/ggml/include" -I"$SRC/common" -I"$SRC/vendor" \
        -o "$SPEC.tmp" "$SRC/examples/speculative-simple/speculative-simple.cpp" \
        -L"$LIBDIR" -l:libllama-common.so -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
        -Wl,-rpath,"$LIBDIR" || die "compiling speculative-simple.cpp failed"
    mv "$SPEC.tmp" "$SPEC"
fi
# speculative-simple searches its own folder before the working directory.
compgen -G "$O/libggml-cpu-*.so" >/dev/null &&
    die "$O holds a libggml-cpu-*.so: llama-speculative-simple would not be held to one level"
[ -z "${GGML_BACKEND_PATH:-}" ] || die "unset GGML_BACKEND_PATH: it loads one more backend into every llama.cpp run"

# ---- models ------------------------------------------------------------------
# spec_parse SPEC: sets S_ARCH S_SHAPE S_LAYERS S_STEM (file name stem).
spec_parse() {
    local s=$1 a=qwen3 pre
    S_LAYERS=""
    if [[ $s == *:* ]]; then S_LAYERS=${s##*:}; s=${s%:*}; fi
    [ -z "$S_LAYERS" ] || [[ $S_LAYERS =~ ^[1-9][0-9]*$ ]] || die "model spec '$1': layers must be a positive integer"
    if [[ $s == *-* ]]; then
        pre=${s%%-*}
        for kv in $ARCH_ALIASES; do
            if [ "${kv%%=*}" = "$pre" ]; then a=${kv#*=}; s=${s#*-}; break; fi
        done
    fi
    S_ARCH=$a
    S_SHAPE=$s
    S_STEM="$a-$s${S_LAYERS:+-L$S_LAYERS}"
}
# make_model SPEC OUT [make-model options...]: writes OUT unless it exists;
# returns 1 (with the reason in $MM_WHY) when this blockdraft's make-model
# refuses the spec (an architecture, shape or option it does not have yet).
make_model() {
    local spec=$1 f=$2 v
    shift 2
    spec_parse "$spec"
    [ -f "$f" ] && return 0
    v=VOCAB
    case $S_ARCH in qwen35) v=BENCH_VOCAB_QWEN35 ;; qwen35moe) v=BENCH_VOCAB_QWEN35MOE ;; esac
    v=${!v:-$VOCAB}
    local args=(--arch "$S_ARCH" --shape "$S_SHAPE" --quant q4_k_m --seed 1 --vocab "$v")
    [ -z "$S_LAYERS" ] || args+=(--layers "$S_LAYERS")
    # --plan first: a refusal costs nothing and is not confused with a failed write.
    if ! MM_WHY=$("$BD_BIN" make-model "${args[@]}" "$@" --plan -o "$f" 2>&1 >/dev/null); then
        MM_WHY="make-model refuses '$spec' (--arch $S_ARCH --shape $S_SHAPE${S_LAYERS:+ --layers $S_LAYERS}): $(echo "$MM_WHY" | grep -v '^ ' | head -n 2 | tr '\n' ' ')"
        return 1
    fi
    log "writing $f (make-model $spec $*; minutes for the large shapes)"
    "$BD_BIN" make-model "${args[@]}" "$@" -o "$f.tmp" >&2 || die "make-model failed writing $f"
    mv "$f.tmp" "$f"
}

MODELS=()
if [ $# -gt 0 ]; then
    for m in "$@"; do
        [ -f "$m" ] || die "$m not found"
        MODELS+=("$(realpath "$m")")
        printf '%s\t%s\t%s\n' "$(basename "$m" .gguf)" "$m" "$(realpath "$m")" >>"$OUT/models.tsv"
    done
else
    [ -z "$SHAPES" ] || [ -f "$VOCAB" ] || die "$VOCAB not found (set BD_SHARED or BENCH_VOCAB)"
    for s in $SHAPES; do
        spec_parse "$s"
        f="$MDIR/$S_STEM-q4_k_m.gguf"
        if make_model "$s" "$f"; then
            MODELS+=("$f")
            printf '%s\t%s\t%s\n' "$S_STEM-q4_k_m" "$s" "$f" >>"$OUT/models.tsv"
        else
            skip "skipped model $s: $MM_WHY"
        fi
    done
fi
PAIRS=()
if [ -n "${BENCH_PAIRS:-}" ]; then
    read -r -a PAIRS <<<"$BENCH_PAIRS"
elif [ "$BUSY" != only ]; then
    # Constructed drafters against a --constant-output target (greedy emits
    # token 0; the drafter is right for the first K block rows): always
    # right, right for 5 positions, never right.
    for s in $SPEC_SHAPES; do
        spec_parse "$s"
        # qwen3 keeps the file names of earlier runs (reused from BENCH_MODEL_DIR)
        if [ "$S_ARCH" = qwen3 ] && [ -z "$S_LAYERS" ]; then st=$S_SHAPE; else st=$S_STEM; fi
        tgt="$MDIR/$S_STEM-const.gguf"
        [ "$st" = "$S_SHAPE" ] && tgt="$MDIR/qwen3-$S_SHAPE-const.gguf"
        if ! make_model "$s" "$tgt" --constant-output; then
            skip "skipped speculative pairs on $s: $MM_WHY"
            continue
        fi
        for k in all 5 0; do
            # "-q8": every matrix Q8_0, the crafted layer too (as published
            # drafters; files from before that change had it in F32 and are
            # not reused)
            d="$MDIR/dflash-$st-q8-k$k.gguf"
            if [ ! -f "$d" ]; then
                log "writing $d (constructed drafter, right for the first $k positions)"
                if ! why=$("$BD_BIN" make-model --arch dflash --target "$tgt" --drafter constructed --accept "$k" \
                    -o "$d.tmp" 2>&1 >/dev/null); then
                    rm -f "$d.tmp"
                    skip "skipped the drafter right for $k on $s: make-model --arch dflash refuses the target: $(echo "$why" | head -n 2 | tr '\n' ' ')"
                    continue
                fi
                mv "$d.tmp" "$d"
            fi
            PAIRS+=("$tgt:$d")
        done
    done
    st="$BD_SHARED/fixtures/stories260K"
    case $KVT in
    f32 | f16 | bf16) [ -f "$st/stories260K-dflash.gguf" ] && PAIRS+=("$st/stories260K.gguf:$st/stories260K-dflash.gguf") ;;
    *) skip "skipped the stories260K pair: its heads of 8 hold no $KVT blocks of 32 (BENCH_KV)" ;;
    esac
fi
for pair in "${PAIRS[@]+"${PAIRS[@]}"}"; do
    tgt=$(realpath "${pair%%:*}")
    dft=$(realpath "${pair#*:}")
    printf '%s\t%s\t%s\n' "$(basename "$tgt" .gguf)+$(basename "$dft" .gguf)" "$tgt" "$dft" >>"$OUT/pairs.tsv"
done
[ ${#MODELS[@]} -gt 0 ] || [ ${#PAIRS[@]} -gt 0 ] || die "nothing to run (see $OUT/skipped.txt)"

# Page cache: a file just written sits there in 4 KiB pages, one read back
# after eviction mostly in 2 MiB folios, and through a mapping the second
# reads faster (docs/perf-notes.md, "Measuring: traps"). blockdraft copies
# big files into huge pages at load either way; llama.cpp maps what it does
# not repack. Each file is dropped from the cache and read back, so that both
# engines meet it as a user's file that has been read before.
for f in "${MODELS[@]+"${MODELS[@]}"}" $(cut -f2,3 "$OUT/pairs.tsv" 2>/dev/null | tr '\t' ' '); do
    [ -f "$f" ] || continue
    dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || true
    cat "$f" >/dev/null
done

# ---- machine -------------------------------------------------------------------
CPU_FLAGS=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
KEY_FLAGS=$(tr ' ' '\n' <<<"$CPU_FLAGS" | grep -E '^(avx2|fma|f16c|bmi2|avx_vnni|avx512f|avx512bw|avx512vl|avx512dq|avx512vbmi|avx512_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' ')
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') | $(nproc) CPUs | flags: $KEY_FLAGS"
    echo "memory: $(free -g | awk '/^Mem:/{print $2}') GiB | load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "threads: $THREADS (speculative: $SPEC_THREADS) | reps: $R | pp$P tg$N | verify depth $D, n = 1..$V"
    echo "KV cache: blockdraft $KVT, llama.cpp $LL_KVT"
    [ "$BUSY" = 0 ] || echo "oversubscription test: busy-loop processes: $BUSY_PROCS (sh -c 'while :; do :; done')"
    if [ $# -gt 0 ]; then what="tools/bench-compare.sh $*"; else
        what="BENCH_SHAPES=\"$SHAPES\" BENCH_SPEC_SHAPES=\"$SPEC_SHAPES\" make bench-compare"; fi
    echo "command: BENCH_ISAS=\"${BENCH_ISAS:-}\" BENCH_THREADS=\"$THREADS\" BENCH_REPS=$R BENCH_P=$P BENCH_N=$N BENCH_DEPTH=$D BENCH_VMAX=$V BENCH_BUSY=$BUSY BENCH_KV=$KVT $what"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

# ---- levels: which run here, and llama.cpp's folder for each ------------------
has_flags() { for f in $1; do [[ $CPU_FLAGS == *" $f "* ]] || return 1; done; }
LEVELS=()
declare -A L_FLAGS L_VARIANTS
for row in "${ISA_LEVELS[@]}"; do
    IFS='|' read -r name flags variants <<<"$row"
    name=$(xargs <<<"$name") # trims the blanks around the cells
    L_FLAGS[$name]=$(xargs <<<"$flags")
    L_VARIANTS[$name]=$(xargs <<<"$variants")
    LEVELS+=("$name")
done
if [ -n "${BENCH_ISAS:-}" ]; then
    WANT=$BENCH_ISAS
    for l in $WANT; do [ -n "${L_FLAGS[$l]+x}" ] || die "unknown level '$l' in BENCH_ISAS (levels: ${LEVELS[*]})"; done
else
    WANT=$(for l in "${LEVELS[@]}"; do [[ " $NOT_DEFAULT " == *" $l "* ]] || echo -n "$l "; done)
fi
# PROBE_MODEL: a file blockdraft loads, for the bandwidth probe (which reads
# its own buffer) and the level check; the stories260K fixture when blockdraft
# loads none of the benchmarked files (an architecture it does not run yet).
PROBE_MODEL=""
for m in "${MODELS[@]+"${MODELS[@]}"}" $(for p in "${PAIRS[@]+"${PAIRS[@]}"}"; do echo "${p%%:*}"; done) \
    "$BD_SHARED/fixtures/stories260K/stories260K.gguf"; do
    [ -n "$m" ] || continue
    if "$BD_BIN" bench -m "$m" -p 0 -n 0 --no-verify -t 1 --json >/dev/null 2>&1; then PROBE_MODEL=$m; break; fi
done
[ -n "$PROBE_MODEL" ] || die "blockdraft bench loads none of the models, nor the stories260K fixture (try one by hand)"

RUN_LEVELS=()
declare -A L_VARIANT L_DIR L_LOADED L_FEATS L_BDISA
for l in $WANT; do
    if ! has_flags "${L_FLAGS[$l]}"; then
        miss=$(for f in ${L_FLAGS[$l]}; do [[ $CPU_FLAGS == *" $f "* ]] || echo -n "$f "; done)
        skip "skipped level $l: this CPU lacks ${miss% }"
        continue
    fi
    # blockdraft: the level must be the table it runs
    if ! js=$(BLOCKDRAFT_ISA=$l "$BD_BIN" bench -m "$PROBE_MODEL" -p 0 -n 0 --no-verify -t 1 --json 2>"$OUT/isa-$l.log"); then
        skip "skipped level $l: blockdraft refuses BLOCKDRAFT_ISA=$l: $(head -n 1 "$OUT/isa-$l.log")"
        continue
    fi
    bdisa=$(jq -r '.isa // empty' <<<"$js")
    if [ -n "$bdisa" ] && [ "$bdisa" != "$l" ]; then
        skip "skipped level $l: blockdraft ran its '$bdisa' kernels with BLOCKDRAFT_ISA=$l"
        continue
    fi
    if [ -z "$bdisa" ] && [[ " $BD_ISAS_ALWAYS " != *" $l "* ]]; then
        skip "skipped level $l: this blockdraft does not report its kernel table (bench --json \"isa\"), and $l is not one of the levels every build has ($BD_ISAS_ALWAYS), so BLOCKDRAFT_ISA=$l may run another table"
        continue
    fi
    L_BDISA[$l]=${bdisa:-"$l (not reported by this build; the CPU has the level's flags)"}
    pf=$(jq -r '.prefetch // empty' <<<"$js")
    [ -n "$pf" ] && L_BDISA[$l]+="; weight prefetch into $pf"
    one=$(jq -r '.one_row_bits // empty' <<<"$js")
    [ -n "$one" ] && L_BDISA[$l]+="; one-row decode loops $one-bit"
    # llama.cpp: the first variant of the row that loads, alone, in its folder
    for v in ${L_VARIANTS[$l]}; do
        [ -f "$LIBDIR/libggml-cpu-$v.so" ] || continue
        dir="$O/isa-$v"
        rm -rf "$dir"
        mkdir -p "$dir"
        for lib in libggml-base.so libggml.v0.5.0.so libllama.v0.5.0.so libllama-common.so "libggml-cpu-$v.so"; do
            ln -s "$LIBDIR/$lib" "$dir/$lib"
        done
        if wj=$("$O/bd-bench-llama" --which-backend --backend-dir "$dir" 2>/dev/null) &&
            [ "$(basename "$(jq -r .cpu_backend_file <<<"$wj")")" = "libggml-cpu-$v.so" ] &&
            [ "$(jq -r .cpu_backends_mapped <<<"$wj")" = "libggml-cpu-$v.so" ]; then
            L_VARIANT[$l]=$v
            L_DIR[$l]=$dir
            L_LOADED[$l]=$(jq -r .cpu_backend <<<"$wj")
            L_FEATS[$l]=$(jq -r .cpu_features <<<"$wj")
            break
        fi
        rm -rf "$dir"
    done
    if [ -z "${L_VARIANT[$l]:-}" ]; then
        skip "skipped level $l: none of llama.cpp's variants for it (${L_VARIANTS[$l]}) loads on this CPU"
        continue
    fi
    log "level $l: blockdraft BLOCKDRAFT_ISA=$l, llama.cpp $(basename "${L_LOADED[$l]}") [${L_FEATS[$l]}]"
    RUN_LEVELS+=("$l")
done
[ ${#RUN_LEVELS[@]} -gt 0 ] || die "no level runs here (see $OUT/skipped.txt)"

# check_loaded LOG LDPREFIX VARIANT: which libggml-cpu-*.so a llama.cpp run
# loaded, as "VARIANT" or "MISMATCH:<what it loaded>". Evidence: ggml's own
# "loaded CPU backend from" line when the log has it (speculative-simple
# silences it: its memory fitting loads the backends with the log turned down
# to errors), and the dynamic loader's record of every file the process
# opened (LD_DEBUG=files, written to LDPREFIX.<pid>): exactly one variant.
check_loaded() {
    local got opened
    got=$(sed -n 's/.*loaded CPU backend from \(.*\)$/\1/p' "$1" | tail -n 1)
    opened=$(cat "$2".* 2>/dev/null | sed -n 's/.*file=\([^ ]*libggml-cpu-[^ ]*\.so\) .*dynamically loaded by.*/\1/p' |
        xargs -r -n 1 basename | sort -u | tr '\n' ' ')
    rm -f "$2".*
    opened=${opened% }
    if [ -n "$got" ]; then got=$(basename "$got"); else got=$opened; fi
    if [ "$got" = "libggml-cpu-$3.so" ] && [ "${opened:-$got}" = "$got" ]; then echo "$3"; else
        echo "MISMATCH:${got:-none} (opened: ${opened:-none})"; fi
}

# ---- runs ----------------------------------------------------------------------
for l in "${RUN_LEVELS[@]}"; do
    v=${L_VARIANT[$l]}
    dir=${L_DIR[$l]}
    for T in $THREADS $([[ " $THREADS " == *" $SPEC_THREADS "* ]] || echo "$SPEC_THREADS"); do
        G="$OUT/runs/$l-t$T"
        mkdir -p "$G"
        main=1
        [[ " $THREADS " == *" $T "* ]] || main=0 # a speculative-only thread count
        [ "$BUSY" = only ] && main=0
        # read bandwidth of this machine (1 GiB read by $T threads, best of 10 passes in two loop forms,
        # on huge pages where the kernel has them, as the models' weights)
        probe=$(BLOCKDRAFT_ISA=$l "$BD_BIN" bench -m "$PROBE_MODEL" -p 0 -n 0 --no-verify --bw-probe -t "$T" --json |
            jq -r '"\(.peak_gbps) \(if .peak_gbps_huge_pages then "huge" else "small" end)"') || probe="0 small"
        bw=${probe% *} bwpages=${probe#* }
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$l" "$T" "$v" "$G" "${L_LOADED[$l]}" "${L_FEATS[$l]}" "$bw" \
            "${L_BDISA[$l]}" "$bwpages" >>"$OUT/groups.tsv"
        for m in "${MODELS[@]+"${MODELS[@]}"}"; do
            [ $main = 1 ] || break
            b=$(basename "$m" .gguf)
            log "[$l t$T] $b: blockdraft bench"
            BLOCKDRAFT_ISA=$l "$BD_BIN" bench -m "$m" -t "$T" -r "$R" -p "$P" -n "$N" --verify-depth "$D" \
                --verify-max "$V" "${BD_KV[@]}" --json >"$G/bd-$b.json" 2>"$G/bd-$b.log" ||
                log "blockdraft bench failed on $m (see $G/bd-$b.log)"
            log "[$l t$T] $b: llama.cpp bench ($v)"
            "$O/bd-bench-llama" --backend-dir "$dir" -m "$m" -t "$T" -r "$R" -p "$P" -n "$N" --verify-depth "$D" \
                --verify-max "$V" "${LL_KV[@]+"${LL_KV[@]}"}" >"$G/ll-$b.json" 2>"$G/ll-$b.log" ||
                log "bd-bench-llama failed on $m (see $G/ll-$b.log)"
        done
        if [ "$BUSY" != 0 ] && [[ " $THREADS " == *" $T "* ]]; then
            for m in "${MODELS[@]+"${MODELS[@]}"}"; do
                b=$(basename "$m" .gguf)
                for phase in quiet busy; do
                    [ $phase = busy ] && busy_start
                    log "[$l t$T] $b: tg $phase${BUSY_PIDS[*]:+ (busy-loop processes ${BUSY_PIDS[*]})}"
                    BLOCKDRAFT_ISA=$l "$BD_BIN" bench -m "$m" -t "$T" -r "$R" -p 0 -n "$N" --no-verify "${BD_KV[@]}" --json \
                        >"$G/busy-bd-$phase-$b.json" 2>"$G/busy-bd-$phase-$b.log" || log "blockdraft tg failed ($phase)"
                    "$O/bd-bench-llama" --backend-dir "$dir" -m "$m" -t "$T" -r "$R" -p 0 -n "$N" --no-verify \
                        "${LL_KV[@]+"${LL_KV[@]}"}" >"$G/busy-ll-$phase-$b.json" 2>"$G/busy-ll-$phase-$b.log" || log "bd-bench-llama tg failed ($phase)"
                    busy_stop
                done
            done
        fi
        if [[ " $SPEC_THREADS " != *" $T "* ]] || [ "$BUSY" = only ]; then continue; fi
        while IFS=$'\t' read -r b tgt dft; do
            log "[$l t$T] $b: blockdraft speculative"
            if ! BLOCKDRAFT_ISA=$l "$BD_BIN" bench -m "$tgt" -md "$dft" -t "$T" -r "$R" -p 0 -n "$N" --no-verify \
                "${BD_KV[@]}" --spec-prompt "$PROMPT" --json >"$G/bdspec-$b.json" 2>"$G/bdspec-$b.log"; then
                log "blockdraft bench -md failed on $b (see $G/bdspec-$b.log)"
                continue
            fi
            nmax=$(jq -r '.spec.n_max' "$G/bdspec-$b.json")
            log "[$l t$T] $b: llama.cpp plain generation ($v)"
            "$O/bd-bench-llama" --backend-dir "$dir" -m "$tgt" -t "$T" -r 1 -p 0 -n "$N" --no-verify \
                --gen-prompt "$PROMPT" "${LL_KV[@]+"${LL_KV[@]}"}" >"$G/llplain-$b.json" 2>"$G/llplain-$b.log" ||
                log "bd-bench-llama --gen-prompt failed (see $G/llplain-$b.log)"
            for nm in 3 "$nmax"; do
                log "[$l t$T] $b: llama.cpp speculative-simple --spec-type draft-dflash --spec-draft-n-max $nm ($v)"
                # The working directory is the level's folder: ggml loads the one
                # variant there. --top-k 0 --top-p 1 --min-p 0: plain argmax
                # over the whole vocabulary. With the default top-k 40 at
                # temperature 0, an all-equal row of logits (the
                # --constant-output targets) is reordered by the top-k sort and
                # llama.cpp emits an arbitrary token instead of the lowest id,
                # so no draft of token 0 would ever be accepted.
                (cd "$dir" && LD_DEBUG=files LD_DEBUG_OUTPUT="$G/llspec-$b-n$nm.ld" "$SPEC" -m "$tgt" -md "$dft" --spec-type draft-dflash --spec-draft-n-max "$nm" \
                    -p "$PROMPT" -n "$N" --temp 0 --top-k 0 --top-p 1 --min-p 0 -t "$T" -tb "$T" -c $((N + 512)) \
                    "${LL_SPEC_KV[@]+"${LL_SPEC_KV[@]}"}") \
                    >"$G/llspec-$b-n$nm.log" 2>&1 || log "speculative-simple failed on $b n_max $nm (see $G/llspec-$b-n$nm.log)"
                check_loaded "$G/llspec-$b-n$nm.log" "$G/llspec-$b-n$nm.ld" "$v" >"$G/llspec-$b-n$nm.variant"
                [ "$nm" = 3 ] && [ "$nmax" = 3 ] && break
            done
        done <"$OUT/pairs.tsv"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"

# ---- tables --------------------------------------------------------------------
python3 tools/bench-table.py "$OUT" | tee "$OUT/table.md"
echo "bench-compare: load after: $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT" >&2
