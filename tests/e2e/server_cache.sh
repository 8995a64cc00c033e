#!/usr/bin/env bash
# server_cache.sh - prompt-cache reuse across requests: a 20-turn chat
# (two interleaved conversations on two slots) forwards only what the slot
# does not hold (counts asserted), replies identical with the cache off
# and with DFlash; a hybrid (qwen35) target reuses or falls back to a
# fresh prefill. Checks are in tests/server/server_cache.py.
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 300 python3 "$BD_ROOT/tests/server/server_cache.py"
