#!/usr/bin/env bash
# bench-serve.sh - generation speed through `blockdraft serve`, as a client
# sees it: one server, R completion requests one after another (the same
# slot, so the adaptive draft length carries from one request to the next),
# each reporting the server's own timings.predicted_per_second and its
# speculative statistics. Not part of `make test` (a measurement).
#
#   tools/bench-serve.sh -m TARGET.gguf [-md DRAFTER.gguf] [-r R] [-n N]
#                        [-t THREADS] [-- SERVE FLAGS...]
#
# R requests (default 3) of N tokens (default 64, ignore_eos, temperature 0)
# on a fixed prompt; SERVE FLAGS go to `blockdraft serve` as they are (e.g.
# --no-spec-adaptive). Prints one line per request, then the server's load
# line. BD_BIN: the binary (default build/blockdraft); BLOCKDRAFT_ISA is
# passed through.
set -euo pipefail
cd "$(dirname "$0")/.."
BD=${BD_BIN:-build/blockdraft}
target="" drafter="" reps=3 ntok=64 threads=2
while [ $# -gt 0 ]; do
    case $1 in
    -m) target=$2; shift 2 ;;
    -md) drafter=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -n) ntok=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "bench-serve: unknown option '$1'" >&2; exit 2 ;;
    esac
done
[ -n "$target" ] || { echo "bench-serve: -m TARGET.gguf is required" >&2; exit 2; }
[[ $reps =~ ^[0-9]+$ && $ntok =~ ^[0-9]+$ && $threads =~ ^[0-9]+$ ]] ||
    { echo "bench-serve: -r, -n and -t take positive integers" >&2; exit 2; }
log=$(mktemp)
args=(-m "$target" -c $((ntok + 256)) -t "$threads" --port 0)
[ -n "$drafter" ] && args+=(-md "$drafter")
"$BD" serve "${args[@]}" "$@" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 600); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")
    [ -n "$port" ] && break
    kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.5
done
[ -n "$port" ] || { echo "bench-serve: the server did not start" >&2; cat "$log" >&2; exit 1; }
body=$(printf '{"prompt":"Write a story about a cat.","max_tokens":%d,"temperature":0,"ignore_eos":true}' "$ntok")
for r in $(seq 1 "$reps"); do
    curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' -d "$body" |
        python3 -c '
import json, sys
j = json.load(sys.stdin); t = j["timings"]; s = j.get("speculative", {})
print("request %s: %d tokens, %.2f tok/s%s" % (sys.argv[1], t["predicted_n"], t["predicted_per_second"],
      "" if s.get("type", "none") == "none" else ", drafted %d accepted %d, adaptive %s" % (
          s["n_drafted"], s["n_accepted"], str(s.get("adaptive")).lower())))' "$r"
done
grep "serve: loaded" "$log"
