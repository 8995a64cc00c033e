#!/usr/bin/env bash
# server_grammar.sh - structured output through the server: response_format
# json_schema / json_object, llama-server's grammar / json_schema fields,
# serve's default grammar (-j / --grammar), bad schemas and grammars -> 400;
# outputs parse and validate, and DFlash output under a grammar equals plain
# output. Checks are in tests/server/server_grammar.py.
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 300 python3 "$BD_ROOT/tests/server/server_grammar.py"
