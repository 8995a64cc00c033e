#!/usr/bin/env bash
# oracle_logits.sh - blockdraft's forward pass against llama.cpp v0.5.0
# (bd-oracle, built by tests/oracle/setup.sh from node-llama-cpp's prebuilt
# CPU libraries).
#
# Fixtures:
#   * stories260K (trained, F32): greedy ids of both engines must equal the
#     llama2.c reference in the fixture README; logits at every position.
#   * stories260K quantized by llama.cpp itself (bd-oracle quantize): F16,
#     BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q4_K_M recipe (the 64-wide
#     model falls back to 32-block types). Trained weights are not
#     chaotic, so these get tight tolerances.
#   * stories260K and ll-tiny-f32 with an f16 KV cache on both sides
#     (-ctk f16 -ctv f16 / --kv f16), ll-tiny-f32 with bf16 and each
#     quantized cache type of llama.cpp (q8_0, q4_0, q4_1, iq4_nl, q5_0,
#     q5_1), q4_0 with LLAMA_ATTN_ROT_DISABLE=1 on both sides, and the
#     bytes each type's cache stores; see those sections.
#   * synthetic models from `blockdraft make-model` (random weights, real
#     names/shapes/metadata): qwen3 tiny Q4_K_M (tied: Q4_K/Q6_K), mix
#     (untied: Q4_K/Q6_K/Q8_0/F16/BF16), Q8_0, F16 (untied); qwen3 odd-width
#     Q4_K_M (width fallbacks Q5_0/Q8_0); llama tiny F32 (untied), Q8_0,
#     Q4_K, Q5_K, IQ4_XS, Q2_K, Q3_K; llama tiny F32 with a rope_freqs.weight
#     (Llama 3.1+ scaled RoPE), with YaRN / linear RoPE scaling keys and with
#     q/k/v/output biases; qwen2 tiny F32, small Q8_0 and Q4_K_M; a synthetic llama F32 model quantized by
#     llama.cpp to its Q2_K, Q3_K_S and Q3_K_M mixes.
#
# Logit tolerance (tests/oracle/compare.py): at every prompt position, with
# R = oracle top-1 minus oracle top-20 logit (>= 1), every id in both top-20
# lists must agree within TOL*R (against llama.cpp's batched or its
# token-by-token path, see logits() below), the oracle's top-10 must be in blockdraft's
# top-20, and the top-1 ids must agree unless the oracle's top-2 gap is below
# 2*TOL*R (near-tie). TOL is 1e-4 for F32, 1e-3 for quantized stories,
# 2e-3 F16, 1e-2 BF16 (16-bit activation rounding), 1e-3 for the llama
# synthetic models, and wider for the qwen3 synthetic ones (each justified
# there with measured figures): random qwen3 stacks amplify last-bit
# differences through the int8 activation quantization (llama.cpp against
# itself, with and without its repacked kernels, differs by 2.5e-2 on
# llama-tiny-q4_1).
#
# What a wrong kernel does (measured at 6b72796, BLOCKDRAFT_ISA=ref with
# the scalar Q4_K dot broken on purpose, not committed; worst |diff|/R over
# the common top-20 ids, and violations at the tolerances below):
#   variant                          q3-tiny-q4_k_m   q3-tiny-mix     ll-tiny-q4_k
#   sub-block 7's min term dropped   top-20 disjoint  1.12, 133 viol  5.84, 30
#   scale/min swapped (sub-blocks 4-7) disjoint       0.82, 144       3.28, 147
#   one nibble of 256 misread        1.11, 140        0.82, 69        1.01, 238
#   sub-block 7 skipped              0.92, 144        0.88, 140       0.93, 218
#   bsums of the wrong sub-block     disjoint         0.33, 134       1.67, 188
# against 0.125 / 0.089-0.0995 / 1.1e-6 for the correct kernels (scalar and
# AVX-512 tables): every tolerance below is under the smallest wrong-kernel
# figure. Typical failure shape: logits
# equal to the last bit up to some position, then a jump that persists (a
# different int8 in one quantized activation row, whose K/V every later row
# reads) or that touches one row only (late layers or the output matmul).
# Print the per-position differences with the JSON files left in
# $BD_BUILD/oracle-fixtures/LABEL.{oracle-batch,oracle-ubatch1,bd}.json.
# Greedy: identical ids up to the first step whose oracle top-2 gap is below
# 0.02 (after a near-tie either continuation is correct).
set -u
: "${BD_BIN:?}" "${BD_BUILD:?}" "${BD_SHARED:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
CMP="python3 $ROOT/tests/oracle/compare.py"
ORACLE=$("$ROOT/tests/oracle/setup.sh") || { echo "FAIL: cannot build the llama.cpp oracle (tests/oracle/setup.sh)"; exit 1; }
FX="$BD_BUILD/oracle-fixtures"
mkdir -p "$FX"
QV="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
ST="$BD_SHARED/fixtures/stories260K/stories260K.gguf"
TH=1  # tiny models: one thread is fastest and immune to spin-waiting on a busy machine
fail=0
note() { echo "== $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# ---- helpers --------------------------------------------------------------
# make_model NAME ARGS...: cached synthetic fixture, rebuilt when a source
# that decides its bytes (generator, quantizers, writer) is newer
make_model() {
    local name=$1; shift
    local f="$FX/$name.gguf" stale=0 dep
    for dep in src/model/synth.c src/tensor/quant_ref.c src/gguf/gguf_write.c; do
        [ "$ROOT/$dep" -nt "$f" ] && stale=1
    done
    [ "$(cat "$FX/$name.args" 2>/dev/null)" = "$*" ] || stale=1
    if [ ! -f "$f" ] || [ $stale = 1 ]; then
        "$BD_BIN" make-model "$@" -t 2 -o "$f" >/dev/null 2>"$FX/$name.err" ||
            { bad "make-model $name: $(tail -1 "$FX/$name.err")"; return 1; }
        echo "$*" >"$FX/$name.args"
    fi
}
# logits LABEL MODEL IDS TOL
# llama.cpp has two legitimate code paths for a prompt: the whole prompt as
# one batch (matrix-matrix kernels, e.g. its tinyBLAS path for Q4_0/Q5_0/
# IQ4_NL) and token by token (--ubatch 1: ggml's vec_dot path). They can
# differ by more than rounding on these fixtures, so blockdraft passes when
# it matches either within the tolerance.
# KV_BD / KV_OR: extra flags of the two engines (the KV cache type section)
KV_BD="" KV_OR=""
logits() {
    local label=$1 m=$2 ids=$3 tol=$4 mode out rc ok=0
    "$BD_BIN" eval -m "$m" --ids "$ids" --top 20 --json -t "$TH" $KV_BD >"$FX/$label.bd.json" 2>"$FX/$label.bd.err" ||
        { bad "$label: blockdraft eval failed: $(tail -2 "$FX/$label.bd.err")"; return; }
    for mode in batch ubatch1; do
        local extra=""
        [ $mode = ubatch1 ] && extra="--ubatch 1"
        "$ORACLE" logits -m "$m" --ids "$ids" --top 20 -t "$TH" $extra $KV_OR >"$FX/$label.oracle-$mode.json" \
            2>"$FX/$label.oracle.err" ||
            { bad "$label: bd-oracle logits failed: $(tail -2 "$FX/$label.oracle.err")"; return; }
        out=$($CMP logits "$FX/$label.oracle-$mode.json" "$FX/$label.bd.json" --tol "$tol" --label "$label/$mode")
        rc=$?
        if [ $rc -eq 0 ]; then echo "$out" | tail -1; ok=1; break; fi
        echo "$out" | tail -3
    done
    [ $ok -eq 1 ] || bad "$label: logits differ beyond tolerance from both llama.cpp paths"
}
# greedy LABEL MODEL PROMPT N
greedy() {
    local label=$1 m=$2 prompt=$3 n=$4
    "$ORACLE" greedy -m "$m" -p "$prompt" -n "$n" -t "$TH" >"$FX/$label.oracle.json" 2>"$FX/$label.oracle.err" ||
        { bad "$label: bd-oracle greedy failed: $(tail -2 "$FX/$label.oracle.err")"; return; }
    "$BD_BIN" run -m "$m" -p "$prompt" -n "$n" --temp 0 --ignore-eos --json -t "$TH" \
        >"$FX/$label.bd.json" 2>"$FX/$label.bd.err" ||
        { bad "$label: blockdraft run failed: $(tail -2 "$FX/$label.bd.err")"; return; }
    $CMP greedy "$FX/$label.oracle.json" "$FX/$label.bd.json" --label "$label" ||
        bad "$label: greedy sequences differ before the first near-tie"
}

# ---- stories260K: llama2.c reference ids ------------------------------------
note "stories260K (F32, trained)"
ref=$(python3 -c '
import re, sys
t = open(sys.argv[1]).read().split("Token ids", 1)[1]
print(" ".join(t.split("```")[1].split()))' "$BD_SHARED/fixtures/stories260K/README.md")
nref=$(echo $ref | wc -w)
[ "$nref" -eq 201 ] || bad "could not read the 201 reference ids from the stories README (got $nref)"
gen_ref=$(echo $ref | cut -d' ' -f6- | tr ' ' ',')
"$ORACLE" greedy -m "$ST" --ids 1,403,407,261,378 -n 196 >"$FX/st-ref.oracle.json" ||
    bad "bd-oracle greedy on stories260K failed"
python3 -c "import json,sys; g=json.load(open(sys.argv[1]))['ids']; r=[int(x) for x in sys.argv[2].split(',')]; sys.exit(0 if g==r else 1)" \
    "$FX/st-ref.oracle.json" "$gen_ref" && echo "oracle reproduces the llama2.c greedy ids (196 tokens)" ||
    bad "oracle greedy ids differ from the llama2.c reference"
"$BD_BIN" run -m "$ST" -p "Once upon a time" -n 196 --temp 0 --ignore-eos --json -t "$TH" \
    >"$FX/st-ref.bd.json" 2>"$FX/st-ref.bd.err" || bad "blockdraft run on stories260K failed"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); g=d.get('generated_ids', d.get('ids')); r=[int(x) for x in sys.argv[2].split(',')]; sys.exit(0 if g==r else 1)" \
    "$FX/st-ref.bd.json" "$gen_ref" && echo "blockdraft reproduces the llama2.c greedy ids (196 tokens)" ||
    bad "blockdraft greedy ids differ from the llama2.c reference"
ST_IDS=$(echo $ref | cut -d' ' -f1-40 | tr ' ' ',')
logits st-f32 "$ST" "$ST_IDS" 1e-4

# ---- f16 KV cache: -ctk f16 -ctv f16 against llama.cpp's f16 cache ----------
# Both engines round K and V to f16 in the cache. llama.cpp also rounds
# each query (and, without flash attention, each softmax row) to f16 for
# its f16 matrix products; blockdraft keeps them f32 and widens the cached
# values exactly. Measured: 1.0e-3 of the range on stories (40 positions)
# and 2.1e-3 on ll-tiny-f32; tolerances 3e-3 and 5e-3. The f16 cache must
# also move the logits off the f32 cache's (else the flag did nothing),
# and on stories it is nearer llama.cpp's f16 run than our f32 run is
# (measured 1.0e-3 against 2.2e-3).
note "f16 KV cache"
KV_BD="-ctk f16 -ctv f16" KV_OR="--kv f16"
logits st-kv16 "$ST" "$ST_IDS" 3e-3
"$BD_BIN" run -m "$ST" -p "Once upon a time" -n 196 --temp 0 --ignore-eos --json -t "$TH" $KV_BD \
    >"$FX/st-kv16-ref.bd.json" 2>"$FX/st-kv16-ref.bd.err" || bad "blockdraft run -ctk f16 on stories260K failed"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); g=d.get('generated_ids', d.get('ids')); r=[int(x) for x in sys.argv[2].split(',')]; sys.exit(0 if g==r else 1)" \
    "$FX/st-kv16-ref.bd.json" "$gen_ref" && echo "blockdraft with an f16 cache reproduces the llama2.c greedy ids (196 tokens)" ||
    bad "blockdraft greedy ids with an f16 KV cache differ from the llama2.c reference"
