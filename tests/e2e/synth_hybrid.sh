#!/usr/bin/env bash
# synth_hybrid.sh - `blockdraft make-model --arch qwen35|qwen35moe` files and
# their DFlash drafters, checked with llama.cpp v0.5.0 (bd-oracle and
# bd-oracle-dflash, tests/oracle/setup.sh). blockdraft does not run these
# archs yet, so nothing here depends on `blockdraft run/eval`; only
# `blockdraft make-model` and `blockdraft inspect` are used.
#
# 1. Quantization mix, independent check: an F32 file quantized by llama.cpp's
#    own quantizer (llama_model_quantize, ftype 15 = Q4_K_M) must give, tensor
#    for tensor, the same names, shapes, types and order as make-model's
#    `--quant q4_k_m` file of the same options. Variants: qwen35 tiny (tied,
#    n_v/n_k 2), qwen35 small (untied, n_v/n_k 3, V width 384: width
#    fallbacks, explicit recurrent_layers, one MTP block), qwen35moe tiny (16
#    experts, fused gate/up, untied), qwen35moe small (8 experts: llama.cpp's
#    8-expert rules, one MTP block); and the attention-only qwen3moe tiny and
#    small (16 and 8 experts) with the same recipe code.
# 2. llama.cpp loads and runs the files (several mixes, interval schedule and
#    an explicit recurrent_layers pattern, MTP blocks, fused experts, a Qwen3
#    vocabulary padded to Qwen3.5's 248320 tokens). Over an 80-token prompt
#    (longer than 64, so the GDN state carries across llama.cpp's chunk size):
#    every logit finite; per position the logits' standard deviation within
#    [1, 20] (not degenerate, not exploding); the top-1 id differs from the
#    input token at >= 80 % of positions (a random tied model whose residual
#    stream were dominated by the token embedding would repeat its input);
#    >= 50 % distinct top-1 ids; greedy decoding of 40 tokens gives >= 20
#    distinct ids; changing the first prompt token still moves the logits at
#    position 79 by more than 0.05 (information from 79 tokens back reaches
#    the output). Bounds fixed before looking at the numbers of these seeds;
#    the files give std ~4, >= 90 % distinct top-1, >= 35 distinct greedy ids.
# 3. Drafters in llama.cpp's draft-dflash loop: a random drafter for a qwen35
#    target runs; constructed drafters (--accept 3; --accept 2 with
#    sliding-window layers W = 8, pattern 1,1,1,1,0, for a qwen35moe target
#    with an MTP block) against --constant-output targets draft token 0 for
#    exactly k rows and llama.cpp accepts exactly k at every step.
set -u
: "${BD_BIN:?}" "${BD_BUILD:?}" "${BD_SHARED:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
ORACLE=$("$ROOT/tests/oracle/setup.sh") || { echo "FAIL: cannot build the llama.cpp oracle (tests/oracle/setup.sh)"; exit 1; }
ODF="$(dirname "$ORACLE")/bd-oracle-dflash"
[ -x "$ODF" ] || { echo "FAIL: $ODF was not built"; exit 1; }
ST="$BD_SHARED/fixtures/stories260K/stories260K.gguf"   # 512-token vocabulary: full logit rows are cheap
QV="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
W="$BD_BUILD/synth-hybrid"
mkdir -p "$W"
fail=0
note() { echo "== $*"; }
bad() { echo "FAIL: $*"; fail=1; }
# mm FILE ARGS...: make-model with two threads (the files are pure functions of
# the options, rebuilt every run so a stale file cannot hide a change)
mm() {
    local f=$1; shift
    local th=(-t 2)
    [ "$1 $2" = "--arch dflash" ] && th=()  # the drafter generator is single-threaded
    "$BD_BIN" make-model "$@" "${th[@]}" -o "$f" >/dev/null 2>"$f.err" || { bad "make-model $*: $(tail -1 "$f.err")"; return 1; }
}

