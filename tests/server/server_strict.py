# server_strict.py - every request field of the completion endpoints is
# implemented or refused (run by tests/e2e/server_strict.sh on the
# ASan+UBSan build, like the load test):
#
#   * bad input for every field added with issue 17 (sampling, logprobs, n,
#     best_of, tools, tool_choice, speculative overrides, refused OpenAI
#     and llama.cpp fields, unknown fields, prompt shapes): 4xx with an
#     OpenAI error object whose message names the field; the server keeps
#     serving; SIGTERM exits 0 and the sanitizers report nothing;
#   * each implemented field does what it says, checked against an
#     independent path: speculative output (DFlash) equals the output of a
#     second server without a drafter under logit_bias, frequency/presence
#     and repetition penalties and per-request draft limits (lossless);
#     n choices equal single requests with seed + i; best_of keeps the
#     candidate with the best mean log-probability (computed here); token-id
#     prompts equal string prompts; several prompts equal one-by-one
#     requests; multi-part text is joined with "\n" (token count);
#   * peer-suite fixes: CORS preflight echoes the requested headers; a
#     request right after the socket opens is served (no "'model' is
#     required" race).
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srvtest
from srvtest import DRAFTER, TARGET, Server, check, finish, is_error_object, jbody, request, sse_events, tmpdir


def is_asan(path):
    try:
        out = subprocess.run(["nm", path], capture_output=True, text=True).stdout
        return "__asan_init" in out
    except OSError:
        return False


candidates = [os.environ["BD_BIN"], os.path.join(os.environ.get("BD_ROOT", "."), "build-debug", "blockdraft")]
binary = next((c for c in candidates if os.path.exists(c) and is_asan(c)), None)
if binary is None:
    print("FAIL: no ASan build found; `make debug-bin` builds build-debug/blockdraft (make test does)")
    sys.exit(1)
print("strict-request checks on the ASan build", binary)
srvtest.BIN = binary
ENV = {"ASAN_OPTIONS": "detect_leaks=1:malloc_context_size=8", "UBSAN_OPTIONS": "print_stacktrace=1"}

T = tmpdir()
# --no-spec-adaptive: the sampling checks below need drafts verified in every
# request, which the adaptive rule may skip on this tiny pair
s = Server(T, "strict", ["-m", TARGET, "-md", DRAFTER, "--alias", "stories", "-c", "512", "-t", "1",
                         "--cors", "https://app.example", "--no-spec-adaptive"], env=ENV)
P = s.port
CHAT = {"model": "stories", "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 6,
        "temperature": 0}