KV_BD="" KV_OR=""
python3 - "$FX/st-kv16.bd.json" "$FX/st-f32.bd.json" "$FX/st-kv16.oracle-batch.json" <<'PY' || bad "f16 KV cache: logits not distinct from the f32 cache's, or not nearer llama.cpp's f16 run"
import json, sys
def rows(p):
    d = json.load(open(p))
    return [{int(i): float(v) for i, v in r["top"]} for r in d["positions"]]
a16, a32, o16 = (rows(p) for p in sys.argv[1:4])
def worst(x, y):
    w = 0.0
    for rx, ry in zip(x, y):
        rng = max(rx.values()) - min(rx.values())
        for i in set(rx) & set(ry):
            w = max(w, abs(rx[i] - ry[i]) / max(rng, 1.0))
    return w
d_self, d16, d32 = worst(a16, a32), worst(o16, a16), worst(o16, a32)
print(f"f16 cache vs f32 cache {d_self:.3g}; llama.cpp f16 vs ours f16 {d16:.3g}, vs ours f32 {d32:.3g}")
sys.exit(0 if d_self > 0 and d16 < d32 else 1)
PY

# ---- stories260K quantized by llama.cpp ----------------------------------
note "stories260K quantized by llama.cpp"
# Q4_1 and Q5_0 get 3e-3 and 3e-2: every dot product is bit-identical to
# llama.cpp's (tests/unit/test_quant.c pins them), but on these two files a
# value that differs in its last bit in a non-dot op (SiLU and softmax use
# our own exps here, ggml its SIMD one) sits exactly on an f16 rounding
# midpoint - the input of the F16 ffn_down (172 wide, so not quantized) at
# position 0 layer 2 for Q4_1, a Q8_0 block scale at position 25 layer 2
# for Q5_0 - and the engines round it to neighbouring values. Measured
# after that: 1.9e-3 and 2.2e-2 of the logit range. A wrong kernel gives
# 1e-1 or more.
for spec in f16:1:2e-3 bf16:32:1e-2 q4_0:2:1e-3 q4_1:3:3e-3 q5_0:8:3e-2 q5_1:9:1e-3 q8_0:7:1e-3 \
            iq4_nl:25:1e-3 q4_k_m:15:1e-3; do
    IFS=: read -r q ft tol <<<"$spec"
    f="$FX/st-$q.gguf"
    if [ ! -f "$f" ]; then
        "$ORACLE" quantize -m "$ST" -o "$f" --ftype "$ft" -t "$TH" >/dev/null 2>"$FX/st-$q.qerr" ||
            { bad "llama.cpp quantize $q failed"; continue; }
    fi
    logits "st-$q" "$f" "$ST_IDS" "$tol"
