#!/usr/bin/env bash
# Gallery: clean pull from a local HTTP server, idempotent re-pull, list /
# show, the pulled bundle runs, two concurrent pulls of one model, rm keeps
# shared files, Hugging Face URIs with a mirror endpoint and HF_TOKEN.
. "${BD_ROOT:?}/tests/e2e/lib/gallery_common.sh" || exit 1

good_entry
pull stories-dflash
[ $RC -eq 0 ] || fail "clean pull failed"
expect_out "stories-dflash: installed"
good_intact
grep -q '^draft_model: stories/stories260K-dflash.gguf' "$T/models/stories-dflash.yaml" || fail "config lacks draft_model"
grep -q 'spec_type:draft-dflash' "$T/models/stories-dflash.yaml" || fail "config lacks spec_type"
grep -q '"status": "installed"' "$T/models/.blockdraft/state/stories-dflash.json" || fail "state not installed"
no_partials
ok "clean pull"

n0=$(wc -l <"$T/requests.log")
pull stories-dflash
[ $RC -eq 0 ] || fail "re-pull failed"
expect_out "already present, SHA-256 verified"
[ "$(wc -l <"$T/requests.log")" = "$n0" ] || fail "re-pull downloaded again"
ok "re-pull is a no-op"

BD list >"$T/out" 2>&1 || fail "list failed"
grep -E '^stories-dflash +installed +1\.7 MB' "$T/out" || { cat "$T/out"; fail "list output"; }
BD show stories-dflash >"$T/out" 2>&1 || fail "show failed"
cat "$T/out"
expect_out "status:  installed"
expect_out "fit.width"
expect_out "same tokenizer (512 tokens)"
expect_out "$TARGET_SHA"
ok "list and show"

# The pulled files are a runnable DFlash bundle.
BD run -m "$T/models/stories/stories260K.gguf" -md "$T/models/stories/stories260K-dflash.gguf" \
    -p "Once upon a time" -n 8 --temp 0 >"$T/out" 2>&1 || { cat "$T/out"; fail "run on the pulled bundle"; }
expect_out "Once upon a time, there was a little girl"
ok "pulled bundle runs"

# `run NAME` reads the model config: target, drafter, spec options.
BD run stories-dflash -p "Once upon a time" -n 8 --temp 0 >"$T/out" 2>&1 || { cat "$T/out"; fail "run NAME"; }
expect_out "Once upon a time, there was a little girl"
BD run stories-dflash -p "Once upon a time" -n 8 --temp 0 --json >"$T/out" 2>/dev/null || fail "run NAME --json"
grep -q '"type": *"draft-dflash"' "$T/out" || { cat "$T/out"; fail "run NAME did not use the bundle's drafter"; }
BD run no-such-model -p "x" -n 1 >"$T/out" 2>&1 && fail "run of an unknown name succeeded"
ok "run NAME"

# Two concurrent pulls of one model: one download, one result.
entry stories-slow slow/t.gguf "$BASE/slow/stories/target.gguf" "$TARGET_SHA" \
    slow/d.gguf "$BASE/slow/stories/drafter.gguf" "$DRAFTER_SHA"
BD pull -q --index "$T/index.yaml" stories-slow >"$T/c1" 2>&1 &
p1=$!
BD pull -q --index "$T/index.yaml" stories-slow >"$T/c2" 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
cat "$T/c1" "$T/c2"
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] || fail "concurrent pulls: rc $r1 $r2"
[ "$(sha "$T/models/slow/t.gguf")" = "$TARGET_SHA" ] || fail "concurrent pulls corrupted the target"
[ "$(sha "$T/models/slow/d.gguf")" = "$DRAFTER_SHA" ] || fail "concurrent pulls corrupted the drafter"
[ "$(requests_for /slow/stories/target.gguf)" = 1 ] || fail "target downloaded $(requests_for /slow/stories/target.gguf) times"
grep -q "waiting for another blockdraft process" "$T/c1" "$T/c2" || fail "no process waited for the lock"
no_partials
ok "concurrent pulls"

# rm keeps files another installed model uses.
entry stories-shared stories/stories260K.gguf "$BASE/files/stories/target.gguf" "$TARGET_SHA" \
    shared/d.gguf "$BASE/files/stories/drafter.gguf" "$DRAFTER_SHA"
pull stories-shared
[ $RC -eq 0 ] || fail "pull stories-shared"
BD rm stories-dflash >"$T/out" 2>&1 || fail "rm failed"
cat "$T/out"
expect_out "removed stories/stories260K-dflash.gguf"
expect_out "kept    stories/stories260K.gguf (used by stories-shared)"
[ -f "$T/models/stories/stories260K.gguf" ] || fail "shared target removed"
[ ! -e "$T/models/stories/stories260K-dflash.gguf" ] || fail "drafter not removed"
[ ! -e "$T/models/stories-dflash.yaml" ] || fail "config not removed"
BD rm stories-dflash >"$T/out" 2>&1 && fail "rm of a removed model succeeded"
expect_out "not installed"
ok "rm"

# huggingface:// URIs and https://huggingface.co URIs through a mirror, with
# HF_TOKEN sent to the mirror host only (not to a redirect target on
# another host).
mkdir -p "$T/www/own/repo/resolve/main"
cp "$FIX/stories260K.gguf" "$T/www/own/repo/resolve/main/t.gguf"
cp "$FIX/stories260K-dflash.gguf" "$T/www/own/repo/resolve/main/d.gguf"
entry stories-hf hf/t.gguf "huggingface://own/repo/t.gguf" "$TARGET_SHA" \
    hf/d.gguf "https://huggingface.co/own/repo/resolve/main/d.gguf" "$DRAFTER_SHA"
BLOCKDRAFT_HF_ENDPOINT="$BASE/xhost" HF_TOKEN=sekrit-token pull stories-hf
[ $RC -eq 0 ] || fail "pull via HF mirror"
grep -F '"/xhost/own/repo/resolve/main/t.gguf"' "$T/requests.log" | grep -q 'Bearer sekrit-token' || fail "token not sent to the mirror"
grep -F '"/files/own/repo/resolve/main/t.gguf"' "$T/requests.log" | grep -q '"auth": null' || fail "token leaked to the redirect host"
grep -F '"/files/own/repo/resolve/main/t.gguf"' "$T/requests.log" | grep -q '"host": "localhost' || fail "redirect did not change host"
ok "huggingface URIs, mirror, token"

BD gallery --index "$T/index.yaml" --tag dflash >"$T/out" 2>&1 || fail "gallery failed"
expect_out "stories-hf"
expect_out "qwen3-4b-dflash"
BD gallery --index "$T/index.yaml" --tag moe >"$T/out" 2>&1 || fail "gallery --tag moe failed"
expect_out "qwen3.6-35b-a3b-dflash"
grep -q "stories-hf" "$T/out" && fail "tag filter"
BLOCKDRAFT_GALLERY="$T/index.yaml" BD gallery >"$T/out" 2>&1 || fail "gallery with BLOCKDRAFT_GALLERY"
expect_out "stories-shared"
cp "$T/index.yaml" "$T/www/remote-index.yaml"
BLOCKDRAFT_GALLERY="$T/missing.yaml,$BASE/files/remote-index.yaml" BD gallery >"$T/out" 2>&1 || fail "gallery with a URL index"
expect_out "stories-hf"
expect_out "warning: BLOCKDRAFT_GALLERY: $T/missing.yaml"
ok "gallery listing"
echo "all gallery pull checks passed"
