#!/usr/bin/env bash
# run.sh BUILD [PATTERN] - run every unit test binary and end-to-end script.
#
# Unit tests are cmocka programs in BUILD/tests/; end-to-end tests are
# tests/e2e/*.sh, run with BD_BIN (the blockdraft binary), BD_BUILD and
# BD_SHARED (the shared/ folder beside the checkout) in the environment.
# A script exits 0 for pass, 77 for "cannot run here" (reported as a
# failure unless BD_ALLOW_SKIP=1: a skipped check is not a pass).
# A unit test program that passes but skipped some of its tests (cmocka
# skip(), e.g. kernels for an ISA this CPU lacks) is shown with how many
# and why ("PASS test_kernels (1 skipped: amx: CPU lacks amx-tile
# amx-int8)"), from the "skip: TEST: REASON" lines the tests print; a skip
# without such a line is shown with "reason not given".
# Prints one line per test and "N passed, N failed" last.
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PATTERN=${2:-}
case "$BUILD" in /*) export BD_BUILD="$BUILD" ;; *) export BD_BUILD="$PWD/$BUILD" ;; esac
export BD_BIN="$BD_BUILD/blockdraft"
export BD_SHARED="${BD_SHARED:-$(cd .. && pwd)/shared}"
export BD_ROOT="$PWD"
logdir="$BD_BUILD/test-logs"
mkdir -p "$logdir"
pass=0 fail=0 skip=0 subskip=0
failed=()
# sets note to " (N skipped: REASON; REASON)" for a cmocka log, or ""
skipped_note() {
    local log=$1 n reasons
    note=""
    n=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test(s), listed below:$/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
    [ -n "$n" ] && [ "$n" -gt 0 ] || return 0
    subskip=$((subskip + n))
    reasons=$(sed -n 's/^skip: [A-Za-z0-9_]*: //p' "$log" | awk 'BEGIN{ORS=""} {if (NR > 1) print "; "; print}')
    [ -n "$reasons" ] || reasons="reason not given"
    [ "$(grep -c '^skip: ' "$log")" -lt "$n" ] && reasons="$reasons; some without a reason given"
    note=" ($n skipped: $reasons)"
}
run_one() {
    local name=$1; shift
    local t0=$(date +%s%N)
    "$@" >"$logdir/$name.log" 2>&1
    local rc=$?
    local dt=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN{printf "%.1f", (b-a)/1e9}')
    if [ $rc -eq 0 ]; then
        skipped_note "$logdir/$name.log"
        pass=$((pass+1)); printf 'PASS  %-40s %6ss%s\n' "$name" "$dt" "$note"
    elif [ $rc -eq 77 ] && [ "${BD_ALLOW_SKIP:-0}" = 1 ]; then
        skip=$((skip+1)); printf 'SKIP  %-40s %6ss\n' "$name" "$dt"
    else
        fail=$((fail+1)); failed+=("$name"); printf 'FAIL  %-40s %6ss (rc=%d, log: %s)\n' "$name" "$dt" $rc "$logdir/$name.log"
        tail -n 25 "$logdir/$name.log" | sed 's/^/      | /'
    fi
}
for t in "$BD_BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    [ -n "$PATTERN" ] && [[ "$n" != *$PATTERN* ]] && continue
    run_one "$n" "$t"
done
for s in tests/e2e/*.sh; do
    [ -f "$s" ] || continue
    n=$(basename "$s" .sh)
    [ -n "$PATTERN" ] && [[ "$n" != *$PATTERN* ]] && continue
    run_one "e2e_$n" bash "$s"
done
echo
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
note=""
[ $subskip -gt 0 ] && note=" ($subskip skipped unit test(s) inside passing programs, reasons above)"
if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped$note"; else echo "$pass passed, $fail failed$note"; fi
[ $fail -eq 0 ]
