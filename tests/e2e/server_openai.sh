#!/usr/bin/env bash
# server_openai.sh - the official openai npm client (Node.js) against
# `blockdraft serve` on the stories260K + DFlash fixture pair: model
# listing, completions and chat, streamed and not, stop strings, errors.
# Expected texts come from `blockdraft run --json` at temperature 0 on the
# same prompt (for chat: the ChatML text written out here by hand, since
# the model has no template); the speculative statistics must be present,
# self-consistent and equal to run's.
#
# The openai package is installed with npm into $BD_BUILD/server-node the
# first time (tests/server/package.json pins the version); without network
# access to the npm registry this test fails, saying so.
source "$BD_ROOT/tests/e2e/lib/server_common.sh"

command -v node >/dev/null || fail "node (Node.js 18+) is not installed"
command -v npm >/dev/null || fail "npm is not installed"
NODE_DIR="$BD_BUILD/server-node"
mkdir -p "$NODE_DIR"
cp "$BD_ROOT/tests/server/package.json" "$BD_ROOT/tests/server/openai_client.mjs" "$NODE_DIR/"
want=$(node -e 'console.log(require(process.argv[1]).dependencies.openai)' "$BD_ROOT/tests/server/package.json")
have=$(node -e 'try{console.log(require(process.argv[1]).version)}catch(e){console.log("none")}' \
    "$NODE_DIR/node_modules/openai/package.json")
if [ "$have" != "$want" ]; then
    echo "installing openai@$want with npm into $NODE_DIR"
    (cd "$NODE_DIR" && timeout 180 npm install --no-audit --no-fund --no-save --loglevel=error) >"$T/npm.log" 2>&1 ||
        { cat "$T/npm.log"; fail "npm install of the openai package failed (is the npm registry reachable?)"; }
fi

# --no-spec-adaptive here and on the server: the draft counts are compared,
# and the adaptive rule's depend on measured time
RUN() { "$BD_BIN" run -m "$S/stories260K.gguf" -md "$S/stories260K-dflash.gguf" -c 512 -t 2 --temp 0 --json \
    --no-spec-adaptive "$@"; }
PROMPT="Once upon a time"
RUN -p "$PROMPT" -n 60 >"$T/completion.json" || fail "blockdraft run failed"
CHATML=$'<|im_start|>system\nYou are a storyteller.<|im_end|>\n<|im_start|>user\nTell me about Lily and her dog.<|im_end|>\n<|im_start|>assistant\n'
RUN -p "$CHATML" -n 40 >"$T/chat.json" || fail "blockdraft run (chat prompt) failed"
python3 - "$T" "$PROMPT" <<'PY'
import json, sys, os
d, prompt = sys.argv[1], sys.argv[2]
c = json.load(open(os.path.join(d, "completion.json")))
h = json.load(open(os.path.join(d, "chat.json")))
stop = "Lily"
assert stop in c["text"], "fixture text changed: no %r in %r" % (stop, c["text"])
exp = {
    "completion": {"prompt": prompt, "n": 60, "text": c["text"], "prompt_ids": c["prompt_ids"],
                   "generated_ids": c["generated_ids"], "spec": c["stats"]["spec"]},
    "stop": {"stop": stop, "text": c["text"][:c["text"].index(stop)]},
    "chat": {"messages": [{"role": "system", "content": "You are a storyteller."},
                          {"role": "user", "content": "Tell me about Lily and her dog."}],
             "n": 40, "text": h["text"], "prompt_ids": h["prompt_ids"], "generated_ids": h["generated_ids"],
             "spec": h["stats"]["spec"]},
}
json.dump(exp, open(os.path.join(d, "expect.json"), "w"))
PY
[ $? -eq 0 ] || fail "could not prepare expectations"

start_server openai -m "$S/stories260K.gguf" -md "$S/stories260K-dflash.gguf" --alias stories -c 512 -t 2 \
    --no-spec-adaptive
grep -q "speculative draft-dflash" "$SERVE_LOG" || fail "server did not enable DFlash"
(cd "$NODE_DIR" && BASE_URL="$BASE/v1" MODEL=stories EXPECT="$T/expect.json" timeout 120 node openai_client.mjs) ||
    fail "openai client checks failed"
stop_server
ok "server shut down cleanly on SIGTERM"
