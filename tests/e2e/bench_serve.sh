#!/usr/bin/env bash
# bench_serve.sh - the plumbing of tools/bench-serve.sh, without judging a
# speed: on the stories260K pair it prints one line per request with the
# token count and the speculative counts, the adaptive default, and with
# `-- --no-spec-adaptive` the fixed length; a plain server's lines carry no
# speculative part; a bad option and a missing model fail with a message.
set -euo pipefail
: "${BD_BIN:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
S="$BD_SHARED/fixtures/stories260K"
BS="$ROOT/tools/bench-serve.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
out=$(BD_BIN="$BD_BIN" "$BS" -m "$S/stories260K.gguf" -md "$S/stories260K-dflash.gguf" -r 2 -n 16 -t 1)
echo "$out"
[ "$(echo "$out" | grep -c '^request [12]: 16 tokens, [0-9.]* tok/s, drafted [0-9]* accepted [0-9]*, adaptive true$')" = 2 ] ||
    fail "two request lines with the adaptive default expected"
echo "$out" | grep -q "serve: loaded .*speculative draft-dflash, adaptive draft length" || fail "no load line"
out=$(BD_BIN="$BD_BIN" "$BS" -m "$S/stories260K.gguf" -md "$S/stories260K-dflash.gguf" -r 1 -n 16 -t 1 -- --no-spec-adaptive)
echo "$out" | grep -q '^request 1: 16 tokens, .*, adaptive false$' || fail "--no-spec-adaptive not passed to serve"
out=$(BD_BIN="$BD_BIN" "$BS" -m "$S/stories260K.gguf" -r 1 -n 8 -t 1)
echo "$out" | grep -qx 'request 1: 8 tokens, [0-9.]* tok/s' || fail "plain request line: $out"
if BD_BIN="$BD_BIN" "$BS" -m "$S/stories260K.gguf" -x >/dev/null 2>"$T/err"; then
    fail "an unknown option was accepted"
fi
grep -q "unknown option" "$T/err" || fail "no message for an unknown option"
if BD_BIN="$BD_BIN" "$BS" -m /nonexistent.gguf >/dev/null 2>"$T/err"; then
    fail "a missing model was accepted"
fi
grep -q "nonexistent" "$T/err" || fail "no message naming the missing model"
bash -n "$BS"
echo "bench_serve: ok"
