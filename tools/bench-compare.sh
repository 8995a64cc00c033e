#!/usr/bin/env bash
# bench-compare.sh - blockdraft vs llama.cpp v0.5.0 on the same GGUF files,
# the same thread count, back to back; prints a side-by-side markdown table.
# Run by `make bench-compare` (not part of `make test`: it takes minutes and
# its figures are measurements, not pass/fail checks).
#
#   tools/bench-compare.sh [MODEL.gguf ...]
#
# Without arguments the models are Qwen3-0.6B- and Qwen3-4B-shaped Q4_K_M
# files with random weights, written once by `blockdraft make-model` into
# $BENCH_MODEL_DIR (they are 0.5 and 2.5 GB; never inside the repository).
#
# llama.cpp comes from tests/oracle/setup.sh (npm node-llama-cpp@3.22.1, its
# prebuilt CPU libraries; the headers and examples from the llama.cpp source
# bundle it ships). This script adds two programs next to bd-oracle:
#   bd-bench-llama            tests/oracle/bench_llama.c: pp, tg, verify curve,
#                             plain greedy generation, through llama.h
#   llama-speculative-simple  llama.cpp's own example, compiled from the
#                             bundled source against the prebuilt
#                             libllama-common (which holds draft-dflash)
#
# Environment (defaults in brackets):
#   BD_BUILD [build]  BD_BIN [$BD_BUILD/blockdraft]  BD_SHARED [../shared]
#   BENCH_THREADS [2] BENCH_REPS [3] BENCH_P [512] BENCH_N [128]
#   BENCH_DEPTH [512] BENCH_VMAX [16]
#   BENCH_SHAPES ["0.6b 4b"]  BENCH_MODEL_DIR [${TMPDIR:-/tmp}/blockdraft-bench]
#   BENCH_SPEC_SHAPES ["4b"]  shapes of the constructed speculative pairs:
#                 a --constant-output target and drafters right for all / the
#                 first 5 / no block positions (make-model --arch dflash)
#   BENCH_PAIRS   speculative pairs "TARGET.gguf:DRAFT.gguf ..." [the
#                 constructed pairs, then the trained stories260K pair]
#   BENCH_PROMPT  prompt of the speculative runs
#   BENCH_OUT [$BD_BUILD/bench]  raw JSON and logs, and table.md
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BD_BUILD=${BD_BUILD:-build}
BD_BIN=${BD_BIN:-$BD_BUILD/blockdraft}
BD_SHARED=${BD_SHARED:-../shared}
T=${BENCH_THREADS:-2}
R=${BENCH_REPS:-3}
P=${BENCH_P:-512}
N=${BENCH_N:-128}
D=${BENCH_DEPTH:-512}
V=${BENCH_VMAX:-16}
SHAPES=${BENCH_SHAPES-"0.6b 4b"}
SPEC_SHAPES=${BENCH_SPEC_SHAPES-"4b"}
MDIR=${BENCH_MODEL_DIR:-${TMPDIR:-/tmp}/blockdraft-bench}
OUT=${BENCH_OUT:-$BD_BUILD/bench}
PROMPT=${BENCH_PROMPT:-"Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she saw a big red ball under a tree."}

die() { echo "bench-compare: $*" >&2; exit 1; }
log() { echo "bench-compare: $*" >&2; }

[ -x "$BD_BIN" ] || die "$BD_BIN not found (make all first)"
mkdir -p "$OUT" "$MDIR"
BD_BIN=$(cd "$(dirname "$BD_BIN")" && pwd)/$(basename "$BD_BIN")
OUT=$(cd "$OUT" && pwd)

# ---- llama.cpp: install (setup.sh) and build the two harness programs -----
ORACLE=$(BD_BUILD="$BD_BUILD" tests/oracle/setup.sh | tail -n 1) || die "tests/oracle/setup.sh failed"
O=$(cd "$(dirname "$ORACLE")" && pwd) # absolute: the llama.cpp runs below cd into LIBDIR
# Same layout as setup.sh lays out.
LIBDIR="$O/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
SRC="$O/src/llama.cpp"
[ -f "$LIBDIR/libllama-common.so" ] || die "$LIBDIR/libllama-common.so missing"
# (rebuilt when this script changes too: it sets the rpath)
if [ ! -x "$O/bd-bench-llama" ] || [ tests/oracle/bench_llama.c -nt "$O/bd-bench-llama" ] ||
    [ tools/bench-compare.sh -nt "$O/bd-bench-llama" ]; then
    log "building bd-bench-llama"
    gcc -std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -I"$SRC/include" -I"$SRC/ggml/include" \
        -DBD_ORACLE_LIBDIR="\"$LIBDIR\"" -o "$O/bd-bench-llama.tmp" tests/oracle/bench_llama.c \
        -L"$LIBDIR" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
        -Wl,-rpath,"$LIBDIR" -lm || die "compiling bench_llama.c failed"
    mv "$O/bd-bench-llama.tmp" "$O/bd-bench-llama"
