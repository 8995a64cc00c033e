#!/usr/bin/env bash
# server_strict.sh - every request field of the completion endpoints is
# implemented (and does what it says: speculative output equals plain
# output under each sampler transform; n, seeds, best_of, prompt shapes,
# echo, multi-part text) or refused with a 4xx naming it; CORS preflight
# echoes the requested headers; no startup race. On the ASan+UBSan build
# (build-debug/blockdraft, which make test builds). Checks are in
# tests/server/server_strict.py.
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 300 python3 "$BD_ROOT/tests/server/server_strict.py"