done
greedy st-q8_0-greedy "$FX/st-q8_0.gguf" "Lily and her mom went to the park" 48

# kv_mean LABEL OURS THEIRS OTHER OTHER_NAME MIN: mean |diff|/range over the
# shared top-20 ids of each position (range: that position's spread in
# ours) from THEIRS (llama.cpp's run) and from OTHER (another run of ours);
# passes if the first is within 0.05 and the second above MIN.
kv_mean() {
    python3 - "$@" <<'PY'
import json, sys
def rows(p):
    return [{int(i): float(v) for i, v in r["top"]} for r in json.load(open(p))["positions"]]
def mean(x, y):
    s = n = 0
    for rx, ry in zip(x, y):
        rng = max(max(rx.values()) - min(rx.values()), 1.0)
        for i in set(rx) & set(ry):
            s, n = s + abs(rx[i] - ry[i]) / rng, n + 1
    return s / n
label, ours, theirs_p, other_p, other_name, lo = sys.argv[1:7]
bq, oq, other = rows(ours), rows(theirs_p), rows(other_p)
theirs, off = mean(oq, bq), mean(other, bq)
print(f"{label}: mean |diff|/range from llama.cpp's run {theirs:.3g}, from our {other_name} {off:.3g}")
sys.exit(0 if theirs <= 0.05 and off > float(lo) else 1)
PY
}