fi
SPEC="$O/llama-speculative-simple"
if [ ! -x "$SPEC" ] || [ tools/bench-compare.sh -nt "$SPEC" ]; then
    log "building llama-speculative-simple from the bundled llama.cpp source"
    if [ ! -f "$SRC/examples/speculative-simple/speculative-simple.cpp" ]; then
        git -C "$SRC" -c advice.detachedHead=false checkout -q HEAD -- examples/speculative-simple ||
            die "cannot check out examples/speculative-simple from the bundle"
    fi
    command -v g++ >/dev/null || die "g++ is needed for llama-speculative-simple"
    g++ -std=c++17 -O2 -I"$SRC/include" -I"$SRC/ggml/include" -I"$SRC/common" -I"$SRC/vendor" \
        -o "$SPEC.tmp" "$SRC/examples/speculative-simple/speculative-simple.cpp" \
        -L"$LIBDIR" -l:libllama-common.so -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
        -Wl,-rpath,"$LIBDIR" || die "compiling speculative-simple.cpp failed"
    mv "$SPEC.tmp" "$SPEC"
fi

# ---- models ------------------------------------------------------------------
MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
    VOCAB="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
    [ -f "$VOCAB" ] || die "$VOCAB not found (set BD_SHARED)"
    for s in $SHAPES; do
        f="$MDIR/qwen3-$s-q4_k_m.gguf"
        if [ ! -f "$f" ]; then
            log "writing $f (make-model, a few minutes for 4b)"
            "$BD_BIN" make-model --arch qwen3 --shape "$s" --quant q4_k_m --seed 1 --vocab "$VOCAB" -o "$f" >&2 ||
                die "make-model $s failed"
        fi
        MODELS+=("$f")
    done
fi
PAIRS=()
if [ -n "${BENCH_PAIRS:-}" ]; then
    read -r -a PAIRS <<<"$BENCH_PAIRS"
else
    # Constructed drafters against a --constant-output target (greedy emits
    # token 0; the drafter is right for the first K block rows): always
    # right, right for 5 positions, never right.
    for s in $SPEC_SHAPES; do
        tgt="$MDIR/qwen3-$s-const.gguf"
        if [ ! -f "$tgt" ]; then
            log "writing $tgt (make-model --constant-output)"
            "$BD_BIN" make-model --arch qwen3 --shape "$s" --quant q4_k_m --seed 1 --constant-output \
                --vocab "$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf" -o "$tgt" >&2 || die "make-model failed"
        fi
        for k in all 5 0; do
            d="$MDIR/dflash-$s-k$k.gguf"
            if [ ! -f "$d" ]; then
                log "writing $d (constructed drafter, right for the first $k positions)"
                "$BD_BIN" make-model --arch dflash --target "$tgt" --drafter constructed --accept "$k" -o "$d" >&2 ||
                    die "make-model --arch dflash failed"
            fi
            PAIRS+=("$tgt:$d")
        done
    done
    st="$BD_SHARED/fixtures/stories260K"
    [ -f "$st/stories260K-dflash.gguf" ] && PAIRS+=("$st/stories260K.gguf:$st/stories260K-dflash.gguf")
fi

# ---- machine -------------------------------------------------------------------
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') | $(nproc) CPUs | flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' ')"
    echo "memory: $(free -g | awk '/^Mem:/{print $2}') GiB | load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "threads: $T | reps: $R | pp$P tg$N | verify depth $D, n = 1..$V"
    # read bandwidth of this machine (1 GiB summed by $T threads, best of 5)
    probe=${MODELS[0]:-${PAIRS[0]%%:*}} # any model: the probe reads its own buffer
    bw=$("$BD_BIN" bench -m "$probe" -p 0 -n 0 --no-verify --bw-probe -t "$T" --json | jq -r '.peak_gbps')
    echo "read bandwidth here ($T threads, blockdraft bench --bw-probe): $(printf '%.1f' "$bw") GB/s (reference machine: 48.7)"
} >"$OUT/machine.txt"
cat "$OUT/machine.txt" >&2

