#!/usr/bin/env bash
# readme-archs.sh BLOCKDRAFT [--check] - write (or, with --check, compare)
# the README's model table between <!-- archs:begin --> and
# <!-- archs:end --> from `blockdraft archs --markdown`, so the README and
# the architecture table (src/model/arch.c) cannot drift apart.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: readme-archs.sh BLOCKDRAFT [--check]}
table=$("$bin" archs --markdown)
python3 - "$table" "${2:-}" <<'PY'
import sys
table, mode = sys.argv[1], sys.argv[2]
s = open("README.md").read()
b, e = "<!-- archs:begin -->", "<!-- archs:end -->"
if b not in s or e not in s:
    sys.exit("README.md lacks the archs markers")
head, rest = s.split(b, 1)
_, tail = rest.split(e, 1)
new = head + b + "\n" + table.strip() + "\n" + e + tail
if mode == "--check":
    if new != s:
        sys.exit("README.md's model table differs from `blockdraft archs --markdown`; run `make readme-archs`")
    print("README model table matches the architecture table")
else:
    open("README.md", "w").write(new)
PY
