#!/usr/bin/env bash
# oracle_tokenize.sh - blockdraft's tokenizers against llama.cpp v0.5.0.
#
# 1. bd-oracle must reproduce the qwen3 fixture table (cases.tsv, made with
#    llama.cpp's llama_tokenize; the README lists where llama.cpp and the
#    Hugging Face tokenizer differ: no NFC, `</s>` special, ...). This
#    checks the harness itself.
# 2. blockdraft tokenize (add_special off, parse_special per case) must give
#    the oracle's ids for every case, fed as raw bytes from a file.
# 3. Extra texts (not in the table) through both tokenizers: the qwen3 BPE
#    and the stories260K SPM vocabulary (with its BOS).
set -u
: "${BD_BIN:?}" "${BD_BUILD:?}" "${BD_SHARED:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
CMP="python3 $ROOT/tests/oracle/compare.py"
ORACLE=$("$ROOT/tests/oracle/setup.sh") || { echo "FAIL: cannot build the llama.cpp oracle (tests/oracle/setup.sh)"; exit 1; }
QV="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
ST="$BD_SHARED/fixtures/stories260K/stories260K.gguf"
CASES="$BD_SHARED/fixtures/qwen3-tokenizer/cases.tsv"
W="$BD_BUILD/oracle-tokenize"
rm -rf "$W"
mkdir -p "$W"
fail=0

# ---- 1 + 2: the case table ------------------------------------------------
grep -v '^#' "$CASES" | tail -n +2 | awk -F'\t' '{print $2 "\t" $3}' >"$W/cases.in"
"$ORACLE" tokenize -m "$QV" --batch <"$W/cases.in" >"$W/oracle.jsonl" || { echo "FAIL: bd-oracle tokenize --batch"; exit 1; }
# Inputs as raw byte files (one python run), then one blockdraft run per case.
python3 - "$W" "$W/cases.in" <<'PY'
import sys
w = sys.argv[1]
for i, line in enumerate(open(sys.argv[2]), 1):
    ps, hx = line.rstrip("\n").split("\t")
    open(f"{w}/in.{i}", "wb").write(bytes.fromhex(hx))
PY
n=$(wc -l <"$W/cases.in")
i=0
while IFS=$'\t' read -r ps hex; do
    i=$((i + 1))
    extra=""
    [ "$ps" = 0 ] && extra="--no-parse-special"
    "$BD_BIN" tokenize -m "$QV" --json --no-bos $extra -f "$W/in.$i" >"$W/bd.$i" 2>"$W/bd.$i.err" ||
        echo '{"ids":"error"}' >"$W/bd.$i"
done <"$W/cases.in"
python3 - "$W" "$n" >"$W/bd.jsonl" <<'PY'
import json, sys
w, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    try:
        ids = json.load(open(f"{w}/bd.{i}")).get("ids")
    except (OSError, ValueError):
        ids = "unparsable"
    print(json.dumps({"ids": ids}))
PY
$CMP tokens "$CASES" "$W/oracle.jsonl" "$W/bd.jsonl" || fail=1

# ---- 3: extra texts ----------------------------------------------------------
texts=(
    "Once upon a time, there was a little girl named Lily."
    "  leading spaces and trailing  "
    "Tom's dog didn't bark; they'll see—it's 42°C at 10:30!"
    $'line one\nline two\n\n\tindented'
    "mixed UPPER lower 12345 67.89 e-mail@example.com"
    "Привет, мир! こんにちは 世界 🙂👍🏽"
)
for model in "$QV" "$ST"; do
    for t in "${texts[@]}"; do
        printf '%s' "$t" >"$W/x.txt"
        o=$("$ORACLE" tokenize -m "$model" "$t") || { echo "FAIL: bd-oracle tokenize"; fail=1; continue; }
        b=$("$BD_BIN" tokenize -m "$model" --json -f "$W/x.txt" 2>&1)
        if ! python3 -c 'import json,sys; a=json.loads(sys.argv[1])["ids"]; b=json.loads(sys.argv[2])["ids"]; sys.exit(0 if a==b else 1)' "$o" "$b" 2>/dev/null; then
            echo "FAIL: $(basename "$model") text $(printf '%q' "$t"): oracle $o blockdraft $b"
            fail=1
        fi
    done
done
[ $fail -eq 0 ] && echo "oracle_tokenize: all tokenizations match llama.cpp" || { echo "oracle_tokenize: FAILED"; exit 1; }