# ---- runs ----------------------------------------------------------------------
for m in "${MODELS[@]}"; do
    [ -f "$m" ] || die "$m not found"
    b=$(basename "$m" .gguf)
    log "$b: blockdraft bench"
    "$BD_BIN" bench -m "$m" -t "$T" -r "$R" -p "$P" -n "$N" --verify-depth "$D" --verify-max "$V" --json \
        >"$OUT/bd-$b.json" 2>"$OUT/bd-$b.log" || die "blockdraft bench failed on $m (see $OUT/bd-$b.log)"
    log "$b: llama.cpp bench"
    "$O/bd-bench-llama" -m "$m" -t "$T" -r "$R" -p "$P" -n "$N" --verify-depth "$D" --verify-max "$V" \
        >"$OUT/ll-$b.json" 2>"$OUT/ll-$b.log" || die "bd-bench-llama failed on $m (see $OUT/ll-$b.log)"
done
for pair in "${PAIRS[@]+"${PAIRS[@]}"}"; do
    tgt=$(realpath "${pair%%:*}")
    dft=$(realpath "${pair#*:}")
    b="$(basename "$tgt" .gguf)+$(basename "$dft" .gguf)"
    log "$b: blockdraft speculative"
    "$BD_BIN" bench -m "$tgt" -md "$dft" -t "$T" -r "$R" -p 0 -n "$N" --no-verify --spec-prompt "$PROMPT" --json \
        >"$OUT/bdspec-$b.json" 2>"$OUT/bdspec-$b.log" || die "blockdraft bench -md failed on $pair (see $OUT/bdspec-$b.log)"
    nmax=$(jq -r '.spec.n_max' "$OUT/bdspec-$b.json")
    log "$b: llama.cpp plain generation"
    "$O/bd-bench-llama" -m "$tgt" -t "$T" -r 1 -p 0 -n "$N" --no-verify --gen-prompt "$PROMPT" \
        >"$OUT/llplain-$b.json" 2>"$OUT/llplain-$b.log" || die "bd-bench-llama --gen-prompt failed (see $OUT/llplain-$b.log)"
    rm -f "$OUT/llspec-$b-n"*.log
    for nm in 3 "$nmax"; do
        log "$b: llama.cpp speculative-simple --spec-type draft-dflash --spec-draft-n-max $nm"
        # ggml loads its CPU backend from the working directory or the executable's.
        # --top-k 0 --top-p 1 --min-p 0: plain argmax over the whole vocabulary.
        # With the default top-k 40 at temperature 0, an all-equal row of
        # logits (the --constant-output targets) is reordered by the top-k
        # sort and llama.cpp emits an arbitrary token instead of the lowest
        # id, so no draft of token 0 would ever be accepted.
        (cd "$LIBDIR" && "$SPEC" -m "$tgt" -md "$dft" --spec-type draft-dflash --spec-draft-n-max "$nm" \
            -p "$PROMPT" -n "$N" --temp 0 --top-k 0 --top-p 1 --min-p 0 -t "$T" -tb "$T" -c $((N + 512))) \
            >"$OUT/llspec-$b-n$nm.log" 2>&1 || log "speculative-simple failed on $pair n_max $nm (see $OUT/llspec-$b-n$nm.log)"
        [ "$nm" = 3 ] && [ "$nmax" = 3 ] && break
    done
done

# ---- table ---------------------------------------------------------------------
python3 - "$OUT" "${MODELS[@]}" -- "${PAIRS[@]+"${PAIRS[@]}"}" <<'EOF' | tee "$OUT/table.md"
import json, os, re, sys
out = sys.argv[1]
args = sys.argv[2:]
k = args.index("--")
models, pairs = args[:k], args[k + 1:]
base = lambda p: os.path.basename(p)[:-5] if p.endswith(".gguf") else os.path.basename(p)
def load(p):
    try:
        with open(p) as f: return json.load(f)
    except Exception: return None
def f(x, nd=2): return "—" if x is None else f"{x:.{nd}f}"
print("```")
print(open(os.path.join(out, "machine.txt")).read().rstrip())
for m in models:
    ll = load(f"{out}/ll-{base(m)}.json")
    if ll and ll.get("cpu_features"):
        print("llama.cpp CPU backend features: " + ll["cpu_features"]); break
