#!/usr/bin/env bash
# Gallery under a hostile index or server (issue 16): an entry listing
# another installed model's files, configs or state; symlinked and
# hard-linked partial files; bodies larger than announced or endless, and
# write errors; a YAML merge-key bomb; HF_TOKEN and a second port on the
# mirror host; two pulls of overlapping entries locking in opposite order;
# a file:// resume; more than 64 names; terminal escapes in an index;
# `run NAME --help` touching nothing. Every case is bounded in time, and
# the installed model stays intact throughout.
. "${BD_ROOT:?}/tests/e2e/lib/gallery_common.sh" || exit 1
# KEEP_GOING=1: report every failed check instead of stopping at the first
# (to see which checks a build fails).
FAILS=0
if [ "${KEEP_GOING:-0}" = 1 ]; then fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }; fi

D="$BASE/files/stories/drafter.gguf"
TGT="$BASE/files/stories/target.gguf"
SIZE=$(stat -c %s "$FIX/stories260K.gguf")

good_entry
pull stories-dflash
[ $RC -eq 0 ] || fail "initial pull"
good_intact

# raw_entry NAME MODEL FILE SHA URI [FILE SHA URI [SIZE_LINE]]: an entry
# without a drafter whose files are listed as given (any names, any order).
raw_entry() {
    cat >>"$T/index.yaml" <<EOT
- name: $1
  overrides:
    parameters:
      model: $2
  files:
    - filename: $3
      sha256: $4
      uri: $5
EOT
    if [ $# -ge 8 ]; then
        cat >>"$T/index.yaml" <<EOT
    - filename: $6
      sha256: $7
      uri: $8
EOT
    fi
}

# --- 1. another installed model's files, configs and state -------------
# thief's target is stories-dflash's drafter path, with other bytes.
raw_entry thief stories/stories260K-dflash.gguf stories/stories260K-dflash.gguf "$TARGET_SHA" "$TGT"
pull thief
[ $RC -ne 0 ] || fail "an entry replaced another model's file"
expect_out "belongs to the installed model stories-dflash"
good_intact
[ ! -e "$T/models/thief.yaml" ] || fail "thief config written"
# the same bytes may be shared (gallery_pull.sh: stories-shared); another
# model's config and the state folder are never gallery files
printf 'name: stories-dflash\nparameters:\n  model: evil.gguf\n' >"$T/www/evil.yaml"
EVIL_SHA=$(sha "$T/www/evil.yaml")
raw_entry cfgthief cfg/t.gguf cfg/t.gguf "$TARGET_SHA" "$TGT" stories-dflash.yaml "$EVIL_SHA" "$BASE/files/evil.yaml"
pull cfgthief
[ $RC -ne 0 ] || fail "an entry wrote another model's config"
expect_out "'stories-dflash.yaml' is a model config name"
raw_entry statethief st/t.gguf st/t.gguf "$TARGET_SHA" "$TGT" .blockdraft/state/stories-dflash.json "$EVIL_SHA" \
    "$BASE/files/evil.yaml"
pull statethief
[ $RC -ne 0 ] || fail "an entry wrote into .blockdraft"
expect_out "'.blockdraft/state/stories-dflash.json' is inside blockdraft's state folder"
[ "$(requests_for /files/evil.yaml)" = 0 ] || fail "a refused entry downloaded something"
good_intact
grep -q '^  model: stories/stories260K.gguf' "$T/models/stories-dflash.yaml" || \
    grep -q 'model: stories/stories260K.gguf' "$T/models/stories-dflash.yaml" || fail "config rewritten"
ok "files, configs and state of another model are refused"

# --- 2. symlinked / hard-linked partial files --------------------------
mkdir -p "$T/outside" "$T/models/sym" "$T/models/hl"
echo precious >"$T/outside/victim"
echo precious >"$T/outside/victim2"
ln -s "$T/outside/victim" "$T/models/sym/t.gguf.partial"
ln "$T/outside/victim2" "$T/models/hl/t.gguf.partial"
entry sym sym/t.gguf "$TGT" "$TARGET_SHA" sym/d.gguf "$D" "$DRAFTER_SHA"
pull sym
[ $RC -ne 0 ] || fail "pull through a symlinked partial succeeded"
expect_out "is not a regular file"
entry hl hl/t.gguf "$TGT" "$TARGET_SHA" hl/d.gguf "$D" "$DRAFTER_SHA"
pull hl
[ $RC -ne 0 ] || fail "pull through a hard-linked partial succeeded"
expect_out "has other links"
[ "$(cat "$T/outside/victim")" = precious ] || fail "a file outside the models folder was changed through a symlink"
[ "$(cat "$T/outside/victim2")" = precious ] || fail "a file outside the models folder was changed through a hard link"
ok "symlinked and hard-linked partials refused; outside files untouched"

# --- 3. bodies beyond the announced or listed size; write errors --------
cat >>"$T/index.yaml" <<EOT
- name: endless
  overrides:
    parameters:
      model: big/t.gguf
  files:
    - filename: big/t.gguf
      sha256: $TARGET_SHA
      uri: $BASE/endless/stories/target.gguf
      size: $SIZE
- name: small
  overrides:
    parameters:
      model: small/t.gguf
  files:
    - filename: small/t.gguf
      sha256: $TARGET_SHA
      uri: $TGT?small
      size: 1000
EOT
t0=$(date +%s)
pull endless
[ $RC -ne 0 ] || fail "endless body accepted"
expect_out "sent more than the $SIZE bytes the index lists"
[ $(($(date +%s) - t0)) -lt 20 ] || fail "endless body took too long"
[ ! -e "$T/models/big/t.gguf.partial" ] || fail "partial of an oversized body kept"
pull small
[ $RC -ne 0 ] || fail "a file larger than the index says was accepted"
expect_out "announces $SIZE bytes; the index lists 1000"
# no size in the index: the per-file cap (BLOCKDRAFT_MAX_FILE_SIZE)
raw_entry capped cap/t.gguf cap/t.gguf "$TARGET_SHA" "$BASE/endless/stories/target.gguf?cap"
BLOCKDRAFT_MAX_FILE_SIZE=4000000 pull capped
[ $RC -ne 0 ] || fail "endless body without a size accepted"
expect_out "more than the limit of 4000000 bytes"
[ ! -e "$T/models/cap/t.gguf.partial" ] || fail "partial over the cap kept"
# a write error (file size limit: EFBIG, as ENOSPC would be) removes the partial
raw_entry wr wr/t.gguf wr/t.gguf "$TARGET_SHA" "$TGT?wr"
(trap '' XFSZ; ulimit -f 200; exec "$BD_BIN" pull --index "$T/index.yaml" wr) >"$T/out" 2>&1
RC=$?
cat "$T/out"
[ $RC -ne 0 ] || fail "pull past the file size limit succeeded"
expect_out "cannot write"
expect_out "partial download was removed"
[ ! -e "$T/models/wr/t.gguf.partial" ] || fail "unverifiable partial kept after a write error"
good_intact
ok "oversized and endless bodies stop; write errors remove the partial"

# --- 11. YAML merge-key bomb -------------------------------------------
{
    echo "- name: defs"
    echo "  d0: &a0 {k: v}"
    for i in 1 2 3 4 5 6; do
        refs=$(for _ in $(seq 20); do printf '*a%d, ' $((i - 1)); done)
        echo "  d$i: &a$i {<<: [${refs%, }]}"
    done
    refs=$(for _ in $(seq 20); do printf '*a6, '; done)
    echo "- <<: [${refs%, }]"
    echo "  name: bomb"
    echo "  overrides: {<<: [${refs%, }], parameters: {model: x.gguf}}"
} >"$T/bomb.yaml"
wc -c "$T/bomb.yaml"
t0=$(date +%s%N)
timeout 20 "$BD_BIN" gallery --index "$T/bomb.yaml" >"$T/out" 2>&1
rc=$?
dt=$((($(date +%s%N) - t0) / 1000000))
cat "$T/out"
[ $rc -ne 124 ] || fail "gallery hangs on a merge-key bomb"
[ $dt -lt 5000 ] || fail "merge-key bomb took $dt ms"
expect_out "bomb"
timeout 20 "$BD_BIN" pull --index "$T/bomb.yaml" bomb >"$T/out" 2>&1
[ $? -ne 124 ] || fail "pull hangs on a merge-key bomb"
ok "merge-key bomb read in $dt ms"

# --- 9. HF_TOKEN only to the exact mirror origin ------------------------
python3 "$BD_ROOT/tests/e2e/lib/gallery_server.py" "$T/www" "$T/port2" "$T/requests2.log" &
SRV2=$!
for _ in $(seq 100); do [ -s "$T/port2" ] && break; sleep 0.05; done
P2=$(cat "$T/port2")
entry tokport tp/t.gguf "http://127.0.0.1:$P2/files/stories/target.gguf" "$TARGET_SHA" \
    tp/d.gguf "$BASE/portredir/$P2/stories/drafter.gguf" "$DRAFTER_SHA"
BLOCKDRAFT_HF_ENDPOINT="$BASE" HF_TOKEN=sekrit-token pull tokport
kill $SRV2 2>/dev/null
[ $RC -eq 0 ] || fail "pull from a second port"
grep -F '/portredir/' "$T/requests.log" | grep -q 'Bearer sekrit-token' || fail "token not sent to the mirror origin"
[ "$(grep -c . "$T/requests2.log")" -ge 2 ] || fail "second port not used"
grep -q sekrit "$T/requests2.log" && fail "HF_TOKEN sent to another port of the mirror host"
ok "HF_TOKEN reaches the mirror origin only, not another port (direct or redirected)"

# --- 10. overlapping entries, files in opposite order -------------------
cat >>"$T/index.yaml" <<EOT
- name: ov1
  overrides: {parameters: {model: ov/x.gguf}, draft_model: ov/y.gguf}
  files:
    - {filename: ov/x.gguf, sha256: $TARGET_SHA, uri: "$BASE/slow/stories/target.gguf?1"}
    - {filename: ov/y.gguf, sha256: $DRAFTER_SHA, uri: "$BASE/slow/stories/drafter.gguf?1"}
- name: ov2
  overrides: {parameters: {model: ov/x.gguf}, draft_model: ov/y.gguf}
  files:
    - {filename: ov/y.gguf, sha256: $DRAFTER_SHA, uri: "$BASE/slow/stories/drafter.gguf?2"}
    - {filename: ov/x.gguf, sha256: $TARGET_SHA, uri: "$BASE/slow/stories/target.gguf?2"}
EOT
t0=$(date +%s)
timeout 40 "$BD_BIN" pull -q --index "$T/index.yaml" ov1 >"$T/o1" 2>&1 &
q1=$!
timeout 40 "$BD_BIN" pull -q --index "$T/index.yaml" ov2 >"$T/o2" 2>&1 &
q2=$!
wait $q1; r1=$?
wait $q2; r2=$?
dt=$(($(date +%s) - t0))
cat "$T/o1" "$T/o2"
[ $r1 -ne 124 ] && [ $r2 -ne 124 ] || fail "pulls of overlapping entries deadlocked (killed after 40 s)"
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] || fail "overlapping pulls: rc $r1 $r2"
[ $dt -lt 30 ] || fail "overlapping pulls took $dt s"
[ "$(sha "$T/models/ov/x.gguf")" = "$TARGET_SHA" ] || fail "overlapping pulls corrupted x"
ok "overlapping entries in opposite order both finish ($dt s)"

