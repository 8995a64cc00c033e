#!/usr/bin/env bash
# bench_compare.sh - the plumbing of `make bench-compare` that its figures
# depend on, without measuring anything (speed is never checked in tests):
#  * tests/oracle/bench_llama.c compiles warning-free against the oracle's
#    llama.cpp headers and libraries;
#  * per-level isolation: with --backend-dir pointing at a folder that links
#    ONE libggml-cpu-<variant>.so, ggml loads that file and no other
#    (its own "loaded CPU backend from" line and /proc/self/maps); a folder
#    with no variant loads nothing and fails; without --backend-dir ggml
#    scores every variant and keeps one;
#  * tools/bench-table.py on a hand-written results folder: ratios, the
#    GB/s share, the verify curve's t/t1, and a llama.cpp run that loaded
#    another variant than its level's is flagged;
#  * tools/bench-compare.sh passes bash -n (and shellcheck when installed).
set -euo pipefail
: "${BD_BUILD:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

ORACLE=$("$ROOT/tests/oracle/setup.sh") || { echo "FAIL: cannot build the llama.cpp oracle (tests/oracle/setup.sh)"; exit 1; }
O=$(dirname "$ORACLE")
LIBDIR="$O/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
SRC="$O/src/llama.cpp"
gcc -std=c11 -O1 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$SRC/include" -I"$SRC/ggml/include" \
    -DBD_ORACLE_LIBDIR="\"$LIBDIR\"" -o "$T/bbl" "$ROOT/tests/oracle/bench_llama.c" \
    -L"$LIBDIR" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,"$LIBDIR" -lm

# The variant: haswell (AVX2) where the CPU has it, else the x64 baseline.
v=x64
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw bmi2 /proc/cpuinfo && v=haswell
mkdir "$T/one" "$T/none"
ln -s "$LIBDIR/libggml-cpu-$v.so" "$LIBDIR/libggml-base.so" "$T/one/"
ln -s "$LIBDIR/libggml-base.so" "$T/none/"
"$T/bbl" --which-backend --backend-dir "$T/one" >"$T/one.json"
"$T/bbl" --which-backend >"$T/all.json"
if "$T/bbl" --which-backend --backend-dir "$T/none" >"$T/none.json" 2>"$T/none.err"; then
    echo "FAIL: a folder without any CPU variant loaded a backend"; cat "$T/none.json"; exit 1
fi
grep -q "no CPU backend loaded" "$T/none.err"
python3 - "$T" "$v" "$LIBDIR" <<'PY'
import json, os, sys
t, v, libdir = sys.argv[1:]
one = json.load(open(f"{t}/one.json"))
want = f"libggml-cpu-{v}.so"
assert one["cpu_backend"] == f"{t}/one/{want}", one
assert one["cpu_backend_file"] == os.path.realpath(f"{libdir}/{want}"), one
assert one["cpu_backends_mapped"] == want, one
assert "AVX512" not in one["cpu_features"].split(), one  # haswell / x64 have no AVX-512
alls = json.load(open(f"{t}/all.json"))
assert os.path.dirname(alls["cpu_backend"]) == libdir, alls
# ggml opens every variant to score it and closes the losers: one stays mapped
assert alls["cpu_backends_mapped"] == os.path.basename(alls["cpu_backend"]), alls
none = json.load(open(f"{t}/none.json"))
assert none["cpu_backend"] == "" and none["cpu_backends_mapped"] == "", none
print(f"isolation ok: {want} alone; unpinned ggml picked {os.path.basename(alls['cpu_backend'])}")
PY

# ---- tables from a hand-written results folder ----
R="$T/out"
G="$R/runs/avx2-t2"
mkdir -p "$G"
printf 'date: x\ncpu: Test CPU | 2 CPUs | flags: avx2\n' >"$R/machine.txt"
: >"$R/skipped.txt"
: >"$R/pairs.tsv"
printf 'avx2\t2\thaswell\t%s\t/x/libggml-cpu-haswell.so\tAVX2\t20.0\tavx2\thuge\n' "$G" >"$R/groups.tsv"
printf 'm1\tm1\t/x/m1.gguf\nm2\tm2\t/x/m2.gguf\n' >"$R/models.tsv"
bd='{"file_bytes":1e9,"threads":2,"n_prompt":512,"n_gen":128,"pp_tps":300,"pp_tps_sd":1,"tg_tps":10,"tg_tps_sd":0.5,
     "tg_gbps":15,"peak_gops":925,"verify_depth":512,"verify_ms":[100,150],"verify_gops":[10,13],
     "rss_bytes":1.2e9,"rss_budget_bytes":1.3e9,"kv_bytes":1e8,"load_before":1,"load_after":1}'
ll='{"model_bytes":1e9,"threads":2,"n_prompt":512,"n_gen":128,"pp_tps":150,"pp_tps_sd":2,"tg_tps":8,"tg_tps_sd":0.1,
     "tg_gbps":11,"verify_depth":512,"verify_ms":[80,200],"verify_gops":[12,10],"rss_bytes":2e9,
     "cpu_backend_file":"/x/libggml-cpu-haswell.so","cpu_backends_mapped":"libggml-cpu-haswell.so"}'
echo "$bd" >"$G/bd-m1.json"
echo "$ll" >"$G/ll-m1.json"
echo "$bd" >"$G/bd-m2.json"
echo "$ll" | sed 's/cpu-haswell/cpu-zen4/g' >"$G/ll-m2.json"
python3 "$ROOT/tools/bench-table.py" "$R" >"$T/table.md"
grep -qF 'read bandwidth (2 threads, blockdraft bench --bw-probe, huge pages): 20.0 GB/s' "$T/table.md"
# pp 300/150, tg 10/8, verify t(2) 150/200; GB/s share 15/20 and 15*8/10/20;
# t/t1 150/100 and 200/80
grep -qF '| avx2 (haswell) | 2 | m1 | 300.00 / 150.00 = 2.00x | 10.00 / 8.00 = 1.25x | t(2) 150.0 / 200.0 = 0.75x | 75 % / 60 % |' "$T/table.md"
grep -qF '| 2 | 150.00 | 1.50 | 13 | 200.00 | 2.50 | 10 | 0.75x |' "$T/table.md"
grep -qF '#### m1 (1.00 GB, 2 threads; load average during the blockdraft run 1.00 -> 1.00)' "$T/table.md"
grep -q '^#### m2 .*\*\*llama.cpp loaded libggml-cpu-zen4.so (mapped: libggml-cpu-zen4.so), not libggml-cpu-haswell.so\*\*' "$T/table.md"
if grep -q '^#### m1 .*llama.cpp loaded' "$T/table.md"; then echo "FAIL: m1 flagged"; exit 1; fi
echo "bench-table ok"

bash -n "$ROOT/tools/bench-compare.sh"
if command -v shellcheck >/dev/null; then shellcheck "$ROOT/tools/bench-compare.sh"; fi
echo "bench_compare: ok"
