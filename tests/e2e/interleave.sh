#!/usr/bin/env bash
# interleave.sh - the interleaved weight layout (kernels.h's BD_LAYOUT_IL16)
# end to end, under every x86-64 kernel level this CPU runs that has its
# kernels (avx2, avxvnni, avx512; the row-by-row fallback and the kernels'
# twins are tests/unit/test_kernels.c's).
#  * BLOCKDRAFT_COPY_MIN=0 takes the small generated files through the
#    load-time copy the layout is built in (bd_fmap_prefetch): bench --json
#    reports interleaved bytes, and none with BLOCKDRAFT_INTERLEAVE=0 or
#    --mmap (the file's layout kept).
#  * Teacher-forced logits (eval --json, all printed to 17 digits) of
#    qwen3 (tied, untied mix), qwen35 and qwen35moe (fused and split
#    experts) and qwen3next (its fused ssm_in / ssm_ba regrouped in the copy,
#    then the row runs interleaved) files: identical with and without the
#    layout.
#  * Greedy text, plain and speculative (DFlash drafters, random and
#    constructed, n_max 3 and 15): identical with the layout to plain
#    decoding without it. The random drafters are Q8_0, which only
#    drafters interleave: bench reports their interleaved bytes (none
#    with BLOCKDRAFT_INTERLEAVE=0).
# Needs transparent huge pages (the copy needs them): exit 77 without.
set -euo pipefail
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
[ "$(uname -m)" = x86_64 ] || { echo "interleave: not an x86-64 host (no level has the layout's kernels)"; exit 77; }
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "[never]")
[[ "$thp" == *"[never]"* ]] && { echo "interleave: transparent huge pages are off ($thp): no load-time copy"; exit 77; }
QV="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
SV="$BD_SHARED/fixtures/stories260K/stories260K.gguf"
mm() { "$BD_BIN" make-model "$@" >/dev/null; }
mm --arch qwen3 --shape tiny --quant q4_k_m --seed 11 --vocab "$QV" -o "$T/q1.gguf"
mm --arch qwen3 --shape tiny --quant mix --untied --seed 12 --vocab "$QV" -o "$T/q2.gguf"
mm --arch qwen35 --shape tiny --quant q4_k_m --seed 21 --vocab "$SV" -o "$T/h1.gguf"
mm --arch qwen35moe --shape tiny --quant q4_k_m --seed 15 --fused-gate-up --mtp 1 --vocab "$SV" -o "$T/h2.gguf"
mm --arch qwen35moe --shape tiny --quant q4_k_m --seed 16 --vocab "$SV" -o "$T/h3.gguf"
mm --arch qwen3next --shape small --quant q4_k_m --seed 17 --vocab "$SV" -o "$T/h4.gguf"
for t in q1 h1 h2; do
    mm --arch dflash --target "$T/$t.gguf" --drafter random --layers 2 --quant q8_0 --seed 5 -o "$T/$t-rand.gguf"
    mm --arch dflash --target "$T/$t.gguf" --drafter constructed --accept 3 --layers 2 --quant f32 -o "$T/$t-cons.gguf"