# kv_quant MODEL TYPE: K and V caches of a block type (q8_0, q4_0, q4_1,
# iq4_nl, q5_0, q5_1; heads of 64 here, stories260K's of 8 cannot hold
# blocks of 32) against llama.cpp's caches of that type (--kv TYPE --fa: a
# quantized V needs flash attention). Both keep a quantized cache in the
# rotated basis (attention.h: Walsh-Hadamard chunks of 64 on this head
# size) and store the same bytes (the byte check below); llama.cpp also
# quantizes each query to q8_0 for its integer dots where blockdraft dots
# f32 queries with the widened keys, and this random-weight model
# amplifies that noise: measured mean |diff|/range from llama.cpp's run of
# the same type 0.011 (q8_0), 0.025 (q4_0, q4_1), 0.021 (iq4_nl), 0.018
# (q5_0), 0.019 (q5_1), worst position 0.09-0.24; each cache's own
# distance from the f32 logits is 0.012 (q8_0) to 0.165 (q4_0). Without the
# rotation, or with another iq4_nl quantizer (a searched scale), the mean
# distance from llama.cpp's run of the 4- and 5-bit types was 0.106-0.223.
# So: a mean within 0.05 of llama.cpp's run of the type, every position
# within 0.3 (a wrong block layout leaves the top-20 lists apart), off our
# own f32 run (else nothing was quantized), and the cache holds the type's
# bytes per block of 32 (run --json kv_bytes).
kv_quant() {
    local m=$1 t=$2 bpb
    case $t in q8_0) bpb=34 ;; q4_0|iq4_nl) bpb=18 ;; q4_1) bpb=20 ;; q5_0) bpb=22 ;; q5_1) bpb=24 ;; esac
    KV_BD="-ctk $t -ctv $t" KV_OR="--kv $t --fa"
    logits "ll-tiny-kv-$t" "$m" "$L_IDS" 3e-1
    KV_BD="" KV_OR=""
    "$BD_BIN" eval -m "$m" --ids "$L_IDS" --top 20 --json -t "$TH" >"$FX/ll-tiny-kv-f32.bd.json" 2>/dev/null ||
        { bad "$t KV cache: the f32 run failed"; return; }
    kv_mean "$t cache" "$FX/ll-tiny-kv-$t.bd.json" "$FX/ll-tiny-kv-$t.oracle-batch.json" \
        "$FX/ll-tiny-kv-f32.bd.json" "f32 run" 0 || bad "$t KV cache: see above"
    "$BD_BIN" run -m "$m" -p "Once" -n 1 --json -t "$TH" -c 256 >"$FX/kv-f32.run.json" 2>/dev/null &&
        "$BD_BIN" run -m "$m" -p "Once" -n 1 --json -t "$TH" -c 256 -ctk $t -ctv $t >"$FX/kv-$t.run.json" 2>/dev/null &&
        python3 -c "import json,sys; a,b=(json.load(open(p))['stats']['kv_bytes'] for p in sys.argv[1:3]); sys.exit(0 if b * 128 == a * int(sys.argv[3]) else 1)" \
            "$FX/kv-f32.run.json" "$FX/kv-$t.run.json" $bpb && echo "$t cache: $bpb bytes a block of 32 values" ||
        bad "$t KV cache: not $bpb/128 of the f32 cache's bytes"
}