# --- 20. file:// resume --------------------------------------------------
mkdir -p "$T/models/fres"
head -c 300000 "$FIX/stories260K.gguf" >"$T/models/fres/t.gguf.partial"
entry fres fres/t.gguf "file://$T/www/stories/target.gguf" "$TARGET_SHA" fres/d.gguf "file://$T/www/stories/drafter.gguf" \
    "$DRAFTER_SHA"
pull fres
[ $RC -eq 0 ] || fail "file:// resume"
grep -qi mismatch "$T/out" && fail "file:// resume reported a SHA-256 mismatch"
expect_out "resuming after 300.0 KB"
[ "$(sha "$T/models/fres/t.gguf")" = "$TARGET_SHA" ] || fail "file:// resumed file is wrong"
ok "file:// resume continues the partial"

# --- 19. more than 64 names ----------------------------------------------
names=$(for _ in $(seq 64); do printf 'stories-dflash '; done)
# shellcheck disable=SC2086
"$BD_BIN" pull -q --index "$T/index.yaml" $names no-such-entry-65 >"$T/out" 2>&1
RC=$?
[ $RC -ne 0 ] || fail "pull ignored its 65th name and exited 0"
expect_out "no-such-entry-65"
ok "the 65th name is not ignored"

# --- 22. terminal escapes from an index ----------------------------------
cat >"$T/esc.yaml" <<'EOT'
- name: "esc\e[31mred"
  description: "title \e]0;owned\a and \e[2J clear\x9b"
  tags: ["t\e[5m"]
  overrides: {parameters: {model: e.gguf}}