done
# same-seed Q4_0 drafters (draft-simple): right most of the time, wrong at
# varying places, so rollbacks land inside blocks and the interleaved
# target's restored recurrent state decides the continuation
mm --arch qwen3 --shape tiny --quant q4_0 --seed 11 --vocab "$QV" -o "$T/q1-simple.gguf"
mm --arch qwen35 --shape tiny --quant q4_0 --seed 21 --vocab "$SV" -o "$T/h1-simple.gguf"
export BLOCKDRAFT_COPY_MIN=0
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
levels=avx2
[[ "$flags" == *" avx_vnni "* ]] && levels="$levels avxvnni"
[[ "$flags" == *" avx512f "* && "$flags" == *" avx512bw "* && "$flags" == *" avx512_vnni "* && "$flags" == *" avx512dq "* && "$flags" == *" avx512vl "* ]] && levels="$levels avx512"
il_bytes() { "$BD_BIN" bench "$@" -p 0 -n 1 --no-verify -t 2 -r 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["interleaved_bytes"])'; }
dil_bytes() { "$BD_BIN" bench "$@" -p 0 -n 4 --no-verify -t 2 -r 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["draft_interleaved_bytes"])'; }
P="The quick brown fox jumps over the lazy dog and then it runs far away into the woods"
fail=0
for isa in $levels; do
    export BLOCKDRAFT_ISA=$isa
    for t in q1 q2 h1 h2 h3 h4; do
        on=$(BLOCKDRAFT_INTERLEAVE=1 il_bytes -m "$T/$t.gguf")
        off=$(BLOCKDRAFT_INTERLEAVE=0 il_bytes -m "$T/$t.gguf")
        mapped=$(BLOCKDRAFT_INTERLEAVE=1 il_bytes -m "$T/$t.gguf" --mmap)
        if [ "$on" -le 0 ] || [ "$off" -ne 0 ] || [ "$mapped" -ne 0 ]; then
            echo "FAIL $isa $t: interleaved bytes on $on, off $off, --mmap $mapped"; fail=1; continue
        fi
        BLOCKDRAFT_INTERLEAVE=1 "$BD_BIN" eval -m "$T/$t.gguf" -p "$P" --top 8 --json > "$T/e-on.json"
        BLOCKDRAFT_INTERLEAVE=0 "$BD_BIN" eval -m "$T/$t.gguf" -p "$P" --top 8 --json > "$T/e-off.json"
        if ! cmp -s "$T/e-on.json" "$T/e-off.json"; then echo "FAIL $isa $t: logits differ"; fail=1; fi
        run() { "$BD_BIN" run --temp 0 -t 2 -c 256 --ignore-eos -p "$P" -n 40 "$@"; }
        BLOCKDRAFT_INTERLEAVE=0 run -m "$T/$t.gguf" > "$T/plain.txt"
        BLOCKDRAFT_INTERLEAVE=1 run -m "$T/$t.gguf" > "$T/il.txt"
        cmp -s "$T/plain.txt" "$T/il.txt" || { echo "FAIL $isa $t: greedy text differs"; fail=1; }
        [ -f "$T/$t-rand.gguf" ] || { echo "ok $isa $t ($on bytes interleaved)"; continue; }
        don=$(BLOCKDRAFT_INTERLEAVE=1 dil_bytes -m "$T/$t.gguf" -md "$T/$t-rand.gguf")
        doff=$(BLOCKDRAFT_INTERLEAVE=0 dil_bytes -m "$T/$t.gguf" -md "$T/$t-rand.gguf")
        if [ "$don" -le 0 ] || [ "$doff" -ne 0 ]; then
            echo "FAIL $isa $t: Q8_0 drafter interleaved bytes on $don, off $doff"; fail=1
        fi
        for d in rand cons; do
            for n in 3 15; do
                BLOCKDRAFT_INTERLEAVE=1 run -m "$T/$t.gguf" -md "$T/$t-$d.gguf" --spec-draft-n-max $n --no-spec-adaptive \
                    > "$T/spec.txt"
                cmp -s "$T/plain.txt" "$T/spec.txt" || { echo "FAIL $isa $t $d n=$n: speculative text differs"; fail=1; }
            done
        done
        if [ -f "$T/$t-simple.gguf" ]; then
            BLOCKDRAFT_INTERLEAVE=1 run -m "$T/$t.gguf" -md "$T/$t-simple.gguf" --spec-type draft-simple \
                --spec-draft-n-max 7 --json > "$T/simple.json"
            BLOCKDRAFT_INTERLEAVE=0 run -m "$T/$t.gguf" --json > "$T/plain.json"
            python3 - "$T/simple.json" "$T/plain.json" <<'PY' || { echo "FAIL $isa $t draft-simple"; fail=1; }
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["generated_ids"] == b["generated_ids"], "draft-simple tokens differ from plain"
acc = a["stats"]["spec"]["n_accepted"]; drafted = a["stats"]["spec"]["n_drafted"]
assert 0 < acc < drafted, f"no partial acceptance: {acc} of {drafted}"
print(f"draft-simple: accepted {acc} of {drafted}")
PY
        fi
        echo "ok $isa $t ($on bytes interleaved)"
    done
done
exit $fail
