# llama_compat.py - `blockdraft serve` as a drop-in llama-server (run by
# tests/e2e/server_llama.sh). Shapes, field names, types and status codes
# are the ones llama-server's tools/server/README.md (llama.cpp v0.5.0)
# documents -- written from that README and its examples, not from our
# output. Expected texts and token ids come from `blockdraft run --json`
# at temperature 0 (another path through the engine), the byte-piece
# example is the README's own ("a" with an acute accent on stories260k),
# and the Qwen3 tokenizer cases are llama.cpp's ids (fixture cases.tsv).
#
#   - command lines from llama.cpp's docs run unchanged (plus --port);
#     GPU flags are accepted with a note, unsupported flags refused with
#     the blockdraft equivalent named, `serve --help` grouped as
#     llama-server's
#   - GET /health: 503 {"error": {"code": 503, "message": "Loading model",
#     "type": "unavailable_error"}} while the model loads, then 200
#   - POST /completion: string / ids / mixed / several prompts, stream
#     (data: events, no [DONE]), stop words, n_predict 0, refused fields
#   - /tokenize, /detokenize, /apply-template, /props, /slots
#     (fail_on_no_slot, --no-slots), timings.draft_n / draft_n_accepted
#   - --alias (several), --any-model-name, GET /v1/models[/{id}], CLI
#     sampling defaults (-n, --temp, --seed), --api-key-file
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import (BIN, DRAFTER, SHARED, TARGET, Server, check, finish, jbody, request, tmpdir)

T = tmpdir()