# ---- 1. Q4_K_M types against llama.cpp's quantizer ------------------------
qcmp() {
    local name=$1; shift
    mm "$W/$name-f32.gguf" "$@" --quant f32 --vocab "$ST" || return
    mm "$W/$name-q4km.gguf" "$@" --quant q4_k_m --vocab "$ST" || return
    "$ORACLE" quantize -m "$W/$name-f32.gguf" -o "$W/$name-llama-q4km.gguf" --ftype 15 >/dev/null 2>"$W/$name.qerr" ||
        { bad "$name: llama.cpp quantize failed: $(tail -2 "$W/$name.qerr")"; return; }
    "$BD_BIN" inspect --json "$W/$name-llama-q4km.gguf" >"$W/$name-llama.json" &&
        "$BD_BIN" inspect --json "$W/$name-q4km.gguf" >"$W/$name-bd.json" ||
        { bad "$name: blockdraft inspect failed"; return; }
    python3 - "$name" "$W/$name-llama.json" "$W/$name-bd.json" <<'PY' || fail=1
import json, sys
name, a, b = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
ta = [(t["name"], t["type"], t["ne"]) for t in a["tensors"]]
tb = [(t["name"], t["type"], t["ne"]) for t in b["tensors"]]
da, db = {t[0]: t for t in ta}, {t[0]: t for t in tb}
bad = [f"{n}: llama.cpp {da.get(n)} vs make-model {db.get(n)}" for n in sorted(set(da) | set(db)) if da.get(n) != db.get(n)]
if not bad and [t[0] for t in ta] != [t[0] for t in tb]:
    bad.append("same tensors, different order")
types = sorted({t[1] for t in ta})
print(f"{name}: {len(ta)} tensors, types {types}: {'identical to llama.cpp' if not bad else str(len(bad)) + ' differ'}")
for m in bad[:10]:
    print(f"FAIL {name}: {m}")
sys.exit(1 if bad else 0)
PY
}
note "Q4_K_M recipe: make-model vs llama.cpp's quantizer"
qcmp q35-tiny --arch qwen35 --shape tiny
qcmp q35-small --arch qwen35 --shape small --mtp 1 --recurrent-layers 1,0,1,1,1,0,1,1
qcmp moe-tiny --arch qwen35moe --shape tiny --fused-gate-up --untied
qcmp moe-small --arch qwen35moe --shape small --mtp 1
qcmp q3moe-tiny --arch qwen3moe --shape tiny
qcmp q3moe-small --arch qwen3moe --shape small

