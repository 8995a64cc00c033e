#!/usr/bin/env bash
# bench.sh - `blockdraft bench` on the stories260K pair, small sizes (speed
# figures are not checked: this machine is shared; BENCHMARKS.md holds them):
#  * --json has the documented keys, with one verify time per n = 1..N;
#  * the operation count behind GOPS matches the fixture README's shapes
#    (n_embd 64, n_ff 172, 5 layers, 8 query / 4 KV heads of 8, vocab 512,
#    explicit output matrix): 2 x matmul params per row + attention;
#  * tg GB/s is (weights streamed per token + f32 KV read) x tokens/s;
#  * the speculative run (trained DFlash drafter, fixed draft length 7 so
#    that tau depends on the models and not on timing, as the adaptive
#    length would) is token-identical to plain decoding and accepts drafts
#    (tau > 1.2);
#  * --bw-probe gives a figure, on huge pages where the kernel has them;
#  * llama-bench's flags: -o json is --json, -o md the table; -ngl / -ub /
#    --progress give a note each and run; -d, -pg and -o csv are refused
#    (exit 2) naming the alternative;
#  * bad options are usage errors (exit 2), a missing file a runtime error.
set -euo pipefail
S="$BD_SHARED/fixtures/stories260K"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

"$BD_BIN" bench -m "$S/stories260K.gguf" -md "$S/stories260K-dflash.gguf" -t 2 -r 2 -p 32 -n 48 \
    --verify-depth 20 --verify-max 6 --spec-draft-n-max 7 --json > "$T/b.json"
python3 - "$T/b.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
for k in ("pp_tps", "tg_tps", "tg_gbps", "verify_depth", "verify_ms", "spec", "rss_bytes"):
    assert k in b, k
assert b["pp_tps"] > 0 and b["tg_tps"] > 0 and b["tg_gbps"] > 0
assert b["verify_depth"] == 20 and len(b["verify_ms"]) == 6 and all(x > 0 for x in b["verify_ms"])
# shapes from the fixture README
E, FF, L, H, KV, HD, NV = 64, 172, 5, 8, 4, 8, 512
per_layer = E * H * HD + 2 * E * KV * HD + H * HD * E + 3 * E * FF
params = L * per_layer + NV * E
assert b["matmul_params"] == params, (b["matmul_params"], params)
D = 20
for n in range(1, 7):
    keys = n * D + n * (n + 1) / 2
    ops = 2 * params * n + 4 * L * H * HD * keys
    want = ops / (b["verify_ms"][n - 1] * 1e6)
    assert abs(b["verify_gops"][n - 1] - want) <= 1e-3 * want, (n, b["verify_gops"][n - 1], want)
# tg bytes: every tensor except the token-embedding table (the file has an
# explicit output matrix) plus one embedding row (64 f32), and the f32 KV
# cache: L x KV x HD x 2 x 4 bytes per position, positions 1..n read.
emb = NV * E * 4
assert b["stream_bytes"] == b["weight_bytes"] - emb + E * 4, (b["stream_bytes"], b["weight_bytes"])
kvpos = L * KV * HD * 2 * 4
n = 48
want = (b["stream_bytes"] + kvpos * (n + 1) / 2) * b["tg_tps"] / 1e9
assert abs(b["tg_gbps"] - want) <= 1e-3 * want, (b["tg_gbps"], want)
sp = b["spec"]
assert sp["identical"] is True, "speculative output differs from plain decoding"
assert sp["adaptive"] is False and sp["n_max"] == 7, sp
assert sp["tau"] > 1.2 and sp["n_accepted"] > 0, sp
assert sp["tps"] > 0 and sp["plain_tps"] > 0 and sp["n_gen"] == 48
print("bench: json keys, op counts, GB/s formula and speculative identity ok")
PY

# the read-bandwidth probe: a figure, and its buffer on huge pages exactly
# where the kernel offers them (madvise or always), as the weights are
"$BD_BIN" bench -m "$S/stories260K.gguf" -t 1 -p 0 -n 0 --no-verify --bw-probe --json > "$T/p.json"
thp=no
grep -qv '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null && thp=yes
python3 - "$T/p.json" "$thp" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["peak_gbps_probed"] is True and p["peak_gbps"] > 0, p
assert p["peak_gbps_huge_pages"] is (sys.argv[2] == "yes"), (p["peak_gbps_huge_pages"], sys.argv[2])
print(f"bench: probe {p['peak_gbps']:.1f} GB/s, huge pages {p['peak_gbps_huge_pages']}")
PY

# text output names the tests
"$BD_BIN" bench -m "$S/stories260K.gguf" -t 1 -r 1 -p 16 -n 8 --verify-depth 8 --verify-max 2 > "$T/b.txt"
grep -q "^| pp16 " "$T/b.txt"
grep -q "^| tg8 " "$T/b.txt"
grep -q "verify curve at depth 8" "$T/b.txt"

# llama-bench's flags
"$BD_BIN" bench -m "$S/stories260K.gguf" -t 1 -r 1 -p 16 -n 8 --no-verify -o json -ngl 99 -ub 512 --progress \
    >"$T/ll.json" 2>"$T/ll.err"
python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert b["pp_tps"] > 0 and b["tg_tps"] > 0' "$T/ll.json"
for f in "-ngl 99" "-ub 512" "--progress"; do
    [ "$(grep -c -- "^blockdraft bench: note: $f ignored: " "$T/ll.err")" = 1 ] || { echo "no note for $f"; cat "$T/ll.err"; exit 1; }
done
"$BD_BIN" bench -m "$S/stories260K.gguf" -t 1 -r 1 -p 16 -n 8 --no-verify -o md | grep -q "^| tg8 "
set +e
for f in "-d 64" "-pg 16,16" "-o csv"; do
    "$BD_BIN" bench -m "$S/stories260K.gguf" -p 16 -n 8 $f >/dev/null 2>"$T/ref.err"; rc=$?
    [ "$rc" = 2 ] && grep -qE "is not supported: " "$T/ref.err" || { echo "bench $f: exit $rc, $(cat "$T/ref.err")"; exit 1; }
done
"$BD_BIN" bench -m "$S/stories260K.gguf" --verify-max 99 >/dev/null 2>&1; rc1=$?
"$BD_BIN" bench --bogus >/dev/null 2>&1; rc2=$?
"$BD_BIN" bench -m "$T/missing.gguf" >/dev/null 2>&1; rc3=$?
"$BD_BIN" bench -m "$S/stories260K-dflash.gguf" -p 8 -n 8 >/dev/null 2>&1; rc4=$?
set -e
[ "$rc1" = 2 ] && [ "$rc2" = 2 ] && [ "$rc3" = 1 ] && [ "$rc4" = 1 ] || { echo "exit codes $rc1 $rc2 $rc3 $rc4"; exit 1; }
echo "bench: ok"