def run_json(prompt, n, extra=()):
    # --no-spec-adaptive (and on the "main" server): the draft counts are
    # compared, and the adaptive rule's depend on measured time
    r = subprocess.run([BIN, "run", "-m", TARGET, "-md", DRAFTER, "-c", "512", "-t", "1", "--temp", "0", "--json",
                        "--no-spec-adaptive", "-p", prompt, "-n", str(n)] + list(extra), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def llama_error(st, b, code, etype):
    """llama-server's error body: {"error": {"code": int, "message": str, "type": str}}."""
    j = jbody(b)
    e = j.get("error") if isinstance(j, dict) else None
    return st == code and isinstance(e, dict) and e.get("code") == code and e.get("type") == etype and \
        isinstance(e.get("message"), str) and e["message"] != ""


def sse_data(b):
    """llama-server's /completion stream: `data: {json}` events only."""
    out = []
    for block in b.decode().split("\n\n"):
        block = block.strip()
        if not block:
            continue
        assert block.startswith("data: "), block[:60]
        out.append(json.loads(block[6:]))
    return out


PROMPT = "Once upon a time"
EXP = run_json(PROMPT, 40)
EXP_TEXT, EXP_IDS, EXP_PROMPT_IDS = EXP["text"], EXP["generated_ids"], EXP["prompt_ids"]
check(EXP_PROMPT_IDS[0] == 1 and len(EXP_IDS) == 40, "reference: run --json gives BOS + prompt and 40 tokens")

# ---------------------------------------------------------------------------
# command lines from llama.cpp's docs, unchanged but for --port
# ---------------------------------------------------------------------------
# tools/server/README.md (Docker example, host loopback here):
#   -m models/7B/ggml-model.gguf -c 512 --host 0.0.0.0 --port 8080 --n-gpu-layers 99
port = free_port()
s = Server(T, "readme", ["-m", TARGET, "-c", "512", "--host", "127.0.0.1", "--port", str(port), "--n-gpu-layers", "99"])
log = s.text_log()
check(s.port == port, "README command line: listens on the --port given")
check(len([l for l in log.splitlines() if "-ngl" in l or "--n-gpu-layers" in l]) == 1 and "ignored" in log,
      "--n-gpu-layers 99 accepted with a one-line note")
st, _, b = request(port, "POST", "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0})
check(st == 200 and jbody(b)["content"] == run_json(PROMPT, 8)["text"], "README command line: /completion as run")
check(s.stop() == 0, "README server: clean exit")
# docs/speculative.md (DFlash):
#   -m Qwen3-4B.gguf -md Qwen3-4B-DFlash.gguf --spec-type draft-dflash --spec-draft-n-max 15 -fa on --jinja
s = Server(T, "specdoc", ["-m", TARGET, "-md", DRAFTER, "--spec-type", "draft-dflash", "--spec-draft-n-max", "15",
                          "-fa", "on", "--jinja", "-c", "512", "-t", "1"])
st, _, b = request(s.port, "POST", "/completion", {"prompt": PROMPT, "n_predict": 40, "temperature": 0})
j = jbody(b)
check(st == 200 and j["content"] == EXP_TEXT, "speculative.md command line: DFlash output equals run's")
check(j["timings"].get("draft_n", 0) > 0 and j["timings"]["draft_n_accepted"] <= j["timings"]["draft_n"],
      "timings carry draft_n / draft_n_accepted")
check(j["speculative"].get("adaptive") is False,
      "--spec-draft-n-max given: the fixed draft length, as llama-server (speculative.adaptive false)")
st, _, b = request(s.port, "GET", "/props")
prm = ((jbody(b) or {}).get("default_generation_settings") or {}).get("params") or {}
check(st == 200 and prm.get("speculative.adaptive") is False and prm.get("speculative.n_max") == 7,
      "/props: speculative.adaptive false, speculative.n_max 15 clamped to the drafter's 7")
check(s.stop() == 0, "speculative.md server: clean exit")


def refused(args, needle):
    r = subprocess.run([BIN, "serve", "--port", "0"] + args, capture_output=True, text=True, timeout=30)
    return r.returncode == 2 and needle in r.stderr, r.stderr.strip()


for args, needle in [(["-hf", "ggml-org/gemma-3-4b-it-GGUF"], "blockdraft pull"),
                     (["--no-jinja"], "--chat-template-file"),
                     (["--draft-max", "8"], "--spec-draft-n-max"),
                     (["--lora", "x.gguf"], "LoRA"),
                     (["--mirostat", "2"], "--temp"),
                     (["--chat-template", "llama3"], "--chat-template-file"),
                     (["--reasoning-format", "deepseek-legacy"], "deepseek"),
                     (["-rea", "off"], "enable_thinking"),
                     (["--embedding"], "text generation only"),
                     (["--yarn-ext-factor", "1"], "--rope-scaling"),
                     (["--rope-scaling", "longrope"], "none, linear or yarn"),
                     (["--no-such-flag"], "unknown option")]:
    ok, err = refused(args, needle)
    check(ok, "refused with the alternative named: %s -> %r" % (" ".join(args), err[-160:]))
r = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, timeout=30)
heads = [r.stderr.find(h) for h in ("----- common params -----", "----- sampling params -----",
                                    "----- server-specific params -----")]
check(r.returncode == 0 and -1 not in heads and heads == sorted(heads), "serve --help grouped as llama-server's")

# ---------------------------------------------------------------------------
# GET /health while the model loads: 503, then 200
# ---------------------------------------------------------------------------
# The model's open() waits on a gate file (tests/tools/open_gate.c, an
# LD_PRELOAD shim), so the server is up and loading for as long as the
# test wants; then the load goes on and /health turns 200.
gated = os.path.join(T, "loading.gguf")
shutil.copy(TARGET, gated)
gate = os.path.join(T, "gate")
shim = os.path.join(os.environ["BD_BUILD"], "tests", "bd-open-gate.so")
port = free_port()
logp = os.path.join(T, "loading.log")
env = dict(os.environ, LD_PRELOAD=shim, BD_GATE_PATH=gated, BD_GATE_FILE=gate)
proc = subprocess.Popen([BIN, "serve", "--port", str(port), "-m", gated, "-t", "1"], stdout=open(logp, "wb"),
                        stderr=subprocess.STDOUT, env=env)
st, b = None, b""
for _ in range(200):
    try:
        st, h, b = request(port, "GET", "/health", timeout=5)
        break
    except OSError:
        time.sleep(0.05)
check(llama_error(st, b, 503, "unavailable_error") and jbody(b)["error"]["message"] == "Loading model",
      "/health while loading: 503 with llama-server's body (%s %s)" % (st, b[:120]))
st2, _, b2 = request(port, "GET", "/v1/health", timeout=5)
check(st2 == 503, "/v1/health while loading: 503")
open(gate, "w").close()
for _ in range(200):
    st, _, b = request(port, "GET", "/health", timeout=5)
    if st == 200:
        break
    time.sleep(0.05)
check(st == 200 and jbody(b) == {"status": "ok"}, "/health once the load went on: 200 (%s)" % st)
proc.terminate()
check(proc.wait(timeout=30) == 0, "gated server: clean exit")
# A FIFO as the model is no model file: refused at once, never waited on.
fifo = os.path.join(T, "fifo.gguf")
os.mkfifo(fifo)
port = free_port()
proc = subprocess.Popen([BIN, "serve", "--port", str(port), "-m", fifo], stdout=open(logp, "wb"),
                        stderr=subprocess.STDOUT)
rc = proc.wait(timeout=30)
check(rc == 1 and "not a regular file" in open(logp, errors="replace").read(), "a FIFO model is refused cleanly (rc 1)")

# ---------------------------------------------------------------------------
# the main server: a llama-server style command line with speculation
# ---------------------------------------------------------------------------
keys = os.path.join(T, "keys.txt")
open(keys, "w").write("# comment line\nkey-one\n\nkey-two\n")
s = Server(T, "main", ["-m", TARGET, "-md", DRAFTER, "-a", "stories,gpt-3.5-turbo", "--alias", "tiny", "-c", "512",
                       "-t", "1", "-np", "1", "--metrics", "--slots", "-fa", "auto", "--api-key-file", keys,
                       "--no-spec-adaptive"])
p = s.port
H = {"Authorization": "Bearer key-two"}
st, _, b = request(p, "GET", "/health")
check(st == 200 and jbody(b) == {"status": "ok"}, "/health once loaded: 200 {\"status\": \"ok\"} (no key needed)")
st, _, b = request(p, "POST", "/completion", {"prompt": PROMPT})
check(st == 401, "--api-key-file: no key -> 401")
st, _, b = request(p, "POST", "/completion", {"prompt": PROMPT, "n_predict": 1}, {"Authorization": "Bearer # comment line"})
check(st == 401, "--api-key-file: comment lines are not keys")


def cmpl(body, headers=H):
    st, h, b = request(p, "POST", "/completion", body, headers)
    return st, jbody(b), b


# the response of the README, field by field
st, j, _ = cmpl({"prompt": PROMPT, "n_predict": 40, "temperature": 0, "return_tokens": True})
types = {"index": is_int, "content": lambda v: isinstance(v, str), "tokens": lambda v: isinstance(v, list),
         "id_slot": is_int, "stop": lambda v: v is True, "model": lambda v: isinstance(v, str),
         "tokens_predicted": is_int, "tokens_evaluated": is_int, "generation_settings": lambda v: isinstance(v, dict),
         "prompt": lambda v: isinstance(v, str), "has_new_line": lambda v: isinstance(v, bool),
         "truncated": lambda v: isinstance(v, bool), "stop_type": lambda v: v in ("none", "eos", "limit", "word"),
         "stopping_word": lambda v: isinstance(v, str), "tokens_cached": is_int, "timings": lambda v: isinstance(v, dict)}
check(st == 200 and all(k in j and f(j[k]) for k, f in types.items()),
      "/completion: every README field with its type (%s)" % [k for k, f in types.items() if not (k in j and f(j[k]))])
check(j["content"] == EXP_TEXT and j["tokens"] == EXP_IDS, "/completion: content and tokens equal run's")
check(j["tokens_predicted"] == 40 and j["tokens_evaluated"] == len(EXP_PROMPT_IDS) and j["stop_type"] == "limit" and
      j["stopping_word"] == "" and j["truncated"] is False and j["has_new_line"] == ("\n" in EXP_TEXT),
      "/completion: counts, stop_type limit, has_new_line")
check(j["prompt"] == "<s> " + PROMPT, "/completion: prompt is the processed prompt, BOS written out")
t = j["timings"]
tkeys = ["cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n", "predicted_ms",
         "predicted_per_token_ms", "predicted_per_second"]
check(all(k in t and is_num(t[k]) for k in tkeys) and t["predicted_n"] == 40 and
      t["prompt_n"] + t["cache_n"] == j["tokens_evaluated"], "timings: README keys; prompt_n + cache_n = prompt tokens")
sp = j.get("speculative", {})
check(t.get("draft_n") == sp.get("n_drafted") == EXP["stats"]["spec"]["n_drafted"] and
      t.get("draft_n_accepted") == sp.get("n_accepted") == EXP["stats"]["spec"]["n_accepted"],
      "timings.draft_n / draft_n_accepted equal the speculative counts (and run's)")
gs = j["generation_settings"]
check(gs.get("n_predict") == 40 and gs.get("temperature") == 0 and isinstance(gs.get("samplers"), list) and
      gs.get("seed") == 4294967295, "generation_settings: n_predict, temperature, samplers, random seed as 4294967295")

# prompt as token ids, and mixed (an id first: no BOS added to the string)
st, j, _ = cmpl({"prompt": EXP_PROMPT_IDS, "n_predict": 40, "temperature": 0})
check(st == 200 and j["content"] == EXP_TEXT, "/completion: prompt as token ids")
st, _, tk = request(p, "POST", "/tokenize", {"content": PROMPT}, H)
rest = jbody(tk)["tokens"]
check(rest == EXP_PROMPT_IDS[1:], "/tokenize: add_special defaults to false (no BOS)")
st, j, _ = cmpl({"prompt": [EXP_PROMPT_IDS[0], PROMPT], "n_predict": 40, "temperature": 0})
check(st == 200 and j["content"] == EXP_TEXT and j["tokens_evaluated"] == len(EXP_PROMPT_IDS),
      "/completion: mixed ids and text")
# several prompts: an array of results, one per prompt, with its index
st, j, _ = cmpl({"prompt": [PROMPT, EXP_PROMPT_IDS], "n_predict": 40, "temperature": 0})
check(st == 200 and isinstance(j, list) and [x["index"] for x in j] == [0, 1] and
      all(x["content"] == EXP_TEXT for x in j), "/completion: several prompts -> array with index")
# stop word
stop = "Lily"
assert stop in EXP_TEXT
st, j, _ = cmpl({"prompt": PROMPT, "n_predict": 40, "temperature": 0, "stop": [stop]})
check(st == 200 and j["content"] == EXP_TEXT[:EXP_TEXT.index(stop)] and j["stop_type"] == "word" and
      j["stopping_word"] == stop, "/completion: stop word -> stop_type word, stopping_word, text before it")
# n_predict 0: the prompt is evaluated, nothing generated
st, j, _ = cmpl({"prompt": PROMPT, "n_predict": 0})
check(st == 200 and j["content"] == "" and j["tokens_predicted"] == 0, "/completion: n_predict 0 -> no tokens")
# response_fields (README): keeps the listed fields, unnests "a/b"
st, j, _ = cmpl({"prompt": PROMPT, "n_predict": 4, "temperature": 0,
                 "response_fields": ["content", "generation_settings/n_predict"]})
check(st == 200 and j == {"content": EXP_TEXT[:len(j.get("content", ""))], "generation_settings/n_predict": 4} and
      EXP_TEXT.startswith(j["content"]), "/completion: response_fields")

# streaming: data events, the last with stop true and timings; no [DONE]
st, h, b = request(p, "POST", "/completion", {"prompt": PROMPT, "n_predict": 40, "temperature": 0, "stream": True}, H)
ev = sse_data(b) if st == 200 else []
check(st == 200 and h.get("content-type", "").startswith("text/event-stream") and b"[DONE]" not in b,
      "/completion stream: text/event-stream, no [DONE]")
check(len(ev) >= 2 and all(e["stop"] is False for e in ev[:-1]) and ev[-1]["stop"] is True and
      "timings" in ev[-1] and ev[-1]["content"] == "", "/completion stream: partials then the final result")
check("".join(e["content"] for e in ev) == EXP_TEXT and sum((e["tokens"] for e in ev[:-1]), []) == EXP_IDS,
      "/completion stream: contents and tokens concatenate to run's")
check(all(set(("index", "content", "tokens", "stop", "id_slot", "tokens_predicted", "tokens_evaluated")) <= set(e)
          for e in ev[:-1]), "/completion stream: partial fields of llama-server")

# refused fields, never ignored; their "off" values are accepted
# (grammar / json_schema: tests/server/server_grammar.py)
for body, name in [({"n_probs": 21}, "n_probs"), ({"n_probs": "3"}, "n_probs"),
                   ({"n_probs": 3, "post_sampling_probs": True}, "post_sampling_probs"), ({"mirostat": 2}, "mirostat"), ({"typical_p": 0.5}, "typical_p"),
                   ({"logit_bias": [[15, "high"]]}, "logit_bias"), ({"logit_bias": 5}, "logit_bias"),
                   ({"presence_penalty": "x"}, "presence_penalty"), ({"id_slot": 3}, "id_slot")]:
    st, j, b = cmpl(dict(body, prompt=PROMPT, n_predict=2))
    check(llama_error(st, b, 400, "invalid_request_error") and name in j["error"]["message"],
          "/completion: %s refused with 400 naming it" % name)
st, j, _ = cmpl({"prompt": PROMPT, "n_predict": 40, "temperature": 0, "grammar": "", "typical_p": 1.0,
                 "presence_penalty": 0, "frequency_penalty": 0, "mirostat": 0, "dry_multiplier": 0,
                 "xtc_probability": 0, "n_probs": 0, "cache_prompt": True, "logit_bias": []})
check(st == 200 and j["content"] == EXP_TEXT, "/completion: the off values llama.cpp's UI sends are accepted")
# logit_bias in llama-server's shapes and the presence / frequency penalties
# are the sampler's: the same request through /v1/completions (OpenAI's
# shape, another parser) gives the same tokens, and the bias had an effect
ban = EXP_IDS[1]
for lbody, obody, what in [({"logit_bias": [[ban, False]]}, {"logit_bias": {str(ban): -100}}, "[[id, false]]"),
                           ({"logit_bias": {str(ban): -100}}, {"logit_bias": {str(ban): -100}}, "{\"id\": bias}"),
                           ({"presence_penalty": 1.5, "frequency_penalty": 0.5},
                            {"presence_penalty": 1.5, "frequency_penalty": 0.5}, "presence/frequency penalties")]:
    st, j, _ = cmpl(dict(lbody, prompt=PROMPT, n_predict=40, temperature=0, return_tokens=True))
    st2, _, b2 = request(p, "POST", "/v1/completions", dict(obody, model="stories", prompt=PROMPT, max_tokens=40,
                                                             temperature=0, return_prompt_ids=True), H)
    j2 = jbody(b2)
    ids = j["tokens"] if st == 200 else None
    check(st == 200 and st2 == 200 and ids == j2["generated_ids"] and ids != EXP_IDS and
          ("penalt" in what or ban not in ids),
          "/completion %s: the same tokens as /v1/completions, not the unbiased ones" % what)
# n_probs (README "completion_probabilities"): one entry per generated token
# with id, token, bytes, logprob and top_logprobs (at most n_probs, most
# likely first). The values are the target's log-softmax: they must equal
# /v1/completions' logprobs for the same greedy request (those are pinned
# to the model's logits in tests/server/server_logprobs.py), and the
# streamed entries must equal the non-streamed ones.
st, j, _ = cmpl({"prompt": PROMPT, "n_predict": 12, "temperature": 0, "n_probs": 3})
cp = j.get("completion_probabilities", []) if st == 200 else []
check(st == 200 and len(cp) == j["tokens_predicted"] == 12 and [e["id"] for e in cp] == EXP_IDS[:12],
      "/completion n_probs: one entry per generated token, ids as run's")
shape_ok = all(set(e) == {"id", "token", "bytes", "logprob", "top_logprobs"} and len(e["top_logprobs"]) == 3 and
               all(set(t) == {"id", "token", "bytes", "logprob"} for t in e["top_logprobs"]) for e in cp)
order_ok = all(e["top_logprobs"][0]["id"] == e["id"] and
               all(a["logprob"] >= b["logprob"] for a, b in zip(e["top_logprobs"], e["top_logprobs"][1:])) and
               e["logprob"] <= 0 and sum(math.exp(t["logprob"]) for t in e["top_logprobs"]) <= 1 + 1e-6 for e in cp)
bytes_ok = all(bytes(e["bytes"]).decode("utf-8", "replace") == e["token"] or e["token"].startswith("byte: ")
               for e in cp)
check(cp and shape_ok and order_ok and bytes_ok,
      "/completion n_probs: llama-server's entry shape, greedy token first, sorted, bytes are the token's")
st2, _, b2 = request(p, "POST", "/v1/completions", {"model": "stories", "prompt": PROMPT, "max_tokens": 12,
                                                     "temperature": 0, "logprobs": 3}, H)
lp = (jbody(b2) or {}).get("choices", [{}])[0].get("logprobs") or {}
tl = lp.get("token_logprobs") or []
check(st2 == 200 and len(tl) == len(cp) and cp and
      all(abs(a - e["logprob"]) <= 1e-6 for a, e in zip(tl, cp)) and
      all(sorted(d.values(), reverse=True) == [t["logprob"] for t in e["top_logprobs"]]
          for d, e in zip(lp.get("top_logprobs") or [], cp)),
      "/completion n_probs: the same log-probabilities as /v1/completions logprobs")
st, h, b = request(p, "POST", "/completion", {"prompt": PROMPT, "n_predict": 12, "temperature": 0, "n_probs": 3,
                                             "stream": True}, H)
ev = sse_data(b) if st == 200 else []
scp = sum((e.get("completion_probabilities", []) for e in ev[:-1]), [])
check(st == 200 and scp == cp and "completion_probabilities" not in (ev[-1] if ev else {}),
      "/completion n_probs stream: the partials carry the entries, equal to the non-streamed ones")

# samplers (llama.cpp's list): the ones left out are off -- top_k 1 without
# "top_k" in the list samples as top_k 0 does, with the same seed
base = {"prompt": PROMPT, "n_predict": 24, "temperature": 1.0, "seed": 9}
st, ja, _ = cmpl(dict(base, top_k=1, samplers=["top_p", "min_p", "temperature"]))
st2, jb, _ = cmpl(dict(base, top_k=0))
check(st == 200 and st2 == 200 and ja["content"] == jb["content"] and ja["content"] != EXP_TEXT[:len(ja["content"])],
      "/completion: samplers -- a sampler left out of the list is off")
st, ja, _ = cmpl(dict(base, top_k=1, samplers="kt"))
check(st == 200 and ja["content"] == cmpl(dict(base, top_k=1))[1]["content"], "/completion: samplers as letters")
st, j, b = cmpl(dict(base, samplers=["nucleus"]))
check(llama_error(st, b, 400, "invalid_request_error") and "samplers" in j["error"]["message"],
      "/completion: an unknown sampler -> 400")
st, j, b = cmpl({"n_predict": 2})
check(llama_error(st, b, 400, "invalid_request_error"), "/completion: no prompt -> 400")
st, j, b = cmpl({"prompt": [5, 99999], "n_predict": 2})
check(llama_error(st, b, 400, "invalid_request_error"), "/completion: a token id outside the vocabulary -> 400")
st, _, b = request(p, "POST", "/completion", raw=b"{not json", headers=H)
check(llama_error(st, b, 400, "invalid_request_error"), "/completion: bad JSON -> 400 in llama-server's shape")
st, _, b = request(p, "GET", "/completion", headers=H)
check(st == 405, "/completion: GET -> 405")

# /tokenize and /detokenize
# The README's example: "\u00e1" on stories260k gives the byte tokens 198 and 164, whose
# pieces are not UTF-8 on their own and so come as byte lists [195] and [161].
# llama.cpp v0.5.0 itself (tests/oracle: bd-oracle tokenize, add_special off)
# gives [410, 198, 164] on this file: the SPM space prefix (410 is " ") comes
# first, which the README's older example lacks.
st, _, b = request(p, "POST", "/tokenize", {"content": "\u00e1", "with_pieces": True}, H)
check(st == 200 and jbody(b) == {"tokens": [{"id": 410, "piece": " "}, {"id": 198, "piece": [195]},
                                            {"id": 164, "piece": [161]}]},
      "/tokenize: the README's byte-piece example ('\u00e1' -> pieces [195], [161])")
st, _, b = request(p, "POST", "/tokenize", {"content": PROMPT, "add_special": True, "with_pieces": True}, H)
toks = jbody(b)["tokens"]
check(st == 200 and [x["id"] for x in toks] == EXP_PROMPT_IDS and all(isinstance(x["piece"], str) for x in toks),
      "/tokenize: add_special adds BOS; pieces are strings when valid UTF-8")
st, _, b = request(p, "POST", "/detokenize", {"tokens": EXP_IDS}, H)
check(st == 200 and jbody(b) == {"content": EXP_TEXT}, "/detokenize: generated ids -> run's text")
st, _, b = request(p, "POST", "/detokenize", {"tokens": [1, 100000]}, H)
check(llama_error(st, b, 400, "invalid_request_error"), "/detokenize: bad id -> 400")

# /apply-template: the ChatML prompt (the model has no template), by hand
msgs = [{"role": "system", "content": "You are a storyteller."}, {"role": "user", "content": "Hi"}]
st, _, b = request(p, "POST", "/apply-template", {"messages": msgs}, H)
check(st == 200 and jbody(b) == {"prompt": "<|im_start|>system\nYou are a storyteller.<|im_end|>\n<|im_start|>user\n"
                                           "Hi<|im_end|>\n<|im_start|>assistant\n"}, "/apply-template: prompt")
st, _, b = request(p, "POST", "/apply-template", {"messages": "nope"}, H)
check(llama_error(st, b, 400, "invalid_request_error"), "/apply-template: bad messages -> 400")

# /props
st, _, b = request(p, "GET", "/props", headers=H)
j = jbody(b)
dgs = j.get("default_generation_settings", {}) if j else {}
check(st == 200 and isinstance(dgs.get("params"), dict) and dgs.get("n_ctx") == 512 and j["total_slots"] == 1 and
      j["model_path"] == TARGET and isinstance(j["chat_template"], str) and "im_start" in j["chat_template"] and
      isinstance(j["build_info"], str) and j["modalities"].get("vision") is False and j["is_sleeping"] is False,
      "/props: default_generation_settings, total_slots, model_path, chat_template, build_info, modalities")
check(dgs["params"].get("speculative.adaptive") is False, "/props: --no-spec-adaptive gives speculative.adaptive false")

# /slots, and fail_on_no_slot while the only slot works
st, _, b = request(p, "GET", "/slots", headers=H)
sl = jbody(b)
slot_keys = ("id", "id_task", "n_ctx", "speculative", "is_processing", "params", "next_token")
check(st == 200 and isinstance(sl, list) and len(sl) == 1 and all(k in sl[0] for k in slot_keys) and
      sl[0]["is_processing"] is False and sl[0]["speculative"] is True and
      set(("has_next_token", "has_new_line", "n_remain", "n_decoded")) <= set(sl[0]["next_token"]),
      "/slots: one slot with llama-server's fields")
st, _, b = request(p, "GET", "/slots?fail_on_no_slot=1", headers=H)
check(st == 200, "/slots?fail_on_no_slot=1 with an idle slot -> 200")
res = {}
th = threading.Thread(target=lambda: res.update(r=request(p, "POST", "/completion",
                                                          {"prompt": PROMPT, "n_predict": 400, "ignore_eos": True,
                                                           "temperature": 1.0, "seed": 7}, H)))
th.start()
busy = None
for _ in range(100):
    st, _, b = request(p, "GET", "/slots", headers=H)
    if jbody(b)[0]["is_processing"]:
        busy = jbody(b)[0]
        st2, _, b2 = request(p, "GET", "/slots?fail_on_no_slot=1", headers=H)
        break
    time.sleep(0.01)
th.join(60)
check(busy is not None and busy["id_task"] >= 0 and busy["next_token"]["has_next_token"] is True and
      busy["params"]["seed"] == 7, "/slots: the busy slot shows its task and params")
check(busy is not None and llama_error(st2, b2, 503, "unavailable_error") and
      jbody(b2)["error"]["message"] == "no slot available", "/slots?fail_on_no_slot=1 while busy -> 503")
check(res.get("r", (0,))[0] == 200 and jbody(res["r"][2])["tokens_predicted"] == 400 and
      jbody(res["r"][2])["stop_type"] == "limit", "ignore_eos: 400 tokens, stop_type limit")

# names: --alias (several), GET /v1/models, GET /v1/models/{id}
st, _, b = request(p, "GET", "/v1/models", headers=H)
d = jbody(b)["data"]
check(st == 200 and d[0]["id"] == "stories" and d[0]["aliases"] == ["stories", "gpt-3.5-turbo", "tiny"] and
      d[0]["status"]["value"] == "loaded", "/v1/models: the first alias is the id, all aliases listed, loaded")
for name in ("stories", "gpt-3.5-turbo", "tiny"):
    st, _, b = request(p, "POST", "/v1/chat/completions",
                       {"model": name, "messages": msgs, "max_tokens": 2, "temperature": 0}, H)
    check(st == 200 and jbody(b)["model"] == name, "chat with model %r (an alias) -> 200" % name)
    st, _, b = request(p, "GET", "/v1/models/" + name, headers=H)
    check(st == 200 and jbody(b)["id"] == name and jbody(b)["object"] == "model", "GET /v1/models/%s" % name)
st, _, b = request(p, "POST", "/v1/chat/completions", {"model": "gpt-4o", "messages": msgs, "max_tokens": 2}, H)
check(st == 404, "an unknown model name -> 404 without --any-model-name")
st, _, b = request(p, "GET", "/v1/models/gpt-4o", headers=H)
e = (jbody(b) or {}).get("error", {})
check(st == 404 and e.get("code") == "model_not_found" and isinstance(e.get("message"), str),
      "GET /v1/models/unknown -> 404 model_not_found")
st, _, b = request(p, "POST", "/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 8}, H)
j = jbody(b)
check(st == 200 and j["timings"].get("draft_n") == j["speculative"]["n_drafted"] and
      j["timings"].get("draft_n_accepted") == j["speculative"]["n_accepted"], "chat timings: draft_n, draft_n_accepted")
check(s.stop() == 0, "main server: clean exit")

# ---------------------------------------------------------------------------
# --any-model-name, -c 0, command-line sampling defaults, --no-slots
# ---------------------------------------------------------------------------
s = Server(T, "any", ["-m", TARGET, "--any-model-name", "-c", "0", "-t", "1", "-n", "12", "--temp", "0", "--seed", "3",
                      "--no-slots"])
p = s.port
st, _, b = request(p, "POST", "/v1/chat/completions", {"model": "gpt-3.5-turbo", "messages": msgs, "max_tokens": 2})
check(st == 200, "--any-model-name: gpt-3.5-turbo reaches the -m model")
st, _, b = request(p, "GET", "/v1/models/gpt-3.5-turbo")
check(st == 200 and jbody(b)["id"] == "gpt-3.5-turbo", "--any-model-name: GET /v1/models/{any} -> 200")
st, _, b = request(p, "POST", "/completion", {"prompt": PROMPT})
j = jbody(b)
plain = run_json(PROMPT, 12, [])  # the drafter does not change greedy output
check(st == 200 and j["tokens_predicted"] == 12 and j["content"] == plain["text"] and
      j["generation_settings"]["seed"] == 3, "-n 12 --temp 0 --seed 3 are the request defaults")
st, _, b = request(p, "GET", "/props")
check(st == 200 and jbody(b)["default_generation_settings"]["n_ctx"] == 128,
      "-c 0: the model's trained context (128 for stories260K)")
st, _, b = request(p, "GET", "/slots")
check(llama_error(st, b, 501, "not_supported_error"), "--no-slots: GET /slots -> 501 not_supported_error")
check(s.stop() == 0, "any-model server: clean exit")

# ---------------------------------------------------------------------------
# RoPE overrides (llama.cpp's context flags): the -m model's sessions use
# them, as `run` with the same flags does
# ---------------------------------------------------------------------------
ROPE = ["--rope-scaling", "yarn", "--rope-scale", "8", "--yarn-orig-ctx", "32"]
s = Server(T, "rope", ["-m", TARGET, "-t", "1", "-n", "12", "--temp", "0", "-c", "512"] + ROPE)
st, _, b = request(s.port, "POST", "/completion", {"prompt": PROMPT})
j = jbody(b)
scaled, plain = run_json(PROMPT, 12, ROPE), run_json(PROMPT, 12, [])
check(st == 200 and j["content"] == scaled["text"] and scaled["generated_ids"] != plain["generated_ids"],
      "--rope-scaling yarn --rope-scale 8 --yarn-orig-ctx 32: /completion as `run` with those flags, unlike without")
check(s.stop() == 0, "rope server: clean exit")

# ---------------------------------------------------------------------------
# /tokenize against llama.cpp's ids (Qwen3 vocabulary, cases.tsv)
# ---------------------------------------------------------------------------
QWEN = os.path.join(T, "qwen3-tiny.gguf")
vocab = os.path.join(SHARED, "fixtures", "qwen3-tokenizer", "qwen3-vocab.gguf")
r = subprocess.run([BIN, "make-model", "--arch", "qwen3", "--shape", "tiny", "--quant", "q8_0", "--seed", "1", "--vocab",
                    vocab, "-o", QWEN], capture_output=True, text=True)
check(r.returncode == 0, "make-model qwen3 tiny")
s = Server(T, "qwen", ["-m", QWEN, "-t", "1"])
n_cases = bad = 0
for line in open(os.path.join(SHARED, "fixtures", "qwen3-tokenizer", "cases.tsv"), encoding="utf-8"):
    if line.startswith("#") or not line.strip():
        continue
    f = line.rstrip("\n").split("\t")
    if len(f) < 4 or f[0] == "name":
        continue
    try:
        text = bytes.fromhex(f[2]).decode("utf-8", errors="strict") if f[2] else ""
    except UnicodeDecodeError:
        continue  # JSON carries UTF-8 text only
    if "\0" in text:
        continue  # a NUL in a request string is refused (400) here, unlike nlohmann::json
    want = [int(x) for x in f[3].split()] if f[3] else []
    st, _, b = request(s.port, "POST", "/tokenize", {"content": text, "parse_special": f[1] in ("1", "true")})
    n_cases += 1
    if st != 200 or jbody(b)["tokens"] != want:
        bad += 1
        if bad <= 3:
            print("   mismatch %s: %s vs %s" % (f[0], jbody(b), want))
check(n_cases >= 20 and bad == 0, "/tokenize equals llama.cpp on %d Qwen3 cases (%d differ)" % (n_cases, bad))
check(s.stop() == 0, "qwen server: clean exit")

# ---------------------------------------------------------------------------
# /v1/responses with a thinking template: the reasoning item first (the
# prompt ends inside "<think>", so what the random tiny model writes is
# reasoning), then the message; reasoning.effort "none" turns thinking off.
# Event names and fields from the OpenAI API reference (openai npm types).
# ---------------------------------------------------------------------------
tmpl35 = os.path.join(SHARED, "fixtures", "templates", "Qwen3.5-4B.jinja")
s = Server(T, "qwen35", ["-m", QWEN, "-a", "q", "-t", "1", "--chat-template-file", tmpl35])
rq = {"model": "q", "input": "Hi", "max_output_tokens": 6, "temperature": 0}
st, _, b = request(s.port, "POST", "/v1/responses", rq)
j = jbody(b)
out = j.get("output", []) if j else []
check(st == 200 and [o["type"] for o in out] == ["reasoning", "message"] and out[0]["content"][0]["type"] ==
      "reasoning_text" and out[0]["content"][0]["text"] and out[1]["content"][0]["text"] == "" and
      j["status"] == "incomplete", "/v1/responses: a reasoning item, then the (empty) message")
st, h, b = request(s.port, "POST", "/v1/responses", dict(rq, stream=True))
evs = []
for block in b.decode().split("\n\n"):
    if block.strip():
        name, data = block.split("\n", 1)
        evs.append((name[len("event: "):], json.loads(data[len("data: "):])))
types = [e[0] for e in evs]
check(st == 200 and all(n == d["type"] for n, d in evs) and [d["sequence_number"] for _, d in evs] ==
      list(range(len(evs))), "/v1/responses stream: `event:` names match each data's type; sequence_number 0..n-1")
want_head = ["response.created", "response.in_progress", "response.output_item.added"]
want_tail = ["response.reasoning_text.done", "response.output_item.done", "response.output_item.added",
             "response.content_part.added", "response.output_text.done", "response.content_part.done",
             "response.output_item.done", "response.incomplete"]
mid = types[3:len(types) - len(want_tail)]
check(types[:3] == want_head and types[-len(want_tail):] == want_tail and mid and
      all(t == "response.reasoning_text.delta" for t in mid), "/v1/responses stream: reasoning events, then the "
      "message's (%s)" % types)
check("".join(d["delta"] for n, d in evs if n == "response.reasoning_text.delta") == out[0]["content"][0]["text"] and
      evs[2][1]["item"]["type"] == "reasoning" and evs[2][1]["output_index"] == 0 and
      evs[-6][1]["output_index"] == 1 and evs[-1][1]["response"]["output"][0]["type"] == "reasoning",
      "/v1/responses stream: reasoning deltas equal the plain answer's; the message is output 1")
st, _, b = request(s.port, "POST", "/v1/responses", dict(rq, reasoning={"effort": "none"}))
j = jbody(b)
check(st == 200 and [o["type"] for o in j["output"]] == ["message"] and j["output"][0]["content"][0]["text"] and
      j["reasoning"]["effort"] == "none", "/v1/responses: reasoning.effort none -> no reasoning, text in the message")
check(s.stop() == 0, "qwen35 server: clean exit")

shutil.rmtree(T, ignore_errors=True)
finish()