# ---- 2. llama.cpp runs the files -----------------------------------------
# run_stats LABEL FILE N_VOCAB: the checks of item 2 (N_VOCAB: ids drawn
# from 3..N_VOCAB-1; full logit rows are compared when N_VOCAB <= 4096)
run_stats() {
    local label=$1 f=$2 nv=$3
    python3 - "$label" "$f" "$nv" "$ORACLE" <<'PY' || fail=1
import json, math, random, subprocess, sys
label, f, nv, oracle = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
top = nv if nv <= 4096 else 50
def run(*args):
    r = subprocess.run([oracle, *args, "-m", f, "-t", "1"], capture_output=True, text=True)
    if r.returncode:
        print(f"FAIL {label}: bd-oracle {args[0]} failed: {r.stderr.strip()[-300:]}")
        sys.exit(1)
    return json.loads(r.stdout)
rnd = random.Random(7)
ids = [rnd.randrange(3, nv) for _ in range(80)]
a = run("logits", "--ids", ",".join(map(str, ids)), "--top", str(top))
bad = []
stds, same_as_input, tops = [], 0, []
for p in a["positions"]:
    v = [x[1] for x in p["top"]]
    if not all(math.isfinite(x) for x in v):
        bad.append(f"non-finite logit at position {p['pos']}")
        break
    if top == nv:
        m = sum(v) / len(v)
        stds.append(math.sqrt(sum((x - m) ** 2 for x in v) / len(v)))
    tops.append(p["top"][0][0])
    same_as_input += p["top"][0][0] == ids[p["pos"]]
if stds and not (1.0 <= min(stds) and max(stds) <= 20.0):
    bad.append(f"logit std per position in [{min(stds):.2f}, {max(stds):.2f}], want within [1, 20]")
if same_as_input > 0.2 * len(tops):
    bad.append(f"top-1 equals the input token at {same_as_input}/{len(tops)} positions")
if len(set(tops)) < 0.5 * len(tops):
    bad.append(f"only {len(set(tops))} distinct top-1 ids over {len(tops)} positions")
g = run("greedy", "--ids", ",".join(map(str, ids[:6])), "-n", "40")
if len(set(g["ids"])) < 20:
    bad.append(f"greedy: {len(set(g['ids']))} distinct ids in 40: {g['ids']}")
ids2 = list(ids)
ids2[0] = ids[0] + 1 if ids[0] + 1 < nv else 3
b = run("logits", "--ids", ",".join(map(str, ids2)), "--top", str(top))
la, lb = dict(map(tuple, a["positions"][79]["top"])), dict(map(tuple, b["positions"][79]["top"]))
common = set(la) & set(lb)
d = max(abs(la[t] - lb[t]) for t in common) if common else float("inf")
if d <= 0.05:
    bad.append(f"changing token 0 moves the logits at position 79 by only {d:.3g}")
std_s = f"logit std {min(stds):.2f}..{max(stds):.2f}, " if stds else ""
print(f"{label}: {std_s}top-1 max {max(max(x[1] for x in p['top']) for p in a['positions']):.1f}, "
      f"{len(set(tops))}/80 distinct top-1, input repeated {same_as_input}/80, "
      f"greedy {len(set(g['ids']))}/40 distinct {g['ids'][:8]}..., pos-79 change {d:.3g}")
for m in bad:
    print(f"FAIL {label}: {m}")
sys.exit(1 if bad else 0)
PY
}
note "llama.cpp runs the files"
for spec in "q35-tiny-q4km|--arch qwen35 --shape tiny --quant q4_k_m" \
            "q35-tiny-q4km-seed2|--arch qwen35 --shape tiny --quant q4_k_m --seed 2" \
            "q35-tiny-ud|--arch qwen35 --shape tiny --quant ud-q4_k_m" \
            "q35-tiny-mix-rec|--arch qwen35 --shape tiny --quant mix --recurrent-layers 0,1,1,1" \
            "q35-small-ud-mtp|--arch qwen35 --shape small --quant ud-q4_k_m --mtp 1 --recurrent-layers 1,0,1,1,1,0,1,1" \
            "q35-small-bf16|--arch qwen35 --shape small --quant bf16 --seed 3" \
            "moe-tiny-ud-fused|--arch qwen35moe --shape tiny --quant ud-q4_k_m --fused-gate-up" \
            "moe-small-q4km-mtp|--arch qwen35moe --shape small --quant q4_k_m --mtp 1" \
            "moe-small-q8-rec|--arch qwen35moe --shape small --quant q8_0 --recurrent-layers auto --seed 2" \
            "q3moe-tiny-q4km|--arch qwen3moe --shape tiny --quant q4_k_m" \
            "q3moe-small-ud|--arch qwen3moe --shape small --quant ud-q4_k_m"; do
    label=${spec%%|*}
    # shellcheck disable=SC2086
    mm "$W/$label.gguf" ${spec#*|} --vocab "$ST" && run_stats "$label" "$W/$label.gguf" 512
done
# the Qwen3 tokenizer padded to Qwen3.5's vocabulary size: llama.cpp loads
# the padded vocabulary (qwen35 pre-tokenizer) and tokenizes with it
if mm "$W/q35-tiny-qv.gguf" --arch qwen35 --shape tiny --quant q8_0 --vocab "$QV" --n-vocab 248320; then
    run_stats q35-tiny-qwen-vocab-248320 "$W/q35-tiny-qv.gguf" 248320
    t=$("$ORACLE" tokenize -m "$W/q35-tiny-qv.gguf" "Hello world" 2>/dev/null)
    [ "$t" = '{"ids":[9707,1879]}' ] || bad "padded vocabulary: llama.cpp tokenized 'Hello world' as $t, want [9707,1879] (Qwen3 ids)"
    # blockdraft's tokenizer takes the qwen35 pre-tokenizer and the padding
    t=$("$BD_BIN" tokenize -m "$W/q35-tiny-qv.gguf" --json "Hello world" 2>&1)
    [ "$t" = '{"ids": [9707, 1879]}' ] || bad "padded vocabulary: blockdraft tokenized 'Hello world' as $t"
fi

# ---- 3. drafters in llama.cpp's draft-dflash loop ------------------------
# dflash LABEL TARGET DRAFTER N_MAX ACCEPT [oracle options]: ACCEPT -1 =
# only check that the loop runs and emits 24 tokens
dflash() {
    local label=$1 t=$2 d=$3 k=$4 acc=$5; shift 5
    "$ODF" -m "$t" -md "$d" --ids 1,50,60,70,80,90,100,110 -n 24 --n-max "$k" -t 1 "$@" >"$W/$label.json" 2>"$W/$label.err" ||
        { bad "$label: bd-oracle-dflash failed: $(tail -3 "$W/$label.err")"; return; }
    python3 - "$label" "$W/$label.json" "$k" "$acc" <<'PY' || fail=1
import json, sys
label, o, k, acc = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3]), int(sys.argv[4])
bad = []
steps = o["steps"]
if len(o["generated_ids"]) != 24 or not steps:
    bad.append(f"{len(o['generated_ids'])} tokens in {len(steps)} steps")
