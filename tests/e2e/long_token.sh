#!/usr/bin/env bash
# long_token.sh - a generated token longer than any fixed buffer (300 bytes)
# reaches the output whole: `run` (streamed text and --json) and `serve`
# (/v1/completions, plain and streamed). Issue 13 (textstream) / issue 16
# item 16: the text was dropped when it did not fit a 256-byte buffer.
# The model: a synthetic llama whose greedy output is token 0 forever
# (make-model --constant-output) over a vocabulary whose token 0 is
# "Ü" x 150 (tests/e2e/lib/make_vocab.py).
set -u
. "${BD_ROOT:?}/tests/e2e/lib/server_common.sh"
python3 "$BD_ROOT/tests/e2e/lib/make_vocab.py" "$T/vocab.gguf" || fail "vocab"
"$BD_BIN" make-model --arch llama --shape tiny --quant f32 --vocab "$T/vocab.gguf" --constant-output \
    -o "$T/long.gguf" >/dev/null 2>&1 || fail "make-model"
want=$(python3 -c 'print("\u00dc" * 450, end="")')

"$BD_BIN" run -m "$T/long.gguf" -p "a" -n 3 --temp 0 -t 1 --no-display-prompt >"$T/out" 2>/dev/null || fail "run"
got=$(cat "$T/out")
[ "$got" = "$want" ] || fail "run: streamed text has $(printf %s "$got" | wc -c) bytes, want 900"
ok "run: three 300-byte tokens streamed whole"

"$BD_BIN" run -m "$T/long.gguf" -p "a" -n 3 --temp 0 -t 1 --json >"$T/out.json" 2>/dev/null || fail "run --json"
python3 - "$T/out.json" <<'PY' || fail "run --json text"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["generated_ids"] == [0, 0, 0], o["generated_ids"]
assert o["text"] == "\u00dc" * 450, len(o["text"].encode())
PY
ok "run --json: text of 900 bytes"

start_server long -m "$T/long.gguf" -t 1 -c 256
python3 - "$PORT" <<'PY' || fail "serve"
import json, sys, http.client
port = int(sys.argv[1])
def post(body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()
st, b = post({"prompt": "a", "max_tokens": 3, "temperature": 0})
assert st == 200, (st, b[:200])
o = json.loads(b)
assert o["choices"][0]["text"] == "\u00dc" * 450, len(o["choices"][0]["text"])
assert o["usage"]["completion_tokens"] == 3
st, b = post({"prompt": "a", "max_tokens": 3, "temperature": 0, "stream": True})
assert st == 200
text = ""
for block in b.decode().split("\n\n"):
    block = block.strip()
    if block.startswith("data: {"):
        text += json.loads(block[6:])["choices"][0]["text"]
assert text == "\u00dc" * 450, len(text)
print("serve: plain and streamed completions carry the 900 bytes")
PY
ok "serve: long tokens whole"
stop_server
