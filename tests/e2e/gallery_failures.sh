#!/usr/bin/env bash
# Gallery download failures: cut connection (resume), resume across runs,
# 404, 500 then success, persistent 500, stall timeout, redirect chains, a
# lying Content-Length, a SHA-256 mismatch, a missing SHA-256. Each ends in
# its documented state and the installed model stays intact.
. "${BD_ROOT:?}/tests/e2e/lib/gallery_common.sh" || exit 1

good_entry
pull stories-dflash
[ $RC -eq 0 ] || fail "initial pull"
good_intact

D="$BASE/files/stories/drafter.gguf"
SIZE=$(stat -c %s "$FIX/stories260K.gguf")

# Connection cut mid-file: the retry resumes with a Range request.
entry cut cut/t.gguf "$BASE/cut/stories/target.gguf" "$TARGET_SHA" cut/d.gguf "$D" "$DRAFTER_SHA"
pull cut
[ $RC -eq 0 ] || fail "pull after a cut connection"
[ "$(sha "$T/models/cut/t.gguf")" = "$TARGET_SHA" ] || fail "resumed file is wrong"
half=$((SIZE / 2))
grep -F '"/cut/stories/target.gguf"' "$T/requests.log" | grep -q "\"range\": \"bytes=$half-\"" || fail "no resume request from byte $half"
good_intact; no_partials
ok "resume after cut connection"

# A .partial left by an earlier run is resumed, not restarted.
mkdir -p "$T/models/res"
head -c 300000 "$FIX/stories260K.gguf" >"$T/models/res/t.gguf.partial"
entry res res/t.gguf "$BASE/files/stories/target.gguf" "$TARGET_SHA" res/d.gguf "$D" "$DRAFTER_SHA"
pull res
[ $RC -eq 0 ] || fail "pull with an existing partial"
expect_out "resuming after 300.0 KB"
grep -q '"range": "bytes=300000-"' "$T/requests.log" || fail "no Range: bytes=300000-"
[ "$(sha "$T/models/res/t.gguf")" = "$TARGET_SHA" ] || fail "resumed file is wrong"
ok "resume across runs"

# 404: permanent, no retries, nothing installed.
entry e404 e404/t.gguf "$BASE/files/stories/Target.gguf" "$TARGET_SHA" e404/d.gguf "$D" "$DRAFTER_SHA"
pull e404
[ $RC -ne 0 ] || fail "404 pull succeeded"
expect_out "HTTP 404"
[ "$(requests_for /files/stories/Target.gguf)" = 1 ] || fail "404 was retried"
[ ! -e "$T/models/e404.yaml" ] || fail "config written after 404"
good_intact; no_partials
ok "404"

# 500 twice, then success (3 attempts allowed).
entry flaky flaky/t.gguf "$BASE/flaky/stories/target.gguf" "$TARGET_SHA" flaky/d.gguf "$D" "$DRAFTER_SHA"
pull flaky
[ $RC -eq 0 ] || fail "pull after transient 500s"
expect_out "HTTP 500; retrying"
[ "$(requests_for /flaky/stories/target.gguf)" = 3 ] || fail "expected 3 requests"
ok "500 then success"

entry e500 e500/t.gguf "$BASE/always500/stories/target.gguf" "$TARGET_SHA" e500/d.gguf "$D" "$DRAFTER_SHA"
pull e500
[ $RC -ne 0 ] || fail "persistent 500 succeeded"
expect_out "giving up after 3 attempts: HTTP 500"
[ ! -e "$T/models/e500.yaml" ] || fail "config written after 500s"
good_intact; no_partials
ok "persistent 500"

# Stalled server: aborted by the stall timeout, bounded time, partial kept.
entry stall stall/t.gguf "$BASE/stall/stories/target.gguf" "$TARGET_SHA" stall/d.gguf "$D" "$DRAFTER_SHA"
t0=$(date +%s)
pull stall
t1=$(date +%s)
[ $RC -ne 0 ] || fail "stalled pull succeeded"
expect_out "stalled: no data for 1 s"
expect_out "kept in"
[ $((t1 - t0)) -lt 20 ] || fail "stall took $((t1 - t0)) s"
[ ! -e "$T/models/stall/t.gguf" ] || fail "stalled file in place"
good_intact
ok "stall timeout"

# Redirect chains: 3 hops fine, 12 hops refused.
entry redir redir/t.gguf "$BASE/redir/3/stories/target.gguf" "$TARGET_SHA" redir/d.gguf "$D" "$DRAFTER_SHA"
pull redir
[ $RC -eq 0 ] || fail "redirect chain"
[ "$(sha "$T/models/redir/t.gguf")" = "$TARGET_SHA" ] || fail "redirected file wrong"
entry redir12 redir12/t.gguf "$BASE/redir/12/stories/target.gguf" "$TARGET_SHA" redir12/d.gguf "$D" "$DRAFTER_SHA"
pull redir12
[ $RC -ne 0 ] || fail "12 redirects accepted"
expect_out "redirect"
good_intact
ok "redirects"

# Content-Length larger than the body.
entry lie lie/t.gguf "$BASE/lie/stories/target.gguf" "$TARGET_SHA" lie/d.gguf "$D" "$DRAFTER_SHA"
pull lie
[ $RC -ne 0 ] || fail "lying server accepted"
expect_out "Content-Length not honoured"
[ ! -e "$T/models/lie/t.gguf" ] || fail "short file in place"
[ ! -e "$T/models/lie.yaml" ] || fail "config written"
good_intact
ok "lying Content-Length"

# An index SHA-256 that does not match the served bytes: the listed
# version is downloaded once, refused, the partial removed, the installed
# model untouched. (For a file another model owns, the entry is refused
# before any download: gallery_hostile.sh.)
entry badsha badsha/t.gguf "$BASE/files/stories/target.gguf?badsha" "$DRAFTER_SHA" \
    badsha/d.gguf "$D" "$DRAFTER_SHA"
pull badsha
[ $RC -ne 0 ] || fail "SHA mismatch accepted"
expect_out "SHA-256 mismatch for badsha/t.gguf: expected $DRAFTER_SHA, got $TARGET_SHA"
expect_out "partial download was removed"
[ "$(requests_for '/files/stories/target.gguf?badsha')" = 1 ] || fail "mismatch was retried"
[ ! -e "$T/models/badsha/t.gguf.partial" ] || fail "partial left behind"
[ ! -e "$T/models/badsha.yaml" ] || fail "config written"
good_intact
ok "SHA-256 mismatch"

# No SHA-256: refused before any request unless --insecure.
entry nosha nosha/t.gguf "$BASE/files/stories/target.gguf?nosha" "" nosha/d.gguf "$D" "$DRAFTER_SHA"
pull nosha
[ $RC -ne 0 ] || fail "entry without sha256 accepted"
expect_out "has no sha256; refusing"
[ "$(requests_for '/files/stories/target.gguf?nosha')" = 0 ] || fail "downloaded before refusing"
pull --insecure nosha
[ $RC -eq 0 ] || fail "--insecure pull"
ok "missing SHA-256"

BD list >"$T/out" 2>&1; cat "$T/out"
grep -E '^stories-dflash +installed' "$T/out" || fail "good model not listed as installed"
echo "all gallery failure checks passed"
