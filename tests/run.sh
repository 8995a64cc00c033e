#!/usr/bin/env bash
# run.sh BUILD [PATTERN] - run every unit test binary and end-to-end script.
#
# Unit tests are cmocka programs in BUILD/tests/; end-to-end tests are
# tests/e2e/*.sh, run with BD_BIN (the blockdraft binary), BD_BUILD and
# BD_SHARED (the shared/ folder beside the checkout) in the environment.
# A script exits 0 for pass, 77 for "cannot run here" (reported as a
# failure unless BD_ALLOW_SKIP=1: a skipped check is not a pass).
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
pass=0 fail=0 skip=0
failed=()
run_one() {
    local name=$1; shift
    local t0=$(date +%s%N)
    "$@" >"$logdir/$name.log" 2>&1
    local rc=$?
    local dt=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN{printf "%.1f", (b-a)/1e9}')
    if [ $rc -eq 0 ]; then
        pass=$((pass+1)); printf 'PASS  %-40s %6ss\n' "$name" "$dt"
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
if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ $fail -eq 0 ]
