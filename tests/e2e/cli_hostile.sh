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

# --- model files whose RoPE or biases cannot be right ---------------------
EDIT="$BD_BUILD/tests/bd-gguf-edit"
# refused WHAT SRC WANT EDIT...: SRC edited with bd-gguf-edit must be
# refused by `run` (not a timeout) with WANT in the message
refused() {
    local what=$1 src=$2 want=$3 rc
    shift 3
    "$EDIT" "$src" "$T/edited.gguf" "$@" || { fail "bd-gguf-edit for $what"; return; }
    timeout 60 "$BD_BIN" run -m "$T/edited.gguf" -p "Once" -n 4 >"$T/out" 2>&1
    rc=$?
    cat "$T/out"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$what was not refused (exit $rc)"
    grep -q -- "$want" "$T/out" || fail "$what: the message does not name $want"
}
ones() { python3 -c 'import sys; print(",".join([sys.argv[2]] * int(sys.argv[1])))' "$1" "$2"; }
timeout 60 "$BD_BIN" make-model --arch qwen3 --shape tiny --quant q8_0 --seed 3 \
    --vocab "$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf" -o "$T/q3.gguf" >/dev/null 2>&1 ||
    fail "make-model qwen3 tiny"

# rope_freqs.weight (Llama 3.1+ scaled RoPE): stories260K has 8 rotary dims,
# so 4 factors; a bad tensor is refused by name before anything runs, and a
# qwen3 file carrying one (llama.cpp reads it for llama only) is refused
# rather than run without it
"$EDIT" "$S" "$T/rf-ok.gguf" --add-f32s rope_freqs.weight 1,2,4,8 || fail "bd-gguf-edit rf-ok"
timeout 60 "$BD_BIN" run -m "$T/rf-ok.gguf" -p "Once" -n 4 --temp 0 >"$T/out" 2>&1 || fail "4 valid factors refused: $(tail -1 "$T/out")"
for spec in "short:1,2,4" "zero:1,0,4,8" "negative:1,-2,4,8" "nan:1,nan,4,8" "inf:1,inf,4,8"; do
    refused "rope_freqs (${spec%%:*})" "$S" rope_freqs --add-f32s rope_freqs.weight "${spec#*:}"
done
refused "a qwen3 file with rope_freqs.weight" "$T/q3.gguf" "rope_freqs.*not supported for qwen3" \
    --add-f32s rope_freqs.weight "$(ones 32 1)"
ok "bad or misplaced rope_freqs.weight tensors are refused by name"

# RoPE scaling keys
refused "scaling type longrope" "$S" rope.scaling.type --set-str llama.rope.scaling.type longrope
refused "scaling type of the wrong GGUF type" "$S" rope.scaling.type --set-u32 llama.rope.scaling.type 2
for f in -2 nan 1e-9; do
    refused "scaling factor $f" "$S" rope.scaling.factor --set-f32 llama.rope.scaling.factor "$f"
done
refused "attn_factor 0" "$S" rope.scaling.attn_factor --set-f32 llama.rope.scaling.attn_factor 0
ok "unusable RoPE scaling keys are refused by name"

# biases the forward does not implement, or of the wrong size (stories260K:
# width 64, 8 heads of 8, feed-forward 172; the qwen3 tiny file: width 256)
refused "an ffn bias" "$S" blk.0.ffn_up.bias --add-f32s blk.0.ffn_up.bias "$(ones 172 0.1)"
refused "output.bias" "$S" output.bias --add-f32s output.bias 0.5
refused "a short attn_q.bias" "$S" blk.1.attn_q.bias --add-f32s blk.1.attn_q.bias 1,2,3
refused "attn_output.bias on qwen3" "$T/q3.gguf" attn_output.bias \
    --add-f32s blk.0.attn_output.bias "$(ones 256 0.1)"
ok "biases that cannot be applied are refused by name"
[ $FAILS -eq 0 ] || { echo "$FAILS checks failed"; exit 1; }
echo "all hostile CLI checks passed"
