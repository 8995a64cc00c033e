# server_tools.py - tools rendered through the model's chat template, as
# the server does it, against Python Jinja2 (run by tests/e2e/server_tools.sh
# before the openai-client checks).
#
# For every fixture template that takes tools (its rendering of
# "tools-user-only" shows the tool), every fixture case with tools is sent
# to `blockdraft serve --chat-template-file TEMPLATE` (model: a qwen3 tiny
# file with the Qwen3 vocabulary) as a chat request; the prompt the server
# tokenized (return_prompt_ids) must equal the tokens of the text Python
# Jinja2 renders, configured as the fixtures' README says (Hugging Face's
# environment and tojson, raise_exception, strftime_now), with the server's
# generation prompt, the model's bos/eos texts and llama.cpp's input edits
# (string tool-call arguments parsed to objects, an empty tools list as
# none, a null content as ""). The reference text is tokenized by the
# server's /v1/completions (a raw prompt: control tokens parsed), i.e. the
# tokenizer, which the tokenizer tests pin to llama.cpp. Where Jinja2
# raises, the server must answer 400 with the template's message.
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import SHARED, Server, check, finish, jbody, request, tmpdir

T = tmpdir()
QWEN = sys.argv[1]  # qwen3 tiny with the Qwen3 vocabulary (made by server_tools.sh)
FIX = os.path.join(SHARED, "fixtures", "templates")
BOS, EOS = "<|endoftext|>", "<|im_end|>"  # tokenizer.ggml.bos/eos_token_id 151643 / 151645 of qwen3-vocab.gguf


def tojson(x, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def render(src, case, tools):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    tpl = env.from_string(src)
    return tpl.render(messages=case["messages"], tools=tools, add_generation_prompt=True,
                      enable_thinking=case["enable_thinking"], bos_token=BOS, eos_token=EOS,
                      raise_exception=raise_exception,
                      strftime_now=lambda fmt: datetime.datetime.now().strftime(fmt))


def llamacpp_edits(case):
    """llama.cpp's input edits that apply to these cases (fixtures README)."""
    c = json.loads(json.dumps(case))
    for m in c["messages"]:
        if m.get("content") is None:
            m["content"] = ""  # llama.cpp rebuilds messages with a string content
        for tc in m.get("tool_calls") or []:
            a = tc["function"].get("arguments")
            if isinstance(a, str):
                try:
                    tc["function"]["arguments"] = json.loads(a)
                except ValueError:
                    pass
    tools = c["tools"] if c["tools"] else None
    return c, tools


if len(sys.argv) > 2 and sys.argv[2] == "--twostep":
    # the openai client's second request (openai_tools.mjs): its prompt
    # against Jinja2 with the model's own template (Qwen3's, the fixture)
    d = json.load(open(sys.argv[3]))
    port = int(sys.argv[4])
    src = open(os.path.join(FIX, "Qwen-Qwen3-0.6B.jinja")).read()
    src = src[:-1] if src.endswith("\n") else src
    c, tools = llamacpp_edits({"messages": d["messages"], "tools": d["tools"], "enable_thinking": True})
    want = render(src, dict(c, enable_thinking=True), tools)
    st, h, b = request(port, "POST", "/v1/completions", {"model": "q", "prompt": want, "max_tokens": 1,
                                                          "return_prompt_ids": True})
    check(st == 200 and jbody(b)["prompt_ids"] == d["prompt_ids"] and "<tool_response>" in want and
          '{"temperature": 22' in want and '"arguments": {"city": "Paris"' in want,
          "two-step conversation: the client's assistant message and tool result reach the model as Jinja2 "
          "renders them (%d tokens)" % len(d["prompt_ids"] or []))
    finish()
    sys.exit(0)

cases = json.load(open(os.path.join(FIX, "cases.json")))["cases"]
tool_cases = [c for c in cases if c["tools"] is not None]
probe = next(c for c in cases if c["name"] == "tools-user-only")
templates = []
for f in sorted(os.listdir(FIX)):
    if not f.endswith(".jinja"):
        continue
    src = open(os.path.join(FIX, f)).read()
    if src.endswith("\n"):
        src = src[:-1]  # keep_trailing_newline=False, as the fixtures
    try:
        takes = "get_weather" in render(src, probe, probe["tools"])
    except jinja2.exceptions.TemplateError:
        takes = False
    if takes:
        templates.append((f, src))
print("templates that take tools:", [t[0] for t in templates])
check(len(templates) >= 5, "%d fixture templates take tools" % len(templates))

total = agree = 0
for fname, src in templates:
    s = Server(T, fname, ["-m", QWEN, "--alias", "q", "-t", "1", "-c", "4096", "--parallel", "1",
                          "--chat-template-file", os.path.join(FIX, fname)])
    for case in tool_cases:
        c, tools = llamacpp_edits(case)
        try:
            want, err = render(src, c, tools), None
        except jinja2.exceptions.TemplateError as e:
            want, err = None, str(e)
        body = {"model": "q", "messages": case["messages"], "max_tokens": 1, "return_prompt_ids": True,
                "chat_template_kwargs": {"enable_thinking": case["enable_thinking"]}}
        if case["tools"] is not None:
            body["tools"] = case["tools"]
        st, h, b = request(s.port, "POST", "/v1/chat/completions", body)
        total += 1
        if err is not None:
            ok = st == 400 and err in (jbody(b) or {}).get("error", {}).get("message", "")
            agree += ok
            if not ok:
                check(False, "%s / %s: Jinja2 raises %r; server %d %s" % (fname, case["name"], err, st, b[:200]))
            continue
        st2, h2, b2 = request(s.port, "POST", "/v1/completions", {"model": "q", "prompt": want, "max_tokens": 1,
                                                                    "return_prompt_ids": True})
        got = (jbody(b) or {}).get("prompt_ids")
        ref = (jbody(b2) or {}).get("prompt_ids")
        ok = st == 200 and st2 == 200 and got == ref
        agree += ok
        if not ok:
            check(False, "%s / %s: server prompt (%d tokens) != Jinja2 rendering (%d tokens) %s" % (
                fname, case["name"], len(got or []), len(ref or []), b[:200] if st != 200 else ""))
    check(s.stop() == 0, "%s server: clean exit" % fname)
check(agree == total, "tools through the template: %d/%d (template, case) pairs equal Python Jinja2" % (agree, total))
finish()
