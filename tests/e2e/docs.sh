#!/usr/bin/env bash
# docs.sh - the README's model table is the architecture table's output
# (tools/readme-archs.sh), and --help names the architectures that run.
set -u
: "${BD_BIN:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
"$ROOT/tools/readme-archs.sh" "$BD_BIN" --check || exit 1
help=$("$BD_BIN" --help)
for a in $("$BD_BIN" archs | awk '$3 == "runs" && $2 == "target" {print $1}'); do
    echo "$help" | grep -q "targets.*\b$a\b" || { echo "FAIL: --help does not name target $a"; exit 1; }
done
echo "docs: ok"