# kv_rot_off: llama.cpp's switch LLAMA_ATTN_ROT_DISABLE=1 turns the
# rotation off in both engines (attention.h): our q4_0 run without it
# within 0.05 (mean |diff|/range) of llama.cpp's run without it, and off
# our own rotated run by more than that (so the variable acted here; off
# there too, else the first check fails as the unrotated distances above
# did).
kv_rot_off() {
    local m=$1
    KV_BD="-ctk q4_0 -ctv q4_0" KV_OR="--kv q4_0 --fa"
    LLAMA_ATTN_ROT_DISABLE=1 logits "ll-tiny-kv-q4_0-norot" "$m" "$L_IDS" 3e-1
    KV_BD="" KV_OR=""
    kv_mean "q4_0 cache with LLAMA_ATTN_ROT_DISABLE=1" "$FX/ll-tiny-kv-q4_0-norot.bd.json" \
        "$FX/ll-tiny-kv-q4_0-norot.oracle-batch.json" "$FX/ll-tiny-kv-q4_0.bd.json" "rotated run" 0.05 ||
        bad "LLAMA_ATTN_ROT_DISABLE=1: see above"
}

# kv_rows: the bytes a cache of each type stores for the same rows of 128
# floats, blockdraft's (bd-kv-row: bd_attn_kv_store, the forward's store)
# against llama.cpp's row quantizers (bd-oracle kvrow), byte for byte:
# random rows at scales 1e-3 to 1e3, rows with one outlier, an all-zero
# row, and rows made of halves (x / d = k + 0.5 with d = 1: the rounding
# rule decides each code; ggml rounds them up, not to even) for f16, bf16,
# q4_0, q4_1, iq4_nl, q5_0 and q5_1. (q8_0 is stored through the SIMD
# quantizer of llama.cpp's x86 backend, 127 / amax and ties to even, which
# its reference does not reproduce; the logits check above covers it.)
kv_rows() {
    python3 - "$FX/kv-rows.f32" <<'PY'
import random, struct, sys
random.seed(7)
rows = []
for r in range(48):
    s = 10 ** random.uniform(-3, 3)
    row = [random.gauss(0, s) for _ in range(128)]
    if r % 4 == 1:
        row[random.randrange(128)] = 40 * s
    rows.append(row)
for lo, hi in ((-8, 8), (-16, 16), (0, 15), (0, 31)):
    for r in range(4):
        row = []
        for b in range(4):  # every block of 32: its extremes, then halves between them
            blk = [float(lo), float(hi)] + [random.randrange(lo, hi) + 0.5 for _ in range(30)]
            random.shuffle(blk)
            row += blk
        rows.append(row)
rows.append([0.0] * 128)  # last: see below
with open(sys.argv[1], "wb") as f:
    for row in rows:
        f.write(struct.pack("<128f", *row))
PY
    local t
    for t in f16 bf16 q4_0 q4_1 iq4_nl q5_0 q5_1; do
        "$BD_BUILD/tests/bd-kv-row" $t 128 "$FX/kv-rows.f32" "$FX/kv-rows.$t.bd" &&
            "$ORACLE" kvrow --kv $t --hd 128 -i "$FX/kv-rows.f32" -o "$FX/kv-rows.$t.oracle" >/dev/null ||
            { bad "$t cache rows: a tool failed"; continue; }
        # an all-zero iq4_nl block: ggml writes d = 0 with the codes its
        # previous block left in its buffer, blockdraft codes 0 (the
        # values are 0 either way), so the last row is left out there
        local n=$(stat -c %s "$FX/kv-rows.$t.bd")
        [ $t = iq4_nl ] && n=$((n - 4 * 18))
        if [ "$n" -gt 0 ] && cmp -s -n $n "$FX/kv-rows.$t.bd" "$FX/kv-rows.$t.oracle"; then
            echo "$t cache rows: the bytes of llama.cpp's row quantizer ($n bytes)"
        else
            bad "$t cache rows differ from llama.cpp's ($(cmp -n $n "$FX/kv-rows.$t.bd" "$FX/kv-rows.$t.oracle" | head -1))"
        fi
    done
}

# ---- synthetic models ---------------------------------------------------------
note "synthetic models (make-model)"
Q_IDS=9707,1879,11,419,374,264,1273,13,576,3974,4226,279,11079,5887,1667,198
L_IDS=1,403,407,261,378,432,383,286,261,376,298,315,421,395,317,426,338,401,396,267
# The two qwen3 tiny models with Q4_K layers get 0.2: blockdraft's Q4_K
# dot keeps its own f32 order (dot_ref.c's tile order, shared with the AMX
# matmul so that speculative verify batches can use the tiles), within
# 5e-9 of the subtracted terms' size of llama.cpp's dot (test_quant.c pins
# it); through these random-weight qwen3 stacks such last-bit differences
# grow to 0.125 (q3-tiny-q4_k_m) and 0.089 (scalar) to 0.0995 (AVX-512)
# (q3-tiny-mix) of the logit range by the last positions (measured;
# llama.cpp's own two paths differ by 0.038 on q3-tiny-mix), while the
# five wrong Q4_K kernels of the table above give 0.33 or more there, with
# 69-157 violations at 0.2. q3-tiny-q8_0 and q3-odd-q4_k_m (Q5_0/Q8_0)
# keep 5e-2: they match to the last bit on the scalar and AVX-512 tables
# (measured 0), but the AMX Q8_0 tiles (prompt batches on AMX CPUs, not
# measurable here) may round differently and qwen3 stacks amplify that
# as above. q3-tiny-f16: measured 3.3e-3-3.5e-3, tolerance 2e-2. The
# llama-architecture models get 1e-3: measured 0 (Q8_0), 1.1e-6 (Q4_K),
# 1.3e-6 (Q5_K), 1.25e-6 (IQ4_XS), 3e-6 to 7e-6 (F32: 1e-4). Exact
# agreement of our Q4_K kernels with each other and with the scalar
# reference is tested bit for bit in tests/unit/test_kernels.c.
make_model q3-tiny-q4_k_m --arch qwen3 --shape tiny --quant q4_k_m --seed 11 --tied --vocab "$QV" &&
    logits q3-tiny-q4_k_m "$FX/q3-tiny-q4_k_m.gguf" "$Q_IDS" 2e-1
