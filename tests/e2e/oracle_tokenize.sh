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
# 4. The llama3 pre-tokenizer family on the qwen3 vocabulary with a few
#    tokens and merges added (bd-gguf-edit): digit runs of up to three (the
#    added "12", "123", "45" make them visible), a word that is a token as
#    a whole but that no merge reaches (ignore_merges: "Ġzqxj"), and BOS
#    added by default when the file has no add_bos_token key; smaug-bpe
#    takes the same regex without those two. tekken (Mistral) on the same
#    file: letter runs split by ASCII case (the added merge "z Q" joins
#    "zQv" and "qzQ" into the token "zQ" under the other regexes, never
#    across tekken's "z" | "Qv" and "qz" | "Q"), single digits, marks as punctuation, no contractions,
#    BOS and whole-token words as llama3.
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
# ---- 4: llama3-family pre-tokenizers ------------------------------------------
EDIT="$BD_BUILD/tests/bd-gguf-edit"
texts+=(
    "Numbers 1234567 and 12 345 6789.5 x123y 4512 0.12345"
    "a zqxj b zqxjk Zqxj zqxj"
    "Arabic-Indic ١٢٣٤٥ and full-width １２３４ digits"
    "zQv qzQ HelloWorld helloWORLD HTTPServer McDonald's iPhone ÉCOLE école ΣΊΣΥΦΟΣ σίσυφος"
    $'path/to/file.txt\r\n// comment //\n  x/\ny \t\n'
    $'e\u0301te\u0301 cafe\u0301 naïve Zürich A\u030AB don\'t I\'M y\'all \'QUOTE\' 2\u00B2 \u2167x'
)
for pre in llama-bpe llama3 smaug-bpe qwen2 tekken; do
    m="$W/vocab-$pre.gguf"
    "$EDIT" "$QV" "$m" --set-str tokenizer.ggml.pre "$pre" --drop-key tokenizer.ggml.add_bos_token \
        --add-tokens "12,123,45,Ġzqxj,zQ" --add-merges "1 2,12 3,4 5,z Q" ||
        { echo "FAIL: bd-gguf-edit ($pre)"; fail=1; continue; }
    for t in "${texts[@]}"; do
        printf '%s' "$t" >"$W/x.txt"
        o=$("$ORACLE" tokenize -m "$m" "$t") || { echo "FAIL: bd-oracle tokenize ($pre)"; fail=1; continue; }
        b=$("$BD_BIN" tokenize -m "$m" --json -f "$W/x.txt" 2>&1)
        if ! python3 -c 'import json,sys; a=json.loads(sys.argv[1])["ids"]; b=json.loads(sys.argv[2])["ids"]; sys.exit(0 if a==b else 1)' "$o" "$b" 2>/dev/null; then
            echo "FAIL: pre $pre text $(printf '%q' "$t"): oracle $o blockdraft $b"
            fail=1
        fi
    done
done
[ $fail -eq 0 ] && echo "oracle_tokenize: all tokenizations match llama.cpp" || { echo "oracle_tokenize: FAILED"; exit 1; }
