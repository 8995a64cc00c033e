#!/usr/bin/env bash
# server_tools.sh - tool calls. (1) tools rendered through each fixture
# template that takes them, as the server does it, equal Python Jinja2
# (tests/server/server_tools.py); (2) the official openai npm client:
# calls parsed into message.tool_calls and streamed as delta.tool_calls
# (Qwen3 JSON, Qwen3.5 XML and Llama 3 bare-JSON formats), a two-step conversation whose
# second prompt is checked against Jinja2, reasoning kept apart,
# unparseable calls returned as content, tool_choice none / required /
# named, parallel_tool_calls (tests/server/openai_tools.mjs). The models
# are random: the output side uses the BLOCKDRAFT_TEST_HOOKS test hook
# (see openai_tools.mjs for exactly what is forced).
source "$BD_ROOT/tests/e2e/lib/server_common.sh"
export PYTHONDONTWRITEBYTECODE=1

QWEN="$T/qwen3-tiny.gguf"
"$BD_BIN" make-model --arch qwen3 --shape tiny --quant q8_0 --seed 1 \
    --vocab "$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf" -o "$QWEN" >/dev/null 2>&1 ||
    fail "make-model qwen3 tiny"
timeout 200 python3 "$BD_ROOT/tests/server/server_tools.py" "$QWEN" || fail "template checks failed"

command -v node >/dev/null || fail "node (Node.js 18+) is not installed"
command -v npm >/dev/null || fail "npm is not installed"
NODE_DIR="$BD_BUILD/server-node"
mkdir -p "$NODE_DIR"
cp "$BD_ROOT/tests/server/package.json" "$BD_ROOT/tests/server/openai_tools.mjs" "$NODE_DIR/"
want=$(node -e 'console.log(require(process.argv[1]).dependencies.openai)' "$BD_ROOT/tests/server/package.json")
have=$(node -e 'try{console.log(require(process.argv[1]).version)}catch(e){console.log("none")}' \
    "$NODE_DIR/node_modules/openai/package.json")
if [ "$have" != "$want" ]; then
    echo "installing openai@$want with npm into $NODE_DIR"
    (cd "$NODE_DIR" && timeout 180 npm install --no-audit --no-fund --no-save --loglevel=error) >"$T/npm.log" 2>&1 ||
        { cat "$T/npm.log"; fail "npm install of the openai package failed (is the npm registry reachable?)"; }
fi

export BLOCKDRAFT_TEST_HOOKS=1
start_server xml -m "$QWEN" --alias q -t 1 --parallel 1 \
    --chat-template-file "$BD_SHARED/fixtures/templates/Qwen3.5-4B.jinja"
XML_PID=$SERVE_PID XML_LOG=$SERVE_LOG XML_URL="$BASE/v1"
start_server llama -m "$QWEN" --alias q -t 1 --parallel 1 \
    --chat-template-file "$BD_SHARED/fixtures/templates/meta-llama-Llama-3.2-3B-Instruct.jinja"
LLAMA_PID=$SERVE_PID LLAMA_LOG=$SERVE_LOG LLAMA_URL="$BASE/v1"
start_server json -m "$QWEN" --alias q -t 1 --parallel 1
JSON_URL="$BASE/v1"
(cd "$NODE_DIR" && JSON_URL="$JSON_URL" XML_URL="$XML_URL" LLAMA_URL="$LLAMA_URL" TWOSTEP="$T/twostep.json" \
    timeout 120 node openai_tools.mjs) || fail "openai client tool-call checks failed"
timeout 60 python3 "$BD_ROOT/tests/server/server_tools.py" "$QWEN" --twostep "$T/twostep.json" "$PORT" ||
    fail "two-step prompt check failed"
stop_server
ok "json server shut down cleanly"
SERVE_PID=$XML_PID SERVE_LOG=$XML_LOG
stop_server
ok "xml server shut down cleanly"
SERVE_PID=$LLAMA_PID SERVE_LOG=$LLAMA_LOG
stop_server
ok "llama server shut down cleanly"