EOT
"$BD_BIN" gallery -v --index "$T/esc.yaml" >"$T/out" 2>&1
cat -v "$T/out"
grep -q $'\x1b' "$T/out" && fail "ESC from an index reached the terminal"
grep -q $'\x07' "$T/out" && fail "BEL from an index reached the terminal"
grep -q $'\xc2\x9b' "$T/out" && fail "C1 CSI from an index reached the terminal"
expect_out 'esc\x1b[31mred'
ok "control bytes in an index are escaped"

# --- 18. run NAME --help / a bad option download nothing -----------------
entry helpme helpme/t.gguf "$TGT?helpme" "$TARGET_SHA" helpme/d.gguf "$D?helpme" "$DRAFTER_SHA"
BLOCKDRAFT_GALLERY="$T/index.yaml" "$BD_BIN" run helpme --help >"$T/out" 2>&1
[ $? -eq 0 ] || fail "run NAME --help"
BLOCKDRAFT_GALLERY="$T/index.yaml" "$BD_BIN" run helpme -p x --no-such-option >"$T/out" 2>&1
[ $? -eq 2 ] || fail "run NAME with a bad option is not a usage error"
expect_out "unknown option '--no-such-option'"
[ "$(requests_for '/files/stories/target.gguf?helpme')" = 0 ] || fail "run NAME --help downloaded the model"
[ ! -e "$T/models/helpme.yaml" ] && [ ! -e "$T/models/helpme" ] || fail "run NAME --help installed something"
ok "run NAME --help and a mistyped option download nothing"

good_intact
[ $FAILS -eq 0 ] || { echo "$FAILS checks failed"; exit 1; }
echo "all hostile gallery checks passed"
