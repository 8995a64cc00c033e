#!/usr/bin/env bash
# fuzz_smoke.sh - `make fuzz` builds (the engine core with clang, libFuzzer,
# ASan and UBSan) and runs the GGUF reader's fuzz target for a short while
# over its seeds (valid files from tests/fuzz/make_seeds.c, including hybrid
# qwen35 / qwen35moe / qwen3next headers, and prefixes of the real fixtures); then
# `make fuzz-text` the same for chat templates, GBNF grammars and JSON
# schemas (tests/fuzz/fuzz_text.c, seeded with the real templates). It keeps
# the target building with a compiler other than gcc (clang ignored gcc's
# target pragma once, and the target stopped building unnoticed) and finds
# a regression the seeds reach within seconds. Longer runs: make fuzz
# FUZZ_SECONDS=N. The fuzzing itself is random, so a pass says only that
# nothing broke in this run's inputs.
set -u
cd "${BD_ROOT:?}" || exit 1
command -v clang >/dev/null || { echo "FAIL: clang not installed (make deps installs it)"; exit 1; }
rm -f build-fuzz/crash-* build-fuzz/leak-* build-fuzz/timeout-* build-fuzz/oom-*
mkdir -p "$BD_BUILD/test-logs"
for target in fuzz fuzz-text; do
    log="$BD_BUILD/test-logs/fuzz_smoke.$target.log"
    if ! make --no-print-directory "$target" FUZZ_SECONDS="${FUZZ_SMOKE_SECONDS:-20}" BD_SHARED="$BD_SHARED" >"$log" 2>&1; then
        tail -n 40 "$log"
        echo "FAIL: make $target (log: $log)"
        exit 1
    fi
    grep -E '^Done [0-9]+ runs' "$log" || { tail -n 20 "$log"; echo "FAIL: make $target: the fuzzer did not report its runs"; exit 1; }
    if ls build-fuzz/crash-* build-fuzz/leak-* build-fuzz/timeout-* build-fuzz/oom-* >/dev/null 2>&1; then
        ls build-fuzz/crash-* build-fuzz/leak-* build-fuzz/timeout-* build-fuzz/oom-* 2>/dev/null
        echo "FAIL: make $target: the fuzzer left artifacts"
        exit 1
    fi
done
echo "PASS: make fuzz and make fuzz-text built and ran without a finding"
