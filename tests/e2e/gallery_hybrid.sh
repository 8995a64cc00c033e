#!/usr/bin/env bash
# Hybrid (qwen35 / qwen35moe) and qwen3moe bundles in the gallery and at load:
# * a qwen35 target + DFlash drafter bundle, a qwen35moe one (with an MTP
#   block) and a qwen3moe one validate and install as "installed", and `blockdraft run NAME`
#   runs them with the drafter, token-identical to plain decoding;
# * pairs that must not run are refused at pull (nothing installed) and at
#   load (`run -m T -md D`), with the same message: a drafter tapping the
#   MTP block (not a trunk layer), a drafter of another width, a drafter of
#   another vocabulary, and a Qwen3 drafter (151936-token vocabulary) on a
#   Qwen3.5-sized target (248320 tokens).
. "${BD_ROOT:?}/tests/e2e/lib/gallery_common.sh" || exit 1
ST="$FIX/stories260K.gguf"
QV="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
EDIT="$BD_BUILD/tests/bd-gguf-edit"
H="$T/www/hybrid"
mkdir -p "$H"
mm() { BD make-model "$@" >/dev/null 2>"$T/mm.err" || fail "make-model $*: $(tail -1 "$T/mm.err")"; }
mm --arch qwen35 --shape tiny --quant q8_0 --seed 3 --vocab "$ST" -o "$H/t.gguf"
mm --arch dflash --target "$H/t.gguf" --drafter random --layers 2 --taps 2 --quant q8_0 --seed 1 -o "$H/d.gguf"
mm --arch qwen35moe --shape tiny --quant q8_0 --seed 4 --mtp 1 --vocab "$ST" -o "$H/tm.gguf"
mm --arch dflash --target "$H/tm.gguf" --drafter random --layers 2 --taps 2 --quant q8_0 --seed 2 -o "$H/dm.gguf"
mm --arch qwen3moe --shape tiny --quant q8_0 --seed 8 --vocab "$ST" -o "$H/tq.gguf"
mm --arch dflash --target "$H/tq.gguf" --drafter random --layers 2 --taps 2 --quant q8_0 --seed 3 -o "$H/dq.gguf"
# bad drafters
"$EDIT" "$H/dm.gguf" "$H/d-mtp.gguf" --set-i32s dflash.target_layers 1,4 || fail "bd-gguf-edit"
mm --arch qwen35 --shape small --quant q8_0 --seed 5 --vocab "$ST" -o "$H/small.gguf"
mm --arch dflash --target "$H/small.gguf" --drafter random --layers 2 --taps 2 --quant q8_0 -o "$H/d-width.gguf"
mm --arch qwen35 --shape tiny --quant q8_0 --seed 3 --vocab "$ST" --n-vocab 600 -o "$H/t600.gguf"
mm --arch dflash --target "$H/t600.gguf" --drafter random --layers 2 --taps 2 --quant q8_0 --mask-id 10 \
    -o "$H/d-vocab.gguf"
mm --arch qwen35 --shape tiny --quant q8_0 --seed 6 --vocab "$QV" --n-vocab 248320 -o "$H/t35.gguf"
mm --arch qwen3 --shape tiny --quant q8_0 --seed 7 --vocab "$QV" -o "$H/t3.gguf"
mm --arch dflash --target "$H/t3.gguf" --drafter random --layers 2 --taps 2 --quant q8_0 -o "$H/d-qwen3.gguf"

# ---- good bundles ------------------------------------------------------------
hentry() { entry "$1" "$1/t.gguf" "$BASE/files/hybrid/$2" "$(sha_of "hybrid/$2")" "$1/d.gguf" \
    "$BASE/files/hybrid/$3" "$(sha_of "hybrid/$3")"; }
hentry q35-dflash t.gguf d.gguf
hentry q35moe-dflash tm.gguf dm.gguf
hentry q3moe-dflash tq.gguf dq.gguf
for name in q35-dflash q35moe-dflash q3moe-dflash; do
    pull $name
    [ $RC -eq 0 ] || fail "$name: pull failed"
    BD list >"$T/out" 2>&1
    grep -E "^$name +installed" "$T/out" >/dev/null || { cat "$T/out"; fail "$name not installed"; }
    BD run $name -p "Once upon a time" -n 24 --temp 0 --ignore-eos --json -t 2 >"$T/spec.json" 2>"$T/err" ||
        fail "run $name: $(tail -2 "$T/err")"
    t=$H/t.gguf; [ $name = q35moe-dflash ] && t=$H/tm.gguf; [ $name = q3moe-dflash ] && t=$H/tq.gguf
    BD run -m "$t" -p "Once upon a time" -n 24 --temp 0 --ignore-eos --json -t 2 >"$T/plain.json" 2>"$T/err" ||
        fail "plain run: $(tail -2 "$T/err")"
    python3 - "$T/spec.json" "$T/plain.json" <<'PY' || fail "$name: speculative run differs from plain decoding"
import json, sys
s, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert s["stats"]["spec"]["type"] == "draft-dflash", s["stats"]["spec"]
assert s["stats"]["spec"]["n_drafted"] > 0
assert s["generated_ids"] == p["generated_ids"], (s["generated_ids"], p["generated_ids"])
PY
    ok "$name installed and runs with its drafter"
done

# ---- pairs refused at pull and at load -----------------------------------------
refused() { # NAME TARGET DRAFTER MESSAGE
    hentry "$1" "$2" "$3"
    pull "$1"
    [ $RC -ne 0 ] || fail "$1: bad pair accepted at pull"
    expect_out "$4"
    expect_out "nothing was installed"
    [ ! -e "$T/models/$1.yaml" ] || fail "$1: config written"
    BD run -m "$H/$2" -md "$H/$3" -p "Once" -n 2 -t 1 >"$T/out" 2>&1 && fail "$1: bad pair accepted at load"
    expect_out "$4"
    ok "$1 refused at pull and at load"
}
refused mtp-tap tm.gguf d-mtp.gguf "dflash.target_layers[1] = 4 is outside the target's trunk layers 0..3"
refused width t.gguf d-width.gguf "drafter width 512 (dflash.embedding_length) does not match the target's width 256"
refused vocab t.gguf d-vocab.gguf "vocabularies differ in size: target 512 tokens, drafter 600"
refused qwen3-drafter t35.gguf d-qwen3.gguf "tokenizer.ggml.pre differs: target 'qwen35', drafter 'qwen2'"
echo "all hybrid gallery checks passed"
