#!/usr/bin/env bash
# isa_levels.sh - the kernel levels (BLOCKDRAFT_ISA) through the CLI.
#  * An unknown level name is refused, and so is every level this CPU
#    cannot run, with a message naming the features it lacks. Which levels
#    those are is judged here from the flags line of /proc/cpuinfo (Linux's
#    detection, not blockdraft's), feature for feature the Makefile's -m
#    flags of each level's kernel file.
#  * The lossless checks run again under every level this CPU runs other
#    than the default one (the rest of `make test` covers that): the
#    kernel twins (test_kernels), speculative sampling (test_spec_sampling),
#    DFlash with the trained stories260K pair (stories.sh: token-identical
#    to plain greedy and to llama2.c's text) and greedy DFlash losslessness
#    on the generated Qwen3/Llama files (spec_lossless.sh). To keep make
#    test short, spec_lossless.sh runs by default only under avx2 (avxvnni
#    is avx2's source built again with one instruction swapped, ref's batch
#    invariance is test_kernels'; under ref it takes ~20 minutes here:
#    scalar kernels, a 151936-token head, 16-row verifies); BD_ISA_FULL=1
#    runs it under every level (make test and CI do not set it: the DFlash
#    checks that run under every level are stories.sh and test_spec_sampling).
#    BD_ISA_LEVELS="ref avx2 ..." picks the
#    levels.
set -euo pipefail
S="$BD_SHARED/fixtures/stories260K/stories260K.gguf"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
# level -> Linux flag names of its features (gcc's names in blockdraft's messages)
declare -A need=(
    [ref]=""
    [avx2]="avx2 fma f16c"
    [avxvnni]="avx2 fma f16c avx_vnni"
    [avx512]="avx2 fma f16c avx512f avx512dq avx512bw avx512vl avx512_vnni"
    [amx]="avx2 fma f16c avx512f avx512dq avx512bw avx512vl avx512_vnni avx512vbmi amx_tile amx_int8"
)
gcc_name() { case $1 in avx_vnni) echo avxvnni ;; avx512_vnni) echo avx512vnni ;; amx_tile) echo amx-tile ;; amx_int8) echo amx-int8 ;; *) echo "$1" ;; esac; }
[ "$(uname -m)" = x86_64 ] || { echo "isa_levels: not an x86-64 host"; exit 1; }

probe() { BLOCKDRAFT_ISA=$1 "$BD_BIN" run -m "$S" -p "Once" -n 2 --temp 0 -t 1 >"$T/out" 2>"$T/err"; }

if probe avx9000; then echo "FAIL: BLOCKDRAFT_ISA=avx9000 ran"; exit 1; fi
grep -q "BLOCKDRAFT_ISA=avx9000: unknown kernel level (known: ref avx2 avxvnni avx512 amx)" "$T/err" ||
    { echo "FAIL: unexpected message for avx9000:"; cat "$T/err"; exit 1; }
echo "avx9000: refused ($(cat "$T/err"))"

runnable=()
for lvl in ref avx2 avxvnni avx512 amx; do
    read -r -a feats <<<"${need[$lvl]}"
    if has "${feats[@]+"${feats[@]}"}"; then
        probe "$lvl" || { echo "FAIL: level $lvl should run here:"; cat "$T/err"; exit 1; }
        runnable+=("$lvl")
        echo "$lvl: runs"
    else
        if probe "$lvl"; then echo "FAIL: BLOCKDRAFT_ISA=$lvl ran on a CPU that lacks its features"; exit 1; fi
        missing=""
        for f in "${feats[@]}"; do has "$f" || missing="$missing $(gcc_name "$f")"; done
        grep -q "BLOCKDRAFT_ISA=$lvl: this machine cannot run that kernel level: CPU lacks$missing\$" "$T/err" ||
            { echo "FAIL: level $lvl: expected the missing features '$missing' in:"; cat "$T/err"; exit 1; }
        echo "$lvl: refused ($(cat "$T/err"))"
    fi
done

best=${runnable[${#runnable[@]}-1]}
levels=${BD_ISA_LEVELS:-}
if [ -z "$levels" ]; then
    for lvl in "${runnable[@]}"; do [ "$lvl" = "$best" ] || levels="$levels $lvl"; done
fi
for lvl in $levels; do
    echo "== BLOCKDRAFT_ISA=$lvl"
    for t in test_kernels test_spec_sampling; do
        BLOCKDRAFT_ISA=$lvl "$BD_BUILD/tests/$t" >"$T/$t.log" 2>&1 ||
            { echo "FAIL: $t under $lvl"; tail -n 30 "$T/$t.log"; exit 1; }
        # keep cmocka's skip lines for tests/run.sh's report
        grep -E '^skip: |^\[  SKIPPED \] [0-9]+ test' "$T/$t.log" | sed "s/^skip: \([A-Za-z0-9_]*\): /skip: \1: [$lvl] /" || true
        echo "$t: passed"
    done
    scripts="stories"
    [ "$lvl" = avx2 ] || [ "${BD_ISA_FULL:-0}" = 1 ] && scripts="$scripts spec_lossless"
    for e in $scripts; do
        BLOCKDRAFT_ISA=$lvl bash "$BD_ROOT/tests/e2e/$e.sh" >"$T/$e.log" 2>&1 ||
            { echo "FAIL: $e.sh under $lvl"; tail -n 30 "$T/$e.log"; exit 1; }
        echo "$e.sh: passed"
    done
    [[ " $scripts " == *" spec_lossless "* ]] || echo "spec_lossless.sh: not run under $lvl (BD_ISA_FULL=1 runs it)"
done
echo "isa_levels: passed (default level $best; also ran:${levels:- none})"
