#!/usr/bin/env bash
# oracle_dflash.sh - DFlash speculative decoding against llama.cpp v0.5.0's
# own DFlash loop (bd-oracle-dflash: libllama-common's draft-dflash
# implementation), on stories260K and its trained drafter.
#
# Checks: llama.cpp's DFlash output equals the llama2.c greedy ids of the
# fixture README (the harness is lossless), and `blockdraft run -md` produces
# the same ids. The acceptance of both is printed for reading: the two loops
# are aligned differently (llama.cpp keeps the last prompt token as the first
# anchor, the reference loop samples it from the prefill), so per-step drafts
# and acceptance counts are not expected to be identical.
set -u
: "${BD_BIN:?}" "${BD_BUILD:?}" "${BD_SHARED:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
ORACLE=$("$ROOT/tests/oracle/setup.sh") || { echo "FAIL: cannot build the llama.cpp oracle (tests/oracle/setup.sh)"; exit 1; }
ODF="$(dirname "$ORACLE")/bd-oracle-dflash"
S="$BD_SHARED/fixtures/stories260K"
W="$BD_BUILD/oracle-dflash"
mkdir -p "$W"
N=120
"$ODF" -m "$S/stories260K.gguf" -md "$S/stories260K-dflash.gguf" -p "Once upon a time" -n $N \
    --draft-n-max 7 >"$W/oracle.json" 2>"$W/oracle.err" ||
    { echo "FAIL: bd-oracle-dflash failed: $(tail -3 "$W/oracle.err")"; exit 1; }
"$BD_BIN" run -m "$S/stories260K.gguf" -md "$S/stories260K-dflash.gguf" -p "Once upon a time" -n $N \
    --temp 0 --ignore-eos --json >"$W/bd.json" 2>"$W/bd.err" ||
    { echo "FAIL: blockdraft run -md failed: $(tail -3 "$W/bd.err")"; exit 1; }
python3 - "$S/README.md" "$W/oracle.json" "$W/bd.json" $N <<'PY'
import json, sys
readme, oj, bj, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ref = [int(x) for x in open(readme).read().split("Token ids", 1)[1].split("```")[1].split()][5:5 + n]
o, b = json.load(open(oj)), json.load(open(bj))
ok = True
if o["generated_ids"] != ref:
    print("FAIL: llama.cpp DFlash output differs from the greedy reference"); ok = False
if b.get("generated_ids") != ref:
    print("FAIL: blockdraft DFlash output differs from the greedy reference")
    print("  ref", ref[:40]); print("  bd ", (b.get("generated_ids") or [])[:40]); ok = False
steps = o["steps"]
drafted = sum(len(s["draft"]) for s in steps); acc = sum(s["accepted"] for s in steps)
print(f"llama.cpp: {len(steps)} verify steps, {acc}/{drafted} drafts accepted, tau {n / len(steps):.2f}")
sp = b.get("stats", {}).get("spec", {})
print(f"blockdraft: {sp.get('target_forwards')} target forwards, {sp.get('n_accepted')}/{sp.get('n_drafted')} "
      f"drafts accepted, tau {sp.get('tau')}")
sys.exit(0 if ok else 1)
PY
