#!/usr/bin/env bash
# server_localai.sh - LocalAI's gallery API on `blockdraft serve`, used as
# a LocalAI client would: /models/galleries, /models/available, apply (by
# gallery@name, with a new name and overrides, by definition URL, by
# config URL) -> poll the absolute job URL -> /v1/models -> chat -> delete,
# against a loopback gallery, with every answer decoded by the Go types
# LocalAI's server writes (tests/server/localai_gallery.py).
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 120 python3 "$BD_ROOT/tests/server/localai_gallery.py"
