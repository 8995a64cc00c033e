#!/usr/bin/env bash
# server_load.sh - bounded load test of `blockdraft serve` on loopback:
# concurrent clients, some disconnecting mid-stream, some sending garbage;
# every request answered or rejected cleanly, no crash, memory flat, clean
# SIGTERM. Runs on the ASan+UBSan build: $BD_BIN when it is one (e.g.
# `tests/run.sh build-debug server`), else build-debug/blockdraft when
# `make debug-bin` has built it (make test does); without one it fails.
# Checks are in tests/server/server_load.py.
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 170 python3 "$BD_ROOT/tests/server/server_load.py"
