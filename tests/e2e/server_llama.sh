#!/usr/bin/env bash
# server_llama.sh - `blockdraft serve` as a drop-in llama-server: command
# lines from llama.cpp's docs, GET /health while loading, POST /completion
# (string / ids / mixed / several prompts, stream, stop words, refused
# fields), /tokenize (llama.cpp's Qwen3 ids), /detokenize, /apply-template,
# /props, /slots, timings.draft_n, --alias, --any-model-name, GET
# /v1/models/{id}. The checks are in tests/server/llama_compat.py, written
# from llama-server's tools/server/README.md (llama.cpp v0.5.0).
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 150 python3 "$BD_ROOT/tests/server/llama_compat.py"
