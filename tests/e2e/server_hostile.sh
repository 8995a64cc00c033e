#!/usr/bin/env bash
# server_hostile.sh - `blockdraft serve` under hostile and careless
# conditions on loopback (issue 16): crafted templates, a model name that is
# a file in the working directory, a model file that fails to load or is
# truncated while served, foreign Origin/Host headers and non-JSON bodies,
# slowloris, half-closed clients, SIGTERM during a gallery download,
# oversized configs and prompts. Runs on the ASan+UBSan build (as
# server_load.sh); checks are in tests/server/server_hostile.py.
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 240 python3 "$BD_ROOT/tests/server/server_hostile.py"
