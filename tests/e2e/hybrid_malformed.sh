#!/usr/bin/env bash
# hybrid_malformed.sh - malformed qwen35 / qwen35moe / qwen3next GGUFs, and qwen3moe
# ones (the mixture-of-experts loader is shared with qwen35moe): each
# inconsistency is refused by `blockdraft eval` with a message naming the
# field, a non-zero exit and no crash, on the release binary and on the
# ASan+UBSan one (build-debug/blockdraft, which `make test` builds; this
# test fails without it). The files are a valid tiny model (make-model)
# with one edit each (bd-gguf-edit, tests/tools/gguf_edit.c); the valid
# files themselves must load.
set -u
: "${BD_BIN:?}" "${BD_BUILD:?}" "${BD_SHARED:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
EDIT="$BD_BUILD/tests/bd-gguf-edit"
DBG="$ROOT/build-debug/blockdraft"
[ -x "$EDIT" ] || { echo "FAIL: $EDIT not built (make tests)"; exit 1; }
[ -x "$DBG" ] || { echo "FAIL: $DBG not built (make debug-bin)"; exit 1; }
ST="$BD_SHARED/fixtures/stories260K/stories260K.gguf"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$BD_BIN" make-model --arch qwen35 --shape tiny --quant q8_0 --vocab "$ST" --seed 3 -o "$T/d.gguf" >/dev/null 2>&1 ||
    { echo "FAIL: make-model qwen35"; exit 1; }
"$BD_BIN" make-model --arch qwen35moe --shape tiny --quant q8_0 --vocab "$ST" --seed 4 -o "$T/m.gguf" >/dev/null 2>&1 ||
    { echo "FAIL: make-model qwen35moe"; exit 1; }
"$BD_BIN" make-model --arch qwen3next --shape tiny --quant q8_0 --vocab "$ST" --seed 5 -o "$T/n.gguf" >/dev/null 2>&1 ||
    { echo "FAIL: make-model qwen3next"; exit 1; }
"$BD_BIN" make-model --arch qwen3moe --shape tiny --quant q8_0 --vocab "$ST" --seed 4 -o "$T/q.gguf" >/dev/null 2>&1 ||
    { echo "FAIL: make-model qwen3moe"; exit 1; }
# five layers: edits below drop block_count to 4 and rename the unused
# fifth layer's tensors into layer 0's names
"$BD_BIN" make-model --arch qwen3moe --shape tiny --layers 5 --quant q8_0 --vocab "$ST" --seed 4 -o "$T/q5.gguf" \
    >/dev/null 2>&1 || { echo "FAIL: make-model qwen3moe --layers 5"; exit 1; }

# expect NAME BASE FRAGMENT EDIT...: the edited file is refused naming FRAGMENT
expect() {
    local name=$1 base=$2 frag=$3; shift 3
    "$EDIT" "$T/$base.gguf" "$T/$name.gguf" "$@" 2>"$T/edit.err" || { bad "$name: bd-gguf-edit: $(cat "$T/edit.err")"; return; }
    local bin
    for bin in "$BD_BIN" "$DBG"; do
        "$bin" eval -m "$T/$name.gguf" --ids 1,2,3 --top 1 >"$T/out" 2>"$T/err"
        local rc=$?
        if [ $rc -eq 0 ]; then bad "$name: accepted by $(basename "$(dirname "$bin")")"; continue; fi
        if [ $rc -ge 128 ] || grep -q "Sanitizer\|runtime error" "$T/err"; then
            bad "$name: crashed or sanitizer report ($bin, rc $rc): $(head -3 "$T/err")"; continue
        fi
        grep -qF -- "$frag" "$T/err" || bad "$name: message lacks '$frag': $(tail -1 "$T/err")"
    done
    printf '%-22s %s\n' "$name" "$(tail -1 "$T/err")"
}

for base in d m n q q5; do
    for bin in "$BD_BIN" "$DBG"; do
        "$bin" eval -m "$T/$base.gguf" --ids 1,2,3 --top 1 >/dev/null 2>"$T/err" || bad "valid $base refused: $(tail -1 "$T/err")"
    done
done