print("```\n")
for m in models:
    b = base(m)
    bd, ll = load(f"{out}/bd-{b}.json"), load(f"{out}/ll-{b}.json")
    if not bd or not ll:
        print(f"{b}: missing results\n"); continue
    print(f"### {b} ({bd['file_bytes']/1e9:.2f} GB, {bd['threads']} threads; load average during the "
          f"blockdraft run {bd.get('load_before', -1):.2f} -> {bd.get('load_after', -1):.2f})\n")
    print("| test | blockdraft | llama.cpp | ratio |")
    print("|---|---|---|---|")
    for key, name in (("pp_tps", f"pp{bd['n_prompt']} t/s"), ("tg_tps", f"tg{bd['n_gen']} t/s")):
        a, c = bd.get(key), ll.get(key)
        if a is None: continue
        print(f"| {name} | {a:.2f} ± {bd[key+'_sd']:.2f} | {c:.2f} ± {ll[key+'_sd']:.2f} | {a/c:.2f}x |")
    if bd.get("tg_gbps") is not None:
        pk = bd["peak_gbps"]
        print(f"| tg read GB/s (share of {pk:.1f}) | {bd['tg_gbps']:.1f} ({100*bd['tg_gbps']/pk:.0f} %) | "
              f"{ll['tg_gbps']:.1f} ({100*ll['tg_gbps']/pk:.0f} %) | |")
    vb, vl = bd.get("verify_ms") or [], ll.get("verify_ms") or []
    if vb and vl:
        n = len(vb)
        print(f"| verify t({n}) ms @ depth {bd['verify_depth']} | {vb[-1]:.1f} | {vl[-1]:.1f} | {vb[-1]/vl[-1]:.2f}x |")
        print(f"| peak RSS GB | {bd['rss_bytes']/1e9:.2f} (budget {bd['rss_budget_bytes']/1e9:.2f}) | {ll['rss_bytes']/1e9:.2f} | |")
        pg = bd["peak_gops"]
        print(f"\nverify curve at depth {bd['verify_depth']} (median ms of one forward of n tokens, logits on all rows; "
              f"GOPS against the {pg:.0f} GOPS int8 peak):\n")
        print("| n | blockdraft ms | t/t1 | GOPS | llama.cpp ms | t/t1 | GOPS | bd/llama |")
        print("|---|---|---|---|---|---|---|---|")
        for i in range(n):
            print(f"| {i+1} | {vb[i]:.2f} | {vb[i]/vb[0]:.2f} | {bd['verify_gops'][i]:.0f} | {vl[i]:.2f} | "
                  f"{vl[i]/vl[0]:.2f} | {ll['verify_gops'][i]:.0f} | {vb[i]/vl[i]:.2f} |")
    print()
if pairs:
    print("### speculative decoding, temperature 0\n")
    print("| pair | engine | n_max | tok/s | plain tok/s | speed-up | tau | accepted/drafted | identical |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in pairs:
        t, d = p.split(":", 1)
        b = f"{base(t)}+{base(d)}"
        bs = load(f"{out}/bdspec-{b}.json")
        if bs and bs.get("spec"):
            s = bs["spec"]
            print(f"| {b} | blockdraft ({'adaptive' if s['adaptive'] else 'fixed'}) | {s['n_max']} | "
                  f"{s['tps']:.2f} ± {s['tps_sd']:.2f} | {s['plain_tps']:.2f} | {s['speedup']:.2f}x | {s['tau']:.2f} | "
                  f"{s['n_accepted']}/{s['n_drafted']} | {'yes' if s['identical'] else 'NO'} |")
        lp = load(f"{out}/llplain-{b}.json")
        plain = lp.get("plain_tps") if lp else None
        logs = [x for x in os.listdir(out) if x.startswith(f"llspec-{b}-n") and x.endswith(".log")]
        for log in sorted(logs, key=lambda x: int(re.sub(r"\D", "", x[len(f"llspec-{b}-n"):]) or 0)):
            txt = open(os.path.join(out, log), errors="replace").read()
            nm = log[len(f"llspec-{b}-n"):-4]
            mdec = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", txt)
            macc = re.search(r"n_accept\s+=\s+(\d+)", txt)
            mdr = re.search(r"n_drafted\s+=\s+(\d+)", txt)
            if not mdec:
                why = next((l.strip() for l in txt.splitlines() if " E " in l or "error" in l.lower()), "no result")
                print(f"| {b} | llama.cpp draft-dflash | {nm} | failed: {why[:120]} | | | | | |"); continue
            npred, tps = int(mdec.group(1)), float(mdec.group(3))
            acc = int(macc.group(1)) if macc else 0
            drafted = int(mdr.group(1)) if mdr else 0
            tau = npred / max(1, npred - acc)
            print(f"| {b} | llama.cpp draft-dflash | {nm} | {tps:.2f} | {f(plain)} | "
                  f"{(tps/plain if plain else 0):.2f}x | {tau:.2f} | {acc}/{drafted} | — |")
    print()
EOF
echo "bench-compare: load after: $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT" >&2
