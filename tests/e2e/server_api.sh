#!/usr/bin/env bash
# server_api.sh - HTTP-level checks of `blockdraft serve`: API keys (no key
# / wrong key -> 401, right key -> 200), CORS, bad input answered with 4xx
# OpenAI error objects, metrics, queue limit (503 + Retry-After),
# cancellation on disconnect, Qwen3 templates and reasoning_content,
# template errors (500 / 400), gallery endpoints, graceful SIGTERM.
# The checks are in tests/server/server_api.py (Python standard library).
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 170 python3 "$BD_ROOT/tests/server/server_api.py"