# One-token sessions (bench -p 0 -n 1: n_ctx = n_batch = 1, where the MoE
# passes' grouped scratch is the largest need) on the "small" MoE shapes
# with split gate / up stacks, under ASan: the scratch once counted each
# routed pair's gathered row once, not once per stack, and wrote past it.
for spec in "ms|--arch qwen35moe --shape small" "ns|--arch qwen3next --shape small"; do
    f=${spec%%|*}
    # shellcheck disable=SC2086
    "$BD_BIN" make-model ${spec#*|} --quant q4_k_m --vocab "$ST" --seed 6 -o "$T/$f.gguf" >/dev/null 2>&1 ||
        { bad "make-model $f"; continue; }
    if ! "$DBG" bench -m "$T/$f.gguf" -p 0 -n 1 --no-verify -t 2 -r 1 >/dev/null 2>"$T/err" ||
        grep -q "Sanitizer\|runtime error" "$T/err"; then
        bad "one-token session on $f: $(grep -m1 "ERROR\|runtime error" "$T/err")"
    else
        echo "one-token session on $f (MoE small, split gate / up): clean under ASan"
    fi
done

A=qwen35
expect inner-size d "ssm.inner_size" --set-u32 $A.ssm.inner_size 200
expect nv-not-multiple d "not a multiple" --set-u32 $A.ssm.time_step_rank 3
expect conv-dim d "blk.0.attn_qkv.weight" --set-u32 $A.ssm.group_count 4
expect missing-ssm-a d "blk.0.ssm_a" --drop-tensor blk.0.ssm_a
expect missing-conv d "blk.1.ssm_conv1d.weight" --drop-tensor blk.1.ssm_conv1d.weight
expect missing-norm d "blk.2.ssm_norm.weight" --drop-tensor blk.2.ssm_norm.weight
expect sections-sum d "adds up" --set-i32s $A.rope.dimension_sections 3,3,3,0
expect no-sections d "rope.dimension_sections" --drop-key $A.rope.dimension_sections
expect no-conv-kernel d "ssm.conv_kernel" --drop-key $A.ssm.conv_kernel
expect nextn-all d "nextn_predict_layers" --set-u32 $A.nextn_predict_layers 4
expect rec-length d "recurrent_layers" --set-bools $A.attention.recurrent_layers 1,1,0
expect rec-swapped d "attention layer by the schedule" --set-bools $A.attention.recurrent_layers 0,1,1,1
expect interval-0 d "full_attention_interval" --set-u32 $A.full_attention_interval 0
expect ssm-a-positive d "not negative" --set-f32s blk.0.ssm_a 0.5,-1,-1,-1
expect head-dim d "head dims" --set-u32 $A.attention.value_length 32
A=qwen35moe
expect used-gt-count m "expert_used_count" --set-u32 $A.expert_used_count 99
expect shexp-partial m "shared-expert" --drop-tensor blk.0.ffn_up_shexp.weight
expect no-down-exps m "blk.1.ffn_down_exps.weight" --drop-tensor blk.1.ffn_down_exps.weight
expect weights-scale m "expert_weights_scale" --set-f32 $A.expert_weights_scale 2.5
expect exp-width m "ffn_gate_exps.weight" --set-u32 $A.expert_feed_forward_length 100
A=qwen3next
expect n-no-in n "blk.0.ssm_in.weight" --drop-tensor blk.0.ssm_in.weight
expect n-no-ba n "blk.1.ssm_ba.weight" --drop-tensor blk.1.ssm_ba.weight
expect n-in-rows n "blk.0.ssm_in.weight" --set-u32 $A.ssm.group_count 1
expect n-no-experts n "expert_count" --set-u32 $A.expert_count 0
expect n-inner-size n "ssm.inner_size" --set-u32 $A.ssm.inner_size 200
A=qwen3moe
expect q-used-gt-count q "expert_used_count" --set-u32 $A.expert_used_count 17
expect q-no-experts q "expert_count" --set-u32 $A.expert_count 0
expect q-no-count q "expert_count" --drop-key $A.expert_count
expect q-no-router q "blk.2.ffn_gate_inp.weight" --drop-tensor blk.2.ffn_gate_inp.weight
expect q-router-rows q "blk.0.ffn_gate_inp.weight" --set-u32 $A.expert_count 12
expect q-exp-width q "ffn_gate_exps.weight" --set-u32 $A.expert_feed_forward_length 100
expect q-weights-scale q "expert_weights_scale" --set-f32 $A.expert_weights_scale 2.5
expect q-no-up-exps q "blk.3.ffn_up_exps.weight" --drop-tensor blk.3.ffn_up_exps.weight
expect q-fused q "ffn_gate_up_exps" --rename-tensor blk.1.ffn_gate_exps.weight blk.1.ffn_gate_up_exps.weight
expect q-shexp q5 "shared-expert" --set-u32 $A.block_count 4 \
    --rename-tensor blk.4.attn_norm.weight blk.0.ffn_gate_inp_shexp.weight
expect q-dense-ffn q5 "dense feed-forward" --set-u32 $A.block_count 4 \
    --rename-tensor blk.4.ffn_norm.weight blk.0.ffn_up.weight

[ $fail -eq 0 ] && echo "hybrid_malformed: every edit refused by name, release and ASan builds"
exit $fail
