#!/usr/bin/env bash
# tokenize.sh - `blockdraft tokenize` on the Qwen3 vocabulary and stories260K.
# Expected ids come from the fixtures (llama.cpp's output in cases.tsv, the
# llama2.c prompt ids in the stories260K README).
set -u
: "${BD_BIN:?}" "${BD_SHARED:?}"
Q="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
CASES="$BD_SHARED/fixtures/qwen3-tokenizer/cases.tsv"
S="$BD_SHARED/fixtures/stories260K/stories260K.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

check() { # name expected actual
    if [ "$2" == "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=$((fails+1)); fi
}

# Cases from cases.tsv, fed through -f so any byte (NUL, invalid UTF-8) gets
# through unchanged.
for name in upstream-qwen2-11 upstream-qwen2-18 special-chat-prompt literal-im-start literal-think \
            near-eos-s ctrl-nul bad-utf8-ff emoji-zwj-family ws-33-spaces code-python; do
    row=$(awk -F'\t' -v n="$name" '$1 == n' "$CASES")
    [ -n "$row" ] || { echo "FAIL $name: not in cases.tsv"; fails=$((fails+1)); continue; }
    ps=$(printf '%s' "$row" | cut -f2)
    hex=$(printf '%s' "$row" | cut -f3)
    want=$(printf '%s' "$row" | cut -f4)
    python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))' "$hex" > "$tmp/in"
    flags=()
    [ "$ps" = 0 ] && flags+=(--no-parse-special)
    got=$("$BD_BIN" tokenize -m "$Q" "${flags[@]}" -f "$tmp/in")
    check "qwen3 $name" "$want" "$got"
done

check "qwen3 positional" "9707 1879" "$("$BD_BIN" tokenize -m "$Q" "Hello world")"
check "qwen3 --no-bos (add_bos is false anyway)" "9707 1879" "$("$BD_BIN" tokenize -m "$Q" --no-bos "Hello world")"
check "qwen3 --json" '{"ids": [151644, 872, 198, 13048, 151645]}' \
      "$("$BD_BIN" tokenize -m "$Q" --json $'<|im_start|>user\nHi<|im_end|>')"
check "qwen3 --json --pieces" '{"ids": [9707, 1879], "pieces": ["Hello", " world"]}' \
      "$("$BD_BIN" tokenize -m "$Q" --json --pieces "Hello world")"
check "qwen3 --pieces" $'9707\tHello\n1879\t world' "$("$BD_BIN" tokenize -m "$Q" --pieces "Hello world")"

check "stories BOS + prompt" "1 403 407 261 378" "$("$BD_BIN" tokenize -m "$S" "Once upon a time")"
check "stories --no-bos" "403 407 261 378" "$("$BD_BIN" tokenize -m "$S" --no-bos "Once upon a time")"
check "stories --json" '{"ids": [1, 403, 407, 261, 378]}' "$("$BD_BIN" tokenize -m "$S" --json "Once upon a time")"

"$BD_BIN" tokenize -m "$tmp/missing.gguf" "x" > /dev/null 2>&1
check "missing file exits 1" 1 $?
"$BD_BIN" tokenize -m "$Q" > /dev/null 2>&1
check "no text exits 2" 2 $?
# Not a GGUF file at all: a clean error, no crash.
printf 'not a gguf' > "$tmp/bad.gguf"
"$BD_BIN" tokenize -m "$tmp/bad.gguf" "x" > /dev/null 2>&1
check "bad file exits 1" 1 $?

[ "$fails" -eq 0 ]