make_model q3-tiny-mix --arch qwen3 --shape tiny --quant mix --seed 12 --untied --vocab "$QV" &&
    logits q3-tiny-mix "$FX/q3-tiny-mix.gguf" "$Q_IDS" 2e-1
make_model q3-tiny-q8_0 --arch qwen3 --shape tiny --quant q8_0 --seed 13 --vocab "$QV" &&
    { logits q3-tiny-q8_0 "$FX/q3-tiny-q8_0.gguf" "$Q_IDS" 5e-2;
      greedy q3-tiny-q8_0-greedy "$FX/q3-tiny-q8_0.gguf" "Hello world, this is a test" 24; }
make_model q3-tiny-f16 --arch qwen3 --shape tiny --quant f16 --seed 14 --untied --vocab "$QV" &&
    { logits q3-tiny-f16 "$FX/q3-tiny-f16.gguf" "$Q_IDS" 2e-2;
      greedy q3-tiny-f16-greedy "$FX/q3-tiny-f16.gguf" "Hello world, this is a test" 24; }
make_model q3-odd-q4_k_m --arch qwen3 --shape odd --quant q4_k_m --seed 16 --vocab "$QV" &&
    logits q3-odd-q4_k_m "$FX/q3-odd-q4_k_m.gguf" "$Q_IDS" 5e-2
make_model ll-tiny-f32 --arch llama --shape tiny --quant f32 --seed 21 --untied --vocab "$ST" &&
    { logits ll-tiny-f32 "$FX/ll-tiny-f32.gguf" "$L_IDS" 1e-4;
      KV_BD="-ctk f16 -ctv f16" KV_OR="--kv f16"
      logits ll-tiny-kv16 "$FX/ll-tiny-f32.gguf" "$L_IDS" 5e-3
      KV_BD="" KV_OR=""
      # bf16 cache: 8 bits of mantissa in K and V, and llama.cpp rounds
      # each query to bf16 as well (its bf16 dot); measured worst 0.037 of
      # the range, mean 0.003
      KV_BD="-ctk bf16 -ctv bf16" KV_OR="--kv bf16 --fa"
      logits ll-tiny-kvbf16 "$FX/ll-tiny-f32.gguf" "$L_IDS" 1e-1
      KV_BD="" KV_OR=""
      for kvt in q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1; do kv_quant "$FX/ll-tiny-f32.gguf" $kvt; done
      kv_rot_off "$FX/ll-tiny-f32.gguf"
      kv_rows
      greedy ll-tiny-f32-greedy "$FX/ll-tiny-f32.gguf" "Once upon a time" 48; }

