#!/usr/bin/env bash
# Gallery validation after download: drafters in the fork schema, with the
# pre-merge key, or of the wrong width are refused with their message and
# install nothing; a target architecture this build cannot run is marked
# unsupported; strict config parsing and path escapes are refused.
. "${BD_ROOT:?}/tests/e2e/lib/gallery_common.sh" || exit 1

good_entry
pull stories-dflash
[ $RC -eq 0 ] || fail "initial pull"
T_URI="$BASE/files/stories/target.gguf"

refused() { # NAME DRAFTER_FILE MESSAGE
    entry "$1" "$1/t.gguf" "$T_URI" "$TARGET_SHA" "$1/d.gguf" "$BASE/files/bad/$2" "$(sha_of "bad/$2")"
    pull "$1"
    [ $RC -ne 0 ] || fail "$1: bad drafter accepted"
    expect_out "$3"
    expect_out "nothing was installed and the downloaded files were removed"
    [ ! -e "$T/models/$1.yaml" ] || fail "$1: config written"
    [ ! -e "$T/models/$1/d.gguf" ] && [ ! -e "$T/models/$1/t.gguf" ] || fail "$1: files left in place"
    no_partials
    good_intact
    ok "$1 refused"
}
refused fork drafter-fork.gguf "drafter fork/d.gguf refused: drafter uses the fork schema 'dflash-draft'"
refused layerids drafter-layer-ids.gguf "pre-merge key 'dflash.target_layer_ids' instead of 'dflash.target_layers'"
refused width drafter-width96.gguf "drafter width/d.gguf does not fit target width/t.gguf: drafter width 96 (dflash.embedding_length) does not match the target's width 64"

# A target of an architecture this build does not run (gemma3):
# downloaded and verified, recorded as unsupported.
entry q35 q35/t.gguf "$BASE/files/bad/target-gemma3.gguf" "$(sha_of bad/target-gemma3.gguf)" \
    q35/d.gguf "$BASE/files/stories/drafter.gguf" "$DRAFTER_SHA"
pull q35
[ $RC -eq 0 ] || fail "unsupported target pull failed"
expect_out "marked unsupported: architecture 'gemma3' is not supported by blockdraft (supported targets: "
BD list >"$T/out" 2>&1
grep -E '^q35 +unsupported' "$T/out" || { cat "$T/out"; fail "list does not show unsupported"; }
ok "unsupported architecture"

# Strict overrides in an index entry: refused before any download, with
# the index line.
: >"$T/bad-index.yaml"
cp "$T/index.yaml" "$T/index.keep"
: >"$T/index.yaml"
entry typo typo/t.gguf "$BASE/files/stories/target.gguf?typo" "$TARGET_SHA" typo/d.gguf "$BASE/files/stories/drafter.gguf" "$DRAFTER_SHA" \
"      - use_jinja:true
      - spec_typ:draft-dflash"
line=$(grep -n 'spec_typ:' "$T/index.yaml" | cut -d: -f1)
pull typo
[ $RC -ne 0 ] || fail "typo accepted"
expect_out "index.yaml:$line: unknown options key 'spec_typ'"
[ "$(requests_for '/files/stories/target.gguf?typo')" = 0 ] || fail "downloaded before refusing"
ok "unknown options key"

sed -e 's|draft_model: typo/d.gguf|draft_model: ../outside.gguf|' -e 's|spec_typ:|spec_type:|' "$T/index.yaml" >"$T/index2.yaml"
mv "$T/index2.yaml" "$T/index.yaml"
pull typo
[ $RC -ne 0 ] || fail "escaping draft_model accepted"
expect_out "draft_model: '../outside.gguf' contains '..'"
ok "escaping draft_model"

# A symlink inside the models folder that leads outside.
mkdir -p "$T/outside"
ln -s "$T/outside" "$T/models/evil"
: >"$T/index.yaml"
entry evil evil/t.gguf "$T_URI" "$TARGET_SHA" evil/d.gguf "$BASE/files/stories/drafter.gguf" "$DRAFTER_SHA"
pull evil
[ $RC -ne 0 ] || fail "symlink escape accepted"
expect_out "outside the models folder"
[ -z "$(ls -A "$T/outside")" ] || fail "wrote outside the models folder"
ok "symlink escape"
cp "$T/index.keep" "$T/index.yaml"

# Hand-written configs are parsed strictly too.
printf 'name: hand\nparameters:\n  model: stories/stories260K.gguf\noptions:\n  - spec_n_max:4\n  - draft_ctx_size:99\n' >"$T/models/hand.yaml"
printf 'name: hand2\nparameters:\n  model: stories/stories260K.gguf\ncontext_size: 256\ngpu_layrs: 9\n' >"$T/models/hand2.yaml"
BD list >"$T/out" 2>&1; cat "$T/out"
expect_out "hand.yaml:6: unknown options key 'draft_ctx_size'"
expect_out "hand2.yaml:5: unknown key 'gpu_layrs'"
grep -E '^hand +invalid' "$T/out" >/dev/null || fail "hand not invalid"
ok "strict hand-written configs"

BD pull --index "$T/index.yaml" no-such-model >"$T/out" 2>&1 && fail "unknown model accepted"
expect_out "model 'no-such-model' is not in the gallery"
ok "unknown model exits non-zero"
echo "all gallery validation checks passed"
