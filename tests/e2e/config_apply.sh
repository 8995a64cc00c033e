#!/usr/bin/env bash
# config_apply.sh - a model config means the same to `run NAME` and `serve`
# (n_draft, repeat_penalty), and the repetition penalty stays lossless under
# speculative decoding. The checks are in tests/server/config_apply.py.
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 300 python3 "$BD_ROOT/tests/server/config_apply.py"
