#!/usr/bin/env bash
# cross_aarch64.sh - the engine core on a non-x86 architecture: builds
# libbdcore and the core unit tests (the Makefile's CORE_TESTS) with
# Debian's aarch64 cross compiler, where only the reference kernels exist
# (the x86 kernel files are left out by the Makefile), and runs them under
# qemu-user. test_kernels then checks the reference table and reports the
# x86 levels as skipped ("not built for this architecture").
# Two core tests are left out to keep this short: test_spec_sampling (its
# statistical checks run over 10 minutes under emulation) and test_synth
# (a minute; the quantizers it drives are test_quant's).
# The toolchain comes from `make deps` (tools/deps.sh); a missing one is a
# failure, not a skip.
set -euo pipefail
cd "$BD_ROOT"
CC_X=aarch64-linux-gnu-gcc
CMOCKA_LIB=/usr/lib/aarch64-linux-gnu
for need in "$CC_X" qemu-aarch64; do
    command -v "$need" >/dev/null || { echo "cross_aarch64: $need missing (run make deps)"; exit 1; }
done
[ -e "$CMOCKA_LIB/libcmocka.so" ] || { echo "cross_aarch64: libcmocka-dev:arm64 missing (run make deps)"; exit 1; }
OUT="$BD_ROOT/build-aarch64"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# cmocka.h is in /usr/include, searched after the cross toolchain's own headers
TESTS="test_kernels test_quant test_gguf test_tokenizer test_spec_adapt test_dflash_load"
make -j2 --no-print-directory BUILD="$OUT" CC="$CC_X -idirafter /usr/include" LDFLAGS="-L$CMOCKA_LIB" \
    $(for t in $TESTS; do echo "$OUT/core-tests/$t"; done) >"$T/build.log" 2>&1 || { tail -n 30 "$T/build.log"; exit 1; }
for o in "$OUT"/src/tensor/kernels_avx2.o "$OUT"/src/tensor/kernels_avx512.o "$OUT"/src/tensor/kernels_amx.o; do
    [ ! -e "$o" ] || { echo "FAIL: $o was built for aarch64"; exit 1; }
done
n=0
for name in $TESTS; do
    t="$OUT/core-tests/$name"
    # ELF e_machine (2 bytes at offset 18) of an AArch64 binary is 183
    [ "$(od -An -tu2 -j18 -N2 "$t" | tr -d ' ')" = 183 ] || { echo "FAIL: $name is not an aarch64 binary"; exit 1; }
    if ! timeout 300 qemu-aarch64 "$t" >"$OUT/$name.log" 2>&1; then
        echo "FAIL: $name under qemu-aarch64"
        tail -n 30 "$OUT/$name.log"
        exit 1
    fi
    # keep the skip lines for tests/run.sh's report
    grep -E '^skip: |^\[  SKIPPED \] [0-9]+ test' "$OUT/$name.log" | sed "s/^skip: \([A-Za-z0-9_]*\): /skip: \1: [aarch64] /" || true
    echo "$name: passed (aarch64, qemu-user)"
    n=$((n + 1))
done
echo "cross_aarch64: $n core test programs passed"
