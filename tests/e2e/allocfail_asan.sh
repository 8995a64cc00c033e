#!/usr/bin/env bash
# allocfail_asan.sh - the allocation-failure injection test (test_allocfail)
# under ASan + UBSan (build-debug, built by make test's debug-bin): every
# injected failure ends in an error, with no invalid access and no leak
# (LeakSanitizer at exit, on top of the test's own accounting).
set -u
BIN="${BD_ROOT:?}/build-debug/tests/test_allocfail"
[ -x "$BIN" ] || { echo "FAIL: $BIN not built (make debug-bin)"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
exec "$BIN"