# Llama 3.1+ scaled RoPE: ll-tiny-f32 with a rope_freqs.weight tensor added
# (bd-gguf-edit --add-f32s), its factors from convert_hf_to_gguf's llama3
# rule (factor 8, low 1, high 4) with an original context of 64 instead of
# 8192, so that 28 of the 32 pairs are scaled (4 by 1.3-7.7, 24 by 8) at
# these short positions. Same tolerance as without the tensor (F32, 1e-4):
# measured 4.7e-6; with the factors ignored (bd_rope's division dropped, not
# committed) 0.96 of the range and 300 violations. The greedy prompt is one
# without an early near-tie on this file (48 tokens compared).
note "llama with rope_freqs.weight (Llama 3.1+ scaled RoPE)"
RF=$(python3 -c '
import math
base, n, factor, lo, hi, old = 10000.0, 64, 8.0, 1.0, 4.0, 64.0
out = []
for i in range(n // 2):
    wl = 2 * math.pi / base ** (-2 * i / n)
    if wl < old / hi: out.append(1.0)
    elif wl > old / lo: out.append(factor)
    else:
        s = (old / wl - lo) / (hi - lo)
        out.append(1 / ((1 - s) / factor + s))
print(",".join("%.9g" % v for v in out))')
if [ -f "$FX/ll-tiny-f32.gguf" ] &&
    "$BD_BUILD/tests/bd-gguf-edit" "$FX/ll-tiny-f32.gguf" "$FX/ll-tiny-f32-rf.gguf" --add-f32s rope_freqs.weight "$RF"; then
    logits ll-tiny-f32-rf "$FX/ll-tiny-f32-rf.gguf" "$L_IDS" 1e-4
    greedy ll-tiny-f32-rf-greedy "$FX/ll-tiny-f32-rf.gguf" "Tom had a big red ball" 48
else
    bad "cannot add rope_freqs.weight to ll-tiny-f32"
fi

# RoPE scaling keys (rope.scaling.type / factor / attn_factor /
# original_context_length, as llama.cpp v0.5.0 reads them) on the same
# model: YaRN x4 ramping over pairs 10-23 (original context 4096), linear
# x2.5, and YaRN x8 with attn_factor 1.25 and the ramp from context_length.
# Measured 2.5e-6 to 3.9e-6 of the range; with the scaling ignored 0.46-1.67
# and 257-329 violations, with YaRN's 1 + 0.1 ln(factor) magnitude dropped
# (not committed) 0.44 and 327.
note "RoPE scaling: yarn, linear"
for spec in "yarn4:--set-str llama.rope.scaling.type yarn --set-f32 llama.rope.scaling.factor 4 --set-u32 llama.rope.scaling.original_context_length 4096" \
            "linear:--set-str llama.rope.scaling.type linear --set-f32 llama.rope.scaling.factor 2.5" \
            "yarn8:--set-str llama.rope.scaling.type yarn --set-f32 llama.rope.scaling.factor 8 --set-f32 llama.rope.scaling.attn_factor 1.25"; do
    name=${spec%%:*}
    # shellcheck disable=SC2086
    if [ -f "$FX/ll-tiny-f32.gguf" ] &&
        "$BD_BUILD/tests/bd-gguf-edit" "$FX/ll-tiny-f32.gguf" "$FX/ll-tiny-f32-$name.gguf" ${spec#*:}; then
        logits "ll-tiny-f32-$name" "$FX/ll-tiny-f32-$name.gguf" "$L_IDS" 1e-4
    else
        bad "cannot write the $name variant of ll-tiny-f32"
    fi
done
greedy ll-tiny-f32-yarn4-greedy "$FX/ll-tiny-f32-yarn4.gguf" "Tom had a big red ball" 48
# The same from the command line: llama.cpp's context flags on the unscaled
# file, against llama.cpp given the same context parameters (bd-oracle
# --rope-*), at 1e-4: YaRN (--rope-scale 4, the factor; the oracle takes
# its inverse, --rope-freq-scale 0.25), whose logits must also be
# blockdraft's own of the file carrying those keys (ll-tiny-f32-yarn4) bit
# for bit, and a linear scale with another base.
rope_flags() {
    local label=$1 bd_args=$2 or_args=$3
    # shellcheck disable=SC2086
    "$BD_BIN" eval -m "$FX/ll-tiny-f32.gguf" --ids "$L_IDS" --top 20 --json -t "$TH" $bd_args \
        >"$FX/$label.bd.json" 2>"$FX/$label.bd.err" || { bad "$label: blockdraft eval failed"; return; }
    # shellcheck disable=SC2086
    "$ORACLE" logits -m "$FX/ll-tiny-f32.gguf" --ids "$L_IDS" --top 20 -t "$TH" $or_args \
        >"$FX/$label.oracle.json" 2>"$FX/$label.oracle.err" || { bad "$label: bd-oracle logits failed"; return; }
    $CMP logits "$FX/$label.oracle.json" "$FX/$label.bd.json" --tol 1e-4 --label "$label" ||
        bad "$label: logits differ beyond tolerance from llama.cpp's with the same flags"
}
rope_flags ll-flags-yarn4 "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 4096" \
    "--rope-scaling yarn --rope-freq-scale 0.25 --yarn-orig-ctx 4096"
cmp -s "$FX/ll-flags-yarn4.bd.json" "$FX/ll-tiny-f32-yarn4.bd.json" && echo "ll-flags-yarn4: the same bits as the file's keys" ||
    bad "ll-flags-yarn4: the flags and the file's keys give different logits"
rope_flags ll-flags-linear "--rope-freq-scale 0.4 --rope-freq-base 20000" "--rope-freq-scale 0.4 --rope-freq-base 20000"

# Attention biases. qwen2 (make-model --arch qwen2: q/k/v biases, no q/k
# norms, Qwen's RoPE base) F32 at 1e-4 (measured 3.1e-6; with the biases
# dropped 1.44 of the range and 263 violations); Q8_0 at 5e-2 and Q4_K_M at
# 2e-1 for the reasons given for the qwen3 files above (measured 0 and
# 0.084). ll-tiny-f32 with q/k/v and output-projection biases added
# (bd-gguf-edit; llama.cpp reads all four for llama), F32 at 1e-4.
note "attention biases: qwen2, llama"
make_model q2-tiny-f32 --arch qwen2 --shape tiny --quant f32 --seed 31 --vocab "$ST" &&
    { logits q2-tiny-f32 "$FX/q2-tiny-f32.gguf" "$L_IDS" 1e-4;
      greedy q2-tiny-f32-greedy "$FX/q2-tiny-f32.gguf" "Once upon a time" 48; }
make_model q2-small-q8_0 --arch qwen2 --shape small --quant q8_0 --seed 32 --vocab "$ST" &&
    logits q2-small-q8_0 "$FX/q2-small-q8_0.gguf" "$L_IDS" 5e-2
make_model q2-small-q4_k_m --arch qwen2 --shape small --quant q4_k_m --seed 32 --vocab "$ST" &&
    logits q2-small-q4_k_m "$FX/q2-small-q4_k_m.gguf" "$L_IDS" 2e-1
BIAS_EDITS=$(python3 -c '
import random
r = random.Random(7)
v = lambda n, s: ",".join("%.6f" % r.gauss(0, s) for _ in range(n))
for l in range(4):
    for name, n, s in (("attn_q", 256, 0.5), ("attn_k", 128, 1.0), ("attn_v", 128, 0.1), ("attn_output", 256, 0.1)):
        print("--add-f32s blk.%d.%s.bias %s" % (l, name, v(n, s)))')
# shellcheck disable=SC2086
if [ -f "$FX/ll-tiny-f32.gguf" ] && "$BD_BUILD/tests/bd-gguf-edit" "$FX/ll-tiny-f32.gguf" "$FX/ll-tiny-f32-bias.gguf" $BIAS_EDITS; then
    logits ll-tiny-f32-bias "$FX/ll-tiny-f32-bias.gguf" "$L_IDS" 1e-4
else
    bad "cannot add biases to ll-tiny-f32"
fi
# Q5_K uses seed 23: with seed 22 one element of the layer-0 attention
# output at position 2 lands on an int8 rounding tie (llama.cpp 61.49998, us
# 61.500008 after a last-bit difference in attention), and the engines then
# round it to 61 and 62; every Q5_K dot is bit-identical to llama.cpp's
# (tests/unit/test_quant.c pins them), and seeds 23 and 24 agree to 2e-6.
for q in q8_0:22 q4_k:22 q5_k:23 iq4_xs:22; do
    seed=${q#*:}; q=${q%:*}
    make_model "ll-tiny-$q" --arch llama --shape tiny --quant "$q" --seed $seed --vocab "$ST" &&
        logits "ll-tiny-$q" "$FX/ll-tiny-$q.gguf" "$L_IDS" 1e-3
done
greedy ll-tiny-q8_0-greedy "$FX/ll-tiny-q8_0.gguf" "Once upon a time" 48

# ---- K-quants below 4 bits ----------------------------------------------------
note "Q2_K / Q3_K (llama.cpp's quantizer and ours)"
# Q2_K and Q3_K dots are bit-identical to llama.cpp's (tests/unit/
# test_quant.c pins them); files quantized by llama.cpp from a synthetic F32
# llama model (its Q2_K mix: Q2_K / Q3_K / Q6_K, Q3_K_S, Q3_K_M: Q3_K / Q4_K /
# Q5_K / Q6_K) and by our own quantizer, measured 7e-7 to 1.1e-6 of the
# range, tolerance 1e-3. Seeds: from seeds 21-25 of the F32 model, some
# llama.cpp-quantized files of every K type (Q4_K_S, Q5_K_M and Q6_K
# included, 5 of 12 such files; Q2_K / Q3_K_M 5 of 8) agree to 1e-6 up to
# one position and then differ by 1-9 % of the range from there on: one
# last-bit difference in a non-matmul op (attention, softmax) that lands an
# activation on an int8 rounding step, as for the Q5_K seed above. Seed 24
# has none for these mixes, nor seed 22 for our Q2_K / Q3_K files.
make_model ll-tiny-f32-s24 --arch llama --shape tiny --quant f32 --seed 24 --untied --vocab "$ST" &&
    for spec in q2_k:10 q3_k_s:11 q3_k_m:12; do
        IFS=: read -r q ft <<<"$spec"
        f="$FX/ll-tiny-$q.llama.gguf"
        if [ ! -f "$f" ] || [ "$FX/ll-tiny-f32-s24.gguf" -nt "$f" ]; then
            "$ORACLE" quantize -m "$FX/ll-tiny-f32-s24.gguf" -o "$f" --ftype "$ft" -t "$TH" >/dev/null \
                2>"$FX/ll-tiny-$q.qerr" || { bad "llama.cpp quantize $q failed"; continue; }
        fi
        logits "ll-tiny-$q.llama" "$f" "$L_IDS" 1e-3
    done
greedy ll-tiny-q2_k-greedy "$FX/ll-tiny-q2_k.llama.gguf" "Once upon a time" 48
greedy ll-tiny-q3_k_s-greedy "$FX/ll-tiny-q3_k_s.llama.gguf" "Lily and her mom went to the park" 48
for q in q2_k q3_k; do
    make_model "ll-tiny-$q" --arch llama --shape tiny --quant "$q" --seed 22 --vocab "$ST" &&
        logits "ll-tiny-$q" "$FX/ll-tiny-$q.gguf" "$L_IDS" 1e-3
done

if [ $fail -ne 0 ]; then echo "oracle_logits: FAILED"; exit 1; fi
echo "oracle_logits: all comparisons within tolerance"
