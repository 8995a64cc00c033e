#!/usr/bin/env bash
# inspect.sh - `blockdraft inspect` on real fixtures (known keys, values from
# the fixtures' READMEs) and on broken files (clean error, exit 1, no crash).
set -u
fail() { echo "FAIL: $*"; exit 1; }

FIX="$BD_SHARED/fixtures"
STORIES="$FIX/stories260K/stories260K.gguf"
DFLASH="$FIX/stories260K/stories260K-dflash.gguf"
VOCAB="$FIX/qwen3-tokenizer/qwen3-vocab.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- good files -----------------------------------------------------------
out=$("$BD_BIN" inspect "$STORIES") || fail "inspect stories260K exited $?"
grep -q '^version: *3$' <<<"$out" || fail "no version 3"
grep -q 'general.architecture (string) = "llama"' <<<"$out" || fail "architecture"
grep -q 'llama.block_count (uint32) = 5$' <<<"$out" || fail "block_count"
grep -q 'llama.embedding_length (uint32) = 64$' <<<"$out" || fail "embedding_length"
grep -q 'tokenizer.ggml.tokens (array) = \[512 strings: "<unk>", "<s>", "</s>",' <<<"$out" || fail "tokens"
grep -Eq '^  token_embd.weight +f32 +\{64, 512\} ' <<<"$out" || fail "token_embd row"
grep -q '^tensors (48):' <<<"$out" || fail "tensor count"

out=$("$BD_BIN" inspect "$VOCAB") || fail "inspect qwen3-vocab exited $?"
grep -q 'tokenizer.ggml.tokens (array) = \[151936 strings: "!", "\\"", ' <<<"$out" || fail "qwen3 tokens"
grep -q 'tokenizer.ggml.merges (array) = \[151387 strings:' <<<"$out" || fail "qwen3 merges"
grep -q '(4116 bytes)' <<<"$out" || fail "chat template abbreviated"

"$BD_BIN" inspect --json "$DFLASH" >"$tmp/d.json" || fail "inspect --json exited $?"
if command -v python3 >/dev/null; then
    python3 - "$tmp/d.json" <<'EOF' || fail "JSON content"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["metadata"]
assert d["version"] == 3 and d["alignment"] == 32, d["version"]
assert m["general.architecture"] == "dflash"
assert m["dflash.block_size"] == 8
assert m["dflash.target_layers"]["values"] == [2, 4] and m["dflash.target_layers"]["count"] == 2
assert m["dflash.attention.causal"] is False
assert m["dflash.attention.layer_norm_rms_epsilon"] == 1e-06
t = m["tokenizer.ggml.tokens"]
assert t["count"] == 512 and t["truncated"] is True and t["values"][:3] == ["<unk>", "<s>", "</s>"]
assert len(d["tensors"]) == 25
fc = [x for x in d["tensors"] if x["name"] == "fc.weight"][0]
assert fc["ne"] == [128, 64] and fc["type"] == "f32" and fc["nbytes"] == 128 * 64 * 4
EOF
else
    grep -q '"dflash.block_size": 8' "$tmp/d.json" || fail "json block_size"
fi

# --- broken files ---------------------------------------------------------
check_bad() { # file, expected text in the message
    local f=$1 want=$2
    "$BD_BIN" inspect "$f" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ $rc -eq 1 ] || fail "$f: exit $rc, wanted 1 ($(cat "$tmp/err"))"
    grep -q "$want" "$tmp/err" || fail "$f: message lacks '$want': $(cat "$tmp/err")"
    [ -s "$tmp/out" ] && fail "$f: printed to stdout"
    return 0
}
head -c 4096 /dev/urandom >"$tmp/garbage.gguf"
check_bad "$tmp/garbage.gguf" "magic"
: >"$tmp/empty.gguf"
check_bad "$tmp/empty.gguf" "magic"
check_bad "$tmp/missing.gguf" "cannot open"
# truncated at several points of the real file: header, metadata, tensor table, data
for n in 3 10 24 100 1000 5000 13000 14176 500000 1185375; do
    head -c $n "$STORIES" >"$tmp/trunc.gguf"
    check_bad "$tmp/trunc.gguf" "gguf: "
done
head -c 500000 "$STORIES" >"$tmp/trunc.gguf"
check_bad "$tmp/trunc.gguf" "extends past end of file"
# GGUF v1 and a big-endian header
printf 'GGUF\001\000\000\000' >"$tmp/v1.gguf"; head -c 64 /dev/zero >>"$tmp/v1.gguf"
check_bad "$tmp/v1.gguf" "GGUF v1 is not supported"
printf 'GGUF\000\000\000\003' >"$tmp/be.gguf"; head -c 64 /dev/zero >>"$tmp/be.gguf"
check_bad "$tmp/be.gguf" "big-endian"
# usage errors exit 2
"$BD_BIN" inspect >/dev/null 2>&1; [ $? -eq 2 ] || fail "no-argument exit code"
"$BD_BIN" inspect --bogus "$STORIES" >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad option exit code"
echo "ok"
