#!/usr/bin/env bash
# allocfail_asan.sh - the debug build (build-debug, made by make test's
# debug-bin: ASan + UBSan + BD_DEBUG):
#  * BD_ASSERT is compiled in there (the core library calls bd_assert_fail)
#    and out of the release build;
#  * the allocation-failure injection test (test_allocfail) under ASan:
#    every injected failure ends in an error, with no invalid access and no
#    leak (LeakSanitizer at exit, on top of the test's own accounting).
set -u
BIN="${BD_ROOT:?}/build-debug/tests/test_allocfail"
[ -x "$BIN" ] || { echo "FAIL: $BIN not built (make debug-bin)"; exit 1; }
n_dbg=$(nm "$BD_ROOT/build-debug/libbdcore.a" 2>/dev/null | grep -c ' U bd_assert_fail$')
n_rel=$(nm "$BD_BUILD/libbdcore.a" 2>/dev/null | grep -c ' U bd_assert_fail$')
echo "BD_ASSERT: $n_dbg objects of the debug core library check invariants, $n_rel of the release one"
[ "$n_dbg" -ge 5 ] && [ "$n_rel" -eq 0 ] || { echo "FAIL: BD_ASSERT not active in make debug only"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
exec "$BIN"
