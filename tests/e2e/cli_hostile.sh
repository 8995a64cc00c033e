#!/usr/bin/env bash
# cli_hostile.sh - the command line with careless or hostile input (issue
# 16): a FIFO named as a model or config (item 15) must be refused, not
# block; `-f DIRECTORY` is an error, not an empty prompt (item 21); control
# bytes from a GGUF file's strings never reach the terminal (item 22).
# Every command runs under `timeout`, so a hang is a failure, not a stuck
# test.
set -u
T=$(mktemp -d /tmp/bd-e2e-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# KEEP_GOING=1: report every failed check instead of stopping at the first
FAILS=0
if [ "${KEEP_GOING:-0}" = 1 ]; then fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }; fi
ok() { echo "ok: $*"; }
S="$BD_SHARED/fixtures/stories260K/stories260K.gguf"
[ -f "$S" ] || fail "fixture missing: $S"

# --- 15. a FIFO is refused at once ---------------------------------------
mkfifo "$T/fifo.gguf"
for cmd in "run -m $T/fifo.gguf -p x -n 1" "inspect $T/fifo.gguf" "tokenize -m $T/fifo.gguf -p x"; do
    # shellcheck disable=SC2086
    timeout 10 "$BD_BIN" $cmd >"$T/out" 2>&1
    rc=$?
    cat "$T/out"
    [ $rc -ne 124 ] || fail "'blockdraft $cmd' blocked on a FIFO"
    [ $rc -ne 0 ] || fail "'blockdraft $cmd' accepted a FIFO"
    grep -q "not a regular file" "$T/out" || fail "'blockdraft $cmd': no clear message"
done
# an installed model whose config is a FIFO, and whose weights are one
mkdir -p "$T/models"
mkfifo "$T/models/pipe.yaml"
printf 'name: w\nparameters:\n  model: w.gguf\n' >"$T/models/w.yaml"
mkfifo "$T/models/w.gguf"
for name in pipe w; do
    BLOCKDRAFT_MODELS="$T/models" timeout 10 "$BD_BIN" run "$name" -p x -n 1 >"$T/out" 2>&1
    rc=$?
    cat "$T/out"
    [ $rc -ne 124 ] || fail "run $name blocked on a FIFO"
    [ $rc -ne 0 ] || fail "run $name accepted a FIFO"
    grep -q "not a regular file" "$T/out" || fail "run $name: no clear message"
done
BLOCKDRAFT_MODELS="$T/models" timeout 10 "$BD_BIN" list >"$T/out" 2>&1
[ $? -ne 124 ] || fail "list blocked on a FIFO config"
ok "FIFOs named as models or configs are refused without blocking"

# --- 21. -f DIRECTORY ----------------------------------------------------
for cmd in "run -m $S -n 1 -f $T" "tokenize -m $S -f $T"; do
    # shellcheck disable=SC2086
    timeout 30 "$BD_BIN" $cmd >"$T/out" 2>&1
    rc=$?
    cat "$T/out"
    [ $rc -ne 0 ] || fail "'blockdraft $cmd' took a directory for an empty prompt"
    grep -q "cannot read $T" "$T/out" || fail "'blockdraft $cmd': no clear message"
done
ok "-f DIRECTORY is an error"

# --- 22. a GGUF string with terminal escapes in an error message --------
python3 - "$T/evil.gguf" <<'PY'
import struct, sys
def s(b):
    return struct.pack("<Q", len(b)) + b
key, val = b"general.architecture", b"evil\x1b]0;pwned\x07\x1b[2J\xc2\x9b"
data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + s(key) + struct.pack("<I", 8) + s(val)
open(sys.argv[1], "wb").write(data)
PY
timeout 10 "$BD_BIN" run -m "$T/evil.gguf" -p x -n 1 >"$T/out" 2>&1
[ $? -ne 0 ] || fail "a GGUF of unknown architecture was run"
cat -v "$T/out"
grep -q $'\x1b' "$T/out" && fail "ESC from a GGUF string reached the terminal"
grep -q $'\x07' "$T/out" && fail "BEL from a GGUF string reached the terminal"
grep -q $'\xc2\x9b' "$T/out" && fail "C1 CSI from a GGUF string reached the terminal"
grep -qF 'evil\x1b]0;pwned\x07\x1b[2J\u009b' "$T/out" || fail "the architecture name is not shown escaped"
ok "control bytes of GGUF strings are escaped in messages"