if acc >= 0:
    for s in steps:
        want = [0] * acc
        if s["drafts"][:acc] != want or 0 in s["drafts"][acc:] or s["accepted"] != acc:
            bad.append(f"pos {s['pos']}: drafts {s['drafts']}, accepted {s['accepted']}; want {acc} zeros then "
                       f"non-zero ids, {acc} accepted")
            break
    if any(t != 0 for t in o["generated_ids"]):
        bad.append(f"the constant-output target generated {o['generated_ids']}")
print(f"{label}: {len(steps)} steps, accepted {[s['accepted'] for s in steps]}, first drafts {steps[0]['drafts'] if steps else None}")
for m in bad:
    print(f"FAIL {label}: {m}")
sys.exit(1 if bad else 0)
PY
}
note "drafters in llama.cpp's draft-dflash loop"
mm "$W/T.gguf" --arch qwen35 --shape tiny --quant f16 --seed 5 --vocab "$ST" &&
    mm "$W/D.gguf" --arch dflash --target "$W/T.gguf" --drafter random --layers 2 --quant f32 --seed 3 &&
    dflash random-q35 "$W/T.gguf" "$W/D.gguf" 3 -1
mm "$W/TC.gguf" --arch qwen35 --shape tiny --quant q8_0 --vocab "$ST" --constant-output &&
    mm "$W/DC.gguf" --arch dflash --target "$W/TC.gguf" --drafter constructed --accept 3 --layers 2 --quant f32 &&
    dflash constructed-q35 "$W/TC.gguf" "$W/DC.gguf" 7 3 --samplers temperature
mm "$W/MC.gguf" --arch qwen35moe --shape tiny --quant q4_k_m --vocab "$ST" --constant-output --mtp 1 &&
    mm "$W/MDC.gguf" --arch dflash --target "$W/MC.gguf" --drafter constructed --accept 2 --swa 8 --swa-pattern 1,1,1,1,0 &&
    dflash constructed-moe-swa "$W/MC.gguf" "$W/MDC.gguf" 5 2 --samplers temperature
exit $fail
