#!/usr/bin/env bash
# example.sh - examples/simple.c (built against libbdcore.a alone) runs on
# stories260K: plain greedy text equals llama2.c's reference start (fixture
# README), and the DFlash pair prints the same text with tau > 1.
set -euo pipefail
S="$BD_SHARED/fixtures/stories260K"
EX="$BD_BUILD/examples/simple"
[ -x "$EX" ] || { echo "FAIL: $EX not built"; exit 1; }
plain=$("$EX" "$S/stories260K.gguf" "" 2>"$BD_BUILD/example.err")
cat "$BD_BUILD/example.err"
python3 - "$S/README.md" "$plain" <<'PY'
import re, sys
readme = open(sys.argv[1], encoding="utf-8").read()
ref = re.search(r"The decoded text of those 200 tokens.*?```\n(.*?)\n```", readme, re.S).group(1)
got = sys.argv[2]
assert len(got) > 100 and ref.startswith(got), "example text differs from the reference:\n%r\n%r" % (got, ref[:len(got)])
print("plain: %d bytes, a prefix of llama2.c's reference text" % len(got))
PY
spec=$("$EX" "$S/stories260K.gguf" "$S/stories260K-dflash.gguf" 2>"$BD_BUILD/example.err")
cat "$BD_BUILD/example.err"
[ "$spec" = "$plain" ] || { echo "FAIL: speculative text differs"; exit 1; }
grep -q "draft-dflash, tau [2-9]" "$BD_BUILD/example.err" || { echo "FAIL: no speculation"; exit 1; }
echo "ok: example plain and DFlash"
