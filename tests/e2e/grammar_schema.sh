#!/usr/bin/env bash
# grammar_schema.sh - structured output end to end, judged by a real JSON
# Schema validator (ajv 2020-12 + ajv-formats, installed with npm into
# $BD_BUILD/grammar-node the first time; tests/grammar/package.json pins
# the versions; without the npm registry this test fails, saying so).
#
# Suite: tests/grammar/schemas.json, 42 schemas (nested objects, optional
# properties, enums, const, arrays, tuples, $ref/$defs, recursion, anyOf,
# oneOf, type lists, formats, integer ranges, ...), each with valid and
# invalid instances.
#  1. Conversion: for every instance, the grammar from `json_schema_to_gbnf`
#     accepts it exactly when ajv says it is valid (and ajv agrees with the
#     suite's label).
#  2. Generation (39 schemas whose language is finite, so that a random
#     model must finish): `blockdraft run --json-schema-file` with
#       q-*  a generated qwen3 tiny model with the Qwen3 vocabulary (151936
#            tokens: the real trie, multi-byte pieces), at temperature 0 and
#            1, each without and with a random DFlash drafter;
#       s-*  stories260K with its trained DFlash drafter at temperature 0
#            (drafts are often right, in the long strings of the story
#            schemas above all, so accepted drafts advance the grammar state
#            inside a verify step; at least 100 must be accepted);
#     every output must end by itself, parse, and be valid for the schema
#     (100 %), and temperature-0 outputs with and without the drafter must
#     be token-identical.
set -euo pipefail
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
SUITE="$BD_ROOT/tests/grammar/schemas.json"
QV="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
S="$BD_SHARED/fixtures/stories260K"
CHECK="$BD_BUILD/tests/bd-grammar-check"
[ -x "$CHECK" ] || fail "$CHECK is not built (make tests)"

command -v node >/dev/null || fail "node (Node.js 18+) is not installed"
command -v npm >/dev/null || fail "npm is not installed"
NODE_DIR="$BD_BUILD/grammar-node"
mkdir -p "$NODE_DIR"
cp "$BD_ROOT/tests/grammar/package.json" "$BD_ROOT/tests/grammar/suite.mjs" "$NODE_DIR/"
have() { node -e 'try{console.log(require(process.argv[1]).version)}catch(e){console.log("none")}' "$NODE_DIR/node_modules/$1/package.json"; }
want() { node -e 'console.log(require(process.argv[1]).dependencies[process.argv[2]])' "$BD_ROOT/tests/grammar/package.json" "$1"; }
if [ "$(have ajv)" != "$(want ajv)" ] || [ "$(have ajv-formats)" != "$(want ajv-formats)" ]; then
    echo "installing ajv@$(want ajv) and ajv-formats@$(want ajv-formats) with npm into $NODE_DIR"
    (cd "$NODE_DIR" && timeout 180 npm install --no-audit --no-fund --no-save --loglevel=error) >"$T/npm.log" 2>&1 ||
        { cat "$T/npm.log"; fail "npm install of ajv failed (is the npm registry reachable?)"; }
fi

node "$NODE_DIR/suite.mjs" prepare "$SUITE" "$T"
N=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$SUITE")
for ((i = 0; i < N; i++)); do
    "$CHECK" match --schema "$T/s$i.json" < "$T/s$i.inst" > "$T/s$i.verdict" || fail "schema $i: conversion failed"
done

"$BD_BIN" make-model --arch qwen3 --shape tiny --quant q8_0 --seed 3 --vocab "$QV" -o "$T/q.gguf" >/dev/null
"$BD_BIN" make-model --arch dflash --target "$T/q.gguf" --drafter random --layers 2 --quant q8_0 --seed 5 \
    -o "$T/qd.gguf" >/dev/null
GEN=$(python3 -c 'import json,sys; print(" ".join(str(i) for i,s in enumerate(json.load(open(sys.argv[1]))) if s.get("generate", True)))' "$SUITE")
# run_job I MODE: one generation into $T/oI-MODE.json (no file if it fails)
run_job() {
    local i=$1 mode=$2 args
    case $mode in
    q-*) args=(-m "$T/q.gguf" -p "JSON:") ;;
    s-*) args=(-m "$S/stories260K.gguf" -p "Once upon a time") ;;
    esac
    case $mode in
    *-t0*) args+=(--temp 0) ;;
    q-t1) args+=(--temp 1 -s $((100 + i))) ;;
    q-t1-dflash) args+=(--temp 1 -s $((200 + i))) ;;
    esac
    case $mode in
    # fixed draft lengths (--no-spec-adaptive): the adaptive rule would
    # stop drafting where drafts fail, and this checks the drafting path
    q-*-dflash) args+=(-md "$T/qd.gguf" --spec-draft-n-max 1 --no-spec-adaptive) ;; # random drafts: row 0 rejects them
    s-*-dflash) args+=(-md "$S/stories260K-dflash.gguf" --no-spec-adaptive) ;;
    esac
    local out="$T/o$i-$mode.json"
    "$BD_BIN" run "${args[@]}" -c 1024 -n 1000 -t 1 --json -jf "$T/s$i.json" > "$out.tmp" 2> "$out.err" &&
        mv "$out.tmp" "$out" || echo "run $i $mode failed: $(tail -n 3 "$out.err")"
}
export -f run_job
export BD_BIN T S
for i in $GEN; do
    for mode in q-t0 q-t0-dflash q-t1 q-t1-dflash s-t0 s-t0-dflash; do echo "$i $mode"; done
done > "$T/jobs"
# two at a time (each run is single-threaded)
xargs -P 2 -L 1 bash -c 'run_job "$0" "$1"' < "$T/jobs"
echo "$(wc -l < "$T/jobs") runs"
node "$NODE_DIR/suite.mjs" validate "$SUITE" "$T"