# --- rope_freqs.weight (Llama 3.1+ scaled RoPE) that cannot be right -------
# stories260K has 8 rotary dims, so 4 factors; each bad tensor is refused by
# name before anything runs, and a qwen3 file carrying one (llama.cpp reads
# the tensor for llama only) is refused rather than run without it.
EDIT="$BD_BUILD/tests/bd-gguf-edit"
"$EDIT" "$S" "$T/rf-ok.gguf" --add-f32s rope_freqs.weight 1,2,4,8 || fail "bd-gguf-edit rf-ok"
timeout 60 "$BD_BIN" run -m "$T/rf-ok.gguf" -p "Once" -n 4 --temp 0 >"$T/out" 2>&1 || fail "4 valid factors refused: $(tail -1 "$T/out")"
for spec in "short:1,2,4" "zero:1,0,4,8" "negative:1,-2,4,8" "nan:1,nan,4,8" "inf:1,inf,4,8"; do
    name=${spec%%:*}
    "$EDIT" "$S" "$T/rf-$name.gguf" --add-f32s rope_freqs.weight "${spec#*:}" || fail "bd-gguf-edit rf-$name"
    timeout 60 "$BD_BIN" run -m "$T/rf-$name.gguf" -p "Once" -n 4 >"$T/out" 2>&1
    rc=$?
    cat "$T/out"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "rope_freqs ($name) was not refused (exit $rc)"
    grep -q "rope_freqs" "$T/out" || fail "rope_freqs ($name): the message does not name the tensor"
done
timeout 60 "$BD_BIN" make-model --arch qwen3 --shape tiny --quant q8_0 --seed 3 \
    --vocab "$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf" -o "$T/q3.gguf" >/dev/null 2>&1 ||
    fail "make-model qwen3 tiny"
"$EDIT" "$T/q3.gguf" "$T/q3-rf.gguf" --add-f32s rope_freqs.weight "$(python3 -c 'print(",".join(["1"] * 32))')" ||
    fail "bd-gguf-edit q3-rf"
timeout 60 "$BD_BIN" run -m "$T/q3-rf.gguf" -p "x" -n 1 >"$T/out" 2>&1
rc=$?
cat "$T/out"
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "rope_freqs.*not supported for qwen3" "$T/out" ||
    fail "a qwen3 file with rope_freqs.weight was not refused by name"
ok "bad or misplaced rope_freqs.weight tensors are refused by name"

# --- RoPE scaling keys that cannot be right ------------------------------------
for spec in "type-longrope:--set-str llama.rope.scaling.type longrope:rope.scaling.type" \
            "type-number:--set-u32 llama.rope.scaling.type 2:rope.scaling.type" \
            "factor-negative:--set-f32 llama.rope.scaling.factor -2:rope.scaling.factor" \
            "factor-nan:--set-f32 llama.rope.scaling.factor nan:rope.scaling.factor" \
            "factor-tiny:--set-f32 llama.rope.scaling.factor 1e-9:rope.scaling.factor" \
            "attn-zero:--set-f32 llama.rope.scaling.attn_factor 0:rope.scaling.attn_factor"; do
    IFS=: read -r name edits want <<<"$spec"
    # shellcheck disable=SC2086
    "$EDIT" "$S" "$T/rs-$name.gguf" $edits || fail "bd-gguf-edit rs-$name"
    timeout 60 "$BD_BIN" run -m "$T/rs-$name.gguf" -p "Once" -n 4 >"$T/out" 2>&1
    rc=$?
    cat "$T/out"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "RoPE scaling ($name) was not refused (exit $rc)"
    grep -q -- "$want" "$T/out" || fail "RoPE scaling ($name): the message does not name $want"
done
ok "unusable RoPE scaling keys are refused by name"

# --- biases the forward does not implement, or of the wrong size ---------------
# (stories260K: width 64, 8 heads of 8, 4 kv heads; the qwen3 tiny file above)
for spec in "S:ffn:--add-f32s blk.0.ffn_up.bias $(python3 -c 'print(",".join(["0.1"] * 172))'):blk.0.ffn_up.bias" \
            "S:out:--add-f32s output.bias 0.5:output.bias" \
            "S:qshort:--add-f32s blk.1.attn_q.bias 1,2,3:blk.1.attn_q.bias" \
            "Q:wo:--add-f32s blk.0.attn_output.bias $(python3 -c 'print(",".join(["0.1"] * 256))'):attn_output.bias"; do
    IFS=: read -r which name edits want <<<"$spec"
    src=$S
    [ "$which" = Q ] && src=$T/q3.gguf
    # shellcheck disable=SC2086
    "$EDIT" "$src" "$T/b-$name.gguf" $edits || fail "bd-gguf-edit b-$name"
    timeout 60 "$BD_BIN" run -m "$T/b-$name.gguf" -p "Once" -n 4 >"$T/out" 2>&1
    rc=$?
    cat "$T/out"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "bias ($name) was not refused (exit $rc)"
    grep -q -- "$want" "$T/out" || fail "bias ($name): the message does not name $want"
done
ok "biases that cannot be applied are refused by name"
[ $FAILS -eq 0 ] || { echo "$FAILS checks failed"; exit 1; }
echo "all hostile CLI checks passed"