CMPL = {"model": "stories", "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}

C, X = "/v1/chat/completions", "/v1/completions"
bad = [
    # sampling
    (C, {"logit_bias": [1, 2]}, "logit_bias"),
    (C, {"logit_bias": {"abc": 1}}, "logit_bias"),
    (C, {"logit_bias": {"-1": 1}}, "logit_bias"),
    (C, {"logit_bias": {"512": 1}}, "logit_bias"),  # vocabulary of 512
    (C, {"logit_bias": {"5": 101}}, "logit_bias"),
    (C, {"logit_bias": {"5": "high"}}, "logit_bias"),
    (C, {"frequency_penalty": 2.5}, "frequency_penalty"),
    (C, {"presence_penalty": "x"}, "presence_penalty"),
    (C, {"repeat_penalty": 0}, "repeat_penalty"),
    (C, {"repeat_last_n": -2}, "repeat_last_n"),
    (C, {"seed": "7"}, "seed"),
    (C, {"n": 0}, "'n'"),
    (C, {"n": 1.5}, "'n'"),
    (C, {"n_predict": 0}, "n_predict"),
    (C, {"max_completion_tokens": 5}, "max_completion_tokens"),  # CHAT has max_tokens 6
    (C, {"ignore_eos": 1}, "ignore_eos"),
    (C, {"cache_prompt": "yes"}, "cache_prompt"),
    # logprobs
    (C, {"logprobs": "yes"}, "logprobs"),
    (C, {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    (C, {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    (C, {"top_logprobs": 3}, "top_logprobs"),
    (X, {"logprobs": 21}, "logprobs"),
    (X, {"logprobs": True}, "logprobs"),
    (X, {"echo": "yes"}, "echo"),
    (X, {"echo": True, "logprobs": 2}, "echo"),
    (X, {"suffix": "tail"}, "suffix"),
    (X, {"best_of": 0}, "best_of"),
    (X, {"best_of": 2, "n": 3}, "best_of"),
    (X, {"best_of": 3, "stream": True}, "best_of"),
    (X, {"n": 9, "prompt": ["a", "b"]}, "'n'"),
    # prompt shapes
    (X, {"prompt": []}, "prompt"),
    (X, {"prompt": [1, "x"]}, "prompt"),
    (X, {"prompt": [-1, 5]}, "prompt"),
    (X, {"prompt": [5, 512]}, "prompt"),
    (X, {"prompt": [[1, 2], 7]}, "prompt"),
    (X, {"prompt": ["x"] * 17}, "prompt"),
    (X, {"prompt": None}, "prompt"),
    # tools
    (C, {"tools": [dict(TOOL, function={"name": "get weather"})]}, "tools[0]"),
    (C, {"tools": [dict(TOOL, function={"name": "a/b"})]}, "tools[0]"),
    (C, {"tools": [dict(TOOL, function={"name": "m\u00e9t\u00e9o"})]}, "tools[0]"),
    (C, {"tools": [dict(TOOL, function={"name": "x" * 65})]}, "tools[0]"),
    (C, {"tools": [dict(TOOL, function={"name": ""})]}, "tools[0]"),
    (C, {"tools": [dict(TOOL, function={"name": "<|im_start|>"})]}, "tools[0]"),
    (C, {"tools": [TOOL, {"type": "retrieval"}]}, "tools[1]"),
    (C, {"tools": ["get_weather"]}, "tools[0]"),
    (C, {"tools": [dict(TOOL, function={"name": "f", "parameters": "object"})]}, "tools[0]"),
    (C, {"tools": [dict(TOOL, function={"name": "f", "description": 5})]}, "tools[0]"),
    (C, {"tools": [TOOL, TOOL]}, "tools[1]"),
    (C, {"tools": [dict(TOOL, function={"name": "f%d" % i}) for i in range(129)]}, "tools"),
    (C, {"tool_choice": "auto"}, "tool_choice"),
    (C, {"tools": [TOOL], "tool_choice": "always"}, "tool_choice"),
    (C, {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "other"}}}, "tool_choice"),
    (C, {"tools": [TOOL], "tool_choice": {"type": "function"}}, "tool_choice"),
    (C, {"tools": [TOOL], "tool_choice": "required"}, "tool_choice"),  # ChatML: no tool-call format
    (C, {"tools": [TOOL], "parallel_tool_calls": "no"}, "parallel_tool_calls"),
    (C, {"parallel_tool_calls": False}, "parallel_tool_calls"),
    (C, {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}]},
     "tool_calls[0]"),
    (C, {"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, "tool_calls"),
    (C, {"messages": [{"role": "tool", "content": "x", "tool_call_id": 7}]}, "tool_call_id"),
    # structured output: schemas and grammars that cannot be used, by name
    # (more in server_grammar.py)
    (C, {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "a"}}}},
     "pattern"),
    (C, {"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
    (C, {"response_format": "json"}, "response_format"),
    (C, {"response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "#"}}}}, "recursion"),
    (C, {"response_format": {"type": "json_object", "schema": {"type": "object", "minProperties": 1}}},
     "minProperties"),
    (C, {"grammar": "root ::= root"}, "grammar"),
    (C, {"grammar": "root ::= [^\\x00-\\U0010FFFF]"}, "matches nothing"),
    (C, {"grammar": "root ::= <[99999]>"}, "99999"),
    (C, {"grammar": ["root ::= \"x\""]}, "grammar"),
    (C, {"grammar": "root ::= \"x\"", "json_schema": {"type": "object"}}, "only one"),
    (C, {"tools": [TOOL], "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
    (X, {"json_schema": {"type": "object", "if": {}}}, "if"),
    (X, {"json_schema": {"type": "array", "maxItems": 100000}}, "maxItems"),
    (X, {"response_format": {"type": "json_object"}}, "response_format"),
    # OpenAI fields this server refuses
    (C, {"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    (C, {"modalities": ["text", "audio"]}, "modalities"),
    (C, {"store": True}, "store"),
    (C, {"service_tier": "flex"}, "service_tier"),
    (C, {"reasoning_effort": "low"}, "reasoning_effort"),
    (C, {"functions": [{"name": "f"}]}, "functions"),
    (C, {"function_call": "auto"}, "function_call"),
    (C, {"prediction": {"type": "content", "content": "x"}}, "prediction"),
    (C, {"web_search_options": {}}, "web_search_options"),
    (C, {"verbosity": "low"}, "verbosity"),
    (C, {"metadata": "x"}, "metadata"),
    (C, {"user": 5}, "user"),
    (C, {"stream_options": {"include_usage": True, "extra": 1}}, "stream_options"),
    # llama.cpp fields
    (C, {"typical_p": 0.5}, "typical_p"),
    (C, {"mirostat": 2}, "mirostat"),
    (C, {"samplers": ["top_k"]}, "samplers"),
    (C, {"n_probs": 3}, "n_probs"),
    (C, {"id_slot": 0}, "id_slot"),
    (C, {"speculative": 5}, "speculative"),
    (C, {"speculative": {"n_max": -1}}, "speculative.n_max"),
    (C, {"speculative": {"n_maxx": 2}}, "speculative.n_maxx"),
    (C, {"speculative.p_min": 2}, "speculative.p_min"),
    (C, {"speculative.n_min": 1.5}, "speculative.n_min"),
    (C, {"speculative": {"n_max": 3}, "speculative.n_max": 3}, "speculative.n_max"),
    # unknown fields, and the test hook without BLOCKDRAFT_TEST_HOOKS
    (C, {"foo": 1}, "foo"),
    (X, {"messages": []}, "messages"),
    (C, {"prompt": "x"}, "prompt"),
    (C, {"test_output": "x"}, "test_output"),
]
n_ok = 0
for path, extra, name in bad:
    body = dict(CHAT if path == C else CMPL)
    body.update(extra)
    if body.get("prompt", 1) is None:
        del body["prompt"]
    st, h, b = request(P, "POST", path, body)
    j = jbody(b) or {}
    msg = (j.get("error") or {}).get("message", "")
    good = 400 <= st < 500 and is_error_object(b) and name in msg
    n_ok += good
    if not good:
        check(False, "bad input %s -> 4xx naming %s (got %d: %s)" % (json.dumps(extra)[:90], name, st, b[:200]))
check(n_ok == len(bad), "%d/%d bad inputs answered 4xx with a message naming the field" % (n_ok, len(bad)))
st, h, b = request(P, "POST", C, CHAT)
check(st == 200, "still serving after the bad inputs")

# tool schemas the template has to walk: huge, self-referencing, deeply nested
huge = {"type": "object", "properties": {"p%d" % i: {"type": "string", "description": "x" * 20} for i in range(3000)}}
deep = {"type": "object"}
for _ in range(400):
    deep = {"type": "object", "properties": {"a": deep}}
for what, params, ok_codes in [("huge (3000 properties)", huge, (200,)), ("recursive $ref", {"$ref": "#"}, (200,)),
                               ("nested 400 deep", deep, (200, 400))]:
    st, h, b = request(P, "POST", C, dict(CHAT, tools=[dict(TOOL, function={"name": "f", "parameters": params})]))
    check(st in ok_codes and (st == 200 or is_error_object(b)), "tool schema %s: %d" % (what, st))
st, h, b = request(P, "POST", C, CHAT)
check(st == 200, "still serving after the tool schemas")

# accepted as no-ops: identifiers, defaults, disabled llama.cpp samplers
st, h, b = request(P, "POST", C, dict(CHAT, user="u1", metadata={"k": "v"}, store=False, service_tier="auto",
                                      modalities=["text"], response_format={"type": "text"}, prompt_cache_key="c1",
                                      mirostat=0, mirostat_tau=5, typical_p=1, top_n_sigma=-1, xtc_probability=0,
                                      dry_multiplier=0, min_keep=0, safety_identifier="s"))
check(st == 200, "no-op fields and off values of llama.cpp samplers are accepted (%d %s)" % (st, b[:120]))

# ---------------------------------------------------------------------------
# implemented fields: speculative output equals plain output (second server
# without the drafter) for every sampler transform, at temperature 0
# ---------------------------------------------------------------------------
plain = Server(T, "plain", ["-m", TARGET, "--alias", "stories", "-c", "512", "-t", "1"], env=ENV)


def text_of(port, path, body):
    st, h, b = request(port, "POST", path, body)
    j = jbody(b)
    if st != 200 or not j:
        return None, None
    c = j["choices"][0]
    return (c["text"] if "text" in c else c["message"]["content"]), j


base = dict(CMPL, max_tokens=40, return_prompt_ids=True)
t0, j0 = text_of(P, X, base)
variants = {
    "logit_bias": {"logit_bias": {str(j0["generated_ids"][0]): -100, str(j0["generated_ids"][3]): 5}} if j0 else {},
    "frequency_penalty": {"frequency_penalty": 1.5},
    "presence_penalty": {"presence_penalty": 2},
    "both penalties negative": {"frequency_penalty": -0.5, "presence_penalty": -1},
    "repeat_penalty": {"repeat_penalty": 1.3, "repeat_last_n": 16},
    "speculative limits": {"speculative": {"n_max": 3, "n_min": 2}},
}
for what, extra in variants.items():
    a, ja = text_of(P, X, dict(base, **extra))
    b_, jb = text_of(plain.port, X, dict(base, **extra))
    drafted = ja["speculative"]["n_drafted"] if ja else 0
    differs = a != t0 or what == "speculative limits"
    check(a is not None and a == b_ and drafted > 0 and differs,
          "%s: speculative output == plain output (%d drafted), and the field changes it (%r vs %r)" % (
              what, drafted, (a or "")[:40], t0[:40] if t0 else None))
a, ja = text_of(P, X, dict(base, logit_bias={"300": 100}))
check(ja and set(ja["generated_ids"]) == {300}, "logit_bias +100 on one token: only that token (%s)" % (
    ja and ja["generated_ids"][:5]))
_, ja = text_of(P, X, dict(base, speculative={"n_max": 3, "n_min": 2, "p_min": 0.25}))
sp = ja["speculative"] if ja else {}
check(sp.get("n_max") == 3 and sp.get("n_min") == 2 and sp.get("p_min") == 0.25,
      "speculative overrides reported back (%s)" % {k: sp.get(k) for k in ("n_max", "n_min", "p_min")})
_, jd = text_of(P, X, base)
lim = jd["speculative"]["n_max"] if jd else 0
_, ja = text_of(P, X, dict(base, **{"speculative.n_max": 1000, "speculative.n_min": 999}))
sp = ja["speculative"] if ja else {}
check(lim > 3 and sp.get("n_max") == lim and sp.get("n_min") == lim and jd["speculative"]["n_max"] == lim,
      "flat speculative.n_max 1000 clamped to the drafter's %d, n_min to n_max; the next request is back to the "
      "default (%s)" % (lim, sp.get("n_max")))
nb = dict(base, ignore_eos=True, n_predict=7)
del nb["max_tokens"]
a, ja = text_of(P, X, nb)
check(a is not None and ja["usage"]["completion_tokens"] == 7, "n_predict and ignore_eos")
st, h, b = request(P, "POST", X, dict(nb, max_tokens=8))
check(st == 400 and "n_predict" in b.decode() and "max_tokens" in b.decode(), "max_tokens and n_predict disagree: 400")

# n, seeds, best_of
samp = dict(CMPL, max_tokens=12, temperature=1.0, top_k=0, top_p=1.0, min_p=0, seed=1234)
st, h, b = request(P, "POST", X, dict(samp, n=3))
jn = jbody(b)
singles = [text_of(P, X, dict(samp, seed=1234 + i))[0] for i in range(3)]
texts = [c["text"] for c in jn["choices"]] if jn else []
check(st == 200 and texts == singles and len(set(texts)) > 1 and [c["index"] for c in jn["choices"]] == [0, 1, 2],
      "n=3: choice i equals a single request with seed+i, and they differ (%s)" % texts)
check(jn and jn["usage"]["completion_tokens"] == 36 and jn["usage"]["prompt_tokens"] == jbody(
    request(P, "POST", X, dict(samp, max_tokens=1))[2])["usage"]["prompt_tokens"],
      "n=3 usage: prompt counted once, completions summed")
check(text_of(P, X, samp)[0] == text_of(P, X, samp)[0], "same seed, same output (per-request seed)")
st, h, b = request(P, "POST", X, dict(samp, n=4, logprobs=0))
cands = jbody(b)["choices"] if st == 200 else []
means = [sum(c["logprobs"]["token_logprobs"]) / len(c["logprobs"]["token_logprobs"]) for c in cands]
best = cands[max(range(len(means)), key=lambda i: means[i])]["text"] if cands else None
st, h, b = request(P, "POST", X, dict(samp, best_of=4))
jb = jbody(b)
check(st == 200 and len(jb["choices"]) == 1 and jb["choices"][0]["text"] == best and jb["choices"][0]["logprobs"] is None,
      "best_of=4: the candidate with the best mean log-probability (%r; means %s)" % (best, [round(x, 3) for x in means]))
check(jb and jb["usage"]["completion_tokens"] == 48, "best_of=4: usage counts the 4 candidates' tokens")
st, h, b = request(P, "POST", C, dict(CHAT, n=2, stream=True, temperature=0.9, seed=5))
ev = sse_events(b) if st == 200 else []
fins = {e["choices"][0]["index"]: e["choices"][0]["finish_reason"] for e in ev[:-1]
        if e.get("choices") and e["choices"][0].get("finish_reason")}
check(ev and ev[-1] == "[DONE]" and fins == {0: "length", 1: "length"}, "n=2 streamed: both choices finish")

# prompt shapes
_, js = text_of(P, X, dict(CMPL, return_prompt_ids=True))
ids = js["prompt_ids"]
a, ja = text_of(P, X, dict(CMPL, prompt=ids, return_prompt_ids=True))
check(a == js["choices"][0]["text"] and ja["prompt_ids"] == ids, "prompt as token ids == prompt as string")
st, h, b = request(P, "POST", X, dict(CMPL, prompt=["Once upon a time", "Lily", ids[:3]]))
jm = jbody(b)
want = [text_of(P, X, dict(CMPL, prompt=p))[0] for p in ["Once upon a time", "Lily", ids[:3]]]
check(st == 200 and [c["text"] for c in jm["choices"]] == want and [c["index"] for c in jm["choices"]] == [0, 1, 2],
      "several prompts (strings and ids): one choice each, equal to one-by-one requests")
a, _ = text_of(P, X, dict(CMPL, echo=True))
check(a == "Once upon a time" + js["choices"][0]["text"], "echo: the prompt before the text")

# multi-part text content: joined with "\n" (llama.cpp), token count and ids
parts = [{"type": "text", "text": "What is"}, {"type": "text", "text": "the best book"}]
rq = lambda content: jbody(request(P, "POST", C, dict(CHAT, max_tokens=1, return_prompt_ids=True,
                                                      messages=[{"role": "user", "content": content}]))[2])
jp, jn_, jc = rq(parts), rq("What is\nthe best book"), rq("What isthe best book")
check(jp["usage"]["prompt_tokens"] == jn_["usage"]["prompt_tokens"] and jp["prompt_ids"] == jn_["prompt_ids"] and
      jp["prompt_ids"] != jc["prompt_ids"],
      "text parts joined with a newline: %d tokens, as the string with \\n" % jp["usage"]["prompt_tokens"])

# CORS preflight: the requested headers are echoed (the openai client sends x-stainless-*)
asked = "authorization, content-type, x-stainless-os, x-stainless-retry-count"
st, h, b = request(P, "OPTIONS", C, headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                                             "Access-Control-Request-Headers": asked})
check(st == 204 and h.get("access-control-allow-headers") == asked and
      h.get("access-control-allow-origin") == "https://app.example", "CORS preflight echoes the requested headers")
st, h, b = request(P, "OPTIONS", C, headers={"Origin": "https://app.example", "Access-Control-Request-Headers": "x;y"})
check(st == 204 and "Authorization" in h.get("access-control-allow-headers", ""),
      "CORS preflight: an odd header list gets the default list")

check(plain.stop() == 0, "plain server: clean exit")
rc = s.stop()
log = s.text_log()
check(rc == 0 and "AddressSanitizer" not in log and "runtime error" not in log,
      "SIGTERM: exit 0, no sanitizer report (exit %s)" % rc)

# ---------------------------------------------------------------------------
# startup race: a request sent as soon as the socket accepts is served
# ---------------------------------------------------------------------------
port = None
with socket.socket() as so:
    so.bind(("127.0.0.1", 0))
    port = so.getsockname()[1]
log = open(os.path.join(T, "race.log"), "wb")
proc = subprocess.Popen([srvtest.BIN, "serve", "--port", str(port), "-m", TARGET, "-md", DRAFTER, "-c", "512", "-t",
                         "1"], stdout=log, stderr=log, env=dict(os.environ, **ENV))
first = None
t0 = time.time()
while time.time() - t0 < 60 and first is None:
    try:
        st, h, b = request(port, "POST", C, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
                           timeout=60)
        first = (st, b[:200])
    except OSError:
        time.sleep(0.002)
check(first is not None and first[0] == 200, "first request without 'model', sent while the server starts: %s" % (
    first,))
proc.terminate()
check(proc.wait(timeout=60) == 0, "race server: clean exit")
finish()
