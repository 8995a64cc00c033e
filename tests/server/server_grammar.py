# server_grammar.py - structured output through the server (run by
# tests/e2e/server_grammar.sh): response_format json_schema / json_object
# on /v1/chat/completions, llama-server's grammar / json_schema fields on
# /v1/completions and /completion, serve's default --grammar / -j, and the
# 400s of bad schemas and grammars.
#
# Model: stories260K (greedy; its trained DFlash drafter on one server,
# none on the other). Every output must end by itself (finish_reason
# "stop": the grammar completed), parse with Python's json, and be valid
# for its schema -- judged by the small validator below (independent of the
# server's converter; it is itself checked on invalid instances) and, when
# the jsonschema package is installed, by it as well. Speculative output
# under a grammar must equal plain output token for token (generated_ids),
# with drafts accepted somewhere (so verify rows did advance the grammar).
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import BIN, DRAFTER, TARGET, Server, check, finish, jbody, request, sse_events, tmpdir

T = tmpdir()

# ---------------------------------------------------------------------------
# An independent validator for the keywords the schemas below use.
# ---------------------------------------------------------------------------


def valid(inst, sch, root=None):
    root = root if root is not None else sch
    if "$ref" in sch:
        ref = sch["$ref"]
        assert ref.startswith("#/$defs/"), ref
        return valid(inst, root["$defs"][ref[len("#/$defs/"):]], root)
    if "anyOf" in sch:
        return any(valid(inst, s, root) for s in sch["anyOf"])
    if "enum" in sch and inst not in sch["enum"]:
        return False
    if "const" in sch and inst != sch["const"]:
        return False
    t = sch.get("type")
    types = t if isinstance(t, list) else [t] if t else []
    if types:
        def is_type(x, ty):
            if ty == "object":
                return isinstance(x, dict)
            if ty == "array":
                return isinstance(x, list)
            if ty == "string":
                return isinstance(x, str)
            if ty == "integer":
                return isinstance(x, int) and not isinstance(x, bool)
            if ty == "number":
                return isinstance(x, (int, float)) and not isinstance(x, bool)
            if ty == "boolean":
                return isinstance(x, bool)
            if ty == "null":
                return x is None
            raise AssertionError(ty)
        if not any(is_type(inst, ty) for ty in types):
            return False
    if isinstance(inst, dict):
        props = sch.get("properties", {})
        for k in sch.get("required", []):
            if k not in inst:
                return False
        if sch.get("additionalProperties", True) is False and any(k not in props for k in inst):
            return False
        for k, v in inst.items():
            if k in props and not valid(v, props[k], root):
                return False
    if isinstance(inst, list):
        if len(inst) < sch.get("minItems", 0) or len(inst) > sch.get("maxItems", 1 << 30):
            return False
        if "items" in sch and not all(valid(x, sch["items"], root) for x in inst):
            return False
    if isinstance(inst, str):
        if len(inst) < sch.get("minLength", 0) or len(inst) > sch.get("maxLength", 1 << 30):
            return False
    if isinstance(inst, (int, float)) and not isinstance(inst, bool):
        if "minimum" in sch and inst < sch["minimum"]:
            return False
        if "maximum" in sch and inst > sch["maximum"]:
            return False
    return True


try:
    import jsonschema  # a second opinion where it is installed
except ImportError:
    jsonschema = None


def validates(inst, sch):
    mine = valid(inst, sch)
    if jsonschema is not None:
        theirs = jsonschema.Draft202012Validator(sch).is_valid(inst)
        if theirs != mine:
            return False
    return mine


PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 16},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "mood": {"enum": ["happy", "sad", "sleepy"]},
    "pet": {"type": "boolean"}}, "required": ["name", "age", "mood", "pet"]}
LIST = {"type": "object", "properties": {
    "numbers": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 9}, "minItems": 2,
                "maxItems": 4}}, "required": ["numbers"]}
REFS = {"$defs": {"toy": {"type": "object", "properties": {"kind": {"enum": ["ball", "kite"]},
                                                            "color": {"type": "string", "maxLength": 8}},
                          "required": ["kind", "color"]}},
        "type": "object", "properties": {"owner": {"type": "string", "maxLength": 10},
                                         "toy": {"$ref": "#/$defs/toy"}},
        "required": ["owner", "toy"]}
CHOICE = {"anyOf": [{"type": "object", "properties": {"yes": {"const": True}}, "required": ["yes"]},
                    {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3}]}
SCHEMAS = {"person": PERSON, "list": LIST, "refs": REFS, "choice": CHOICE}

# the validator tells invalid instances apart (else the checks below prove nothing)
bad_instances = [({"name": "x", "age": 200, "mood": "happy", "pet": True}, PERSON),
                 ({"name": "x", "age": 3, "mood": "angry", "pet": True}, PERSON),
                 ({"name": "x", "age": 3, "mood": "sad"}, PERSON),
                 ({"numbers": [1]}, LIST), ({"numbers": [1, 10]}, LIST),
                 ({"owner": "a", "toy": {"kind": "car", "color": "red"}}, REFS),
                 ({"yes": False}, CHOICE), ([], CHOICE), ("text", PERSON)]
good_instances = [({"name": "Tom", "age": 3, "mood": "sad", "pet": False}, PERSON), ({"numbers": [1, 2, 9]}, LIST),
                  ({"owner": "Lily", "toy": {"kind": "kite", "color": "red"}}, REFS), ([True, False], CHOICE)]
check(all(not validates(i, s) for i, s in bad_instances) and all(validates(i, s) for i, s in good_instances),
      "the validator rejects %d invalid instances and accepts %d valid ones%s" %
      (len(bad_instances), len(good_instances), " (jsonschema agrees)" if jsonschema else ""))

# fixed draft lengths: drafts must be verified under the grammars, and the
# adaptive rule would stop drafting where the grammar rejects them
spec = Server(T, "spec", ["-m", TARGET, "-md", DRAFTER, "--alias", "m", "-c", "512", "-t", "1", "--no-spec-adaptive"])
plain = Server(T, "plain", ["-m", TARGET, "--alias", "m", "-c", "512", "-t", "1"])


def chat(srv, extra, content="Tell me a story about Lily and her dog."):
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 300,
            "return_prompt_ids": True}
    body.update(extra)
    st, _, b = request(srv.port, "POST", "/v1/chat/completions", body, timeout=120)
    return st, jbody(b)


def rf_schema(sch):
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": sch, "strict": True}}}


accepted = 0
for name, sch in SCHEMAS.items():
    outs = {}
    for label, srv in (("plain", plain), ("DFlash", spec)):
        st, d = chat(srv, rf_schema(sch))
        ok = st == 200 and d is not None
        c = d["choices"][0] if ok else {}
        text = (c.get("message") or {}).get("content") if ok else None
        try:
            inst = json.loads(text)
            parsed = True
        except Exception:
            inst, parsed = None, False
        check(ok and c["finish_reason"] == "stop" and parsed and validates(inst, sch),
              "%s / %s: response_format json_schema -> valid JSON, ended by the grammar (%s %r)" %
              (name, label, st, text if ok else d))
        outs[label] = (d.get("generated_ids") if ok else None, text)
        if ok and label == "DFlash":
            accepted += d["speculative"]["n_accepted"]
    check(outs["plain"][0] is not None and outs["plain"] == outs["DFlash"],
          "%s: DFlash output under the grammar == plain output (%d tokens)" % (name, len(outs["plain"][0] or [])))
check(accepted > 0, "DFlash drafts were accepted under the grammars (%d)" % accepted)

# streamed: the deltas join to the non-streamed content
st, d = chat(plain, rf_schema(PERSON))
body = {"model": "m", "messages": [{"role": "user", "content": "Tell me a story about Lily and her dog."}],
        "temperature": 0, "max_tokens": 300, "stream": True}
body.update(rf_schema(PERSON))
st2, _, b = request(plain.port, "POST", "/v1/chat/completions", body, timeout=120)
ev = sse_events(b) if st2 == 200 else []
joined = "".join((e["choices"][0]["delta"].get("content") or "") for e in ev if isinstance(e, dict) and e["choices"])
check(st == 200 and ev and ev[-1] == "[DONE]" and joined == d["choices"][0]["message"]["content"],
      "streamed response_format output == the non-streamed content")

# temperature 1 (seeded): still valid JSON for the schema, with and without drafts
for label, srv in (("plain", plain), ("DFlash", spec)):
    good = 0
    for seed in range(4):
        st, d = chat(srv, dict(rf_schema(LIST), temperature=1, seed=seed))
        try:
            good += st == 200 and d["choices"][0]["finish_reason"] == "stop" and \
                validates(json.loads(d["choices"][0]["message"]["content"]), LIST)
        except Exception:
            pass
    check(good == 4, "temperature 1, %s: 4/4 outputs valid for the schema (%d)" % (label, good))

# json_object: some JSON object
for label, srv in (("plain", plain), ("DFlash", spec)):
    st, d = chat(srv, {"response_format": {"type": "json_object"}})
    try:
        obj = json.loads(d["choices"][0]["message"]["content"])
    except Exception:
        obj = None
    check(st == 200 and isinstance(obj, dict) and d["choices"][0]["finish_reason"] == "stop",
          "json_object / %s: the content is a JSON object (%r)" % (label, d["choices"][0]["message"]["content"]
                                                                   if st == 200 else d))
# llama-server's schema inside json_object
st, d = chat(plain, {"response_format": {"type": "json_object", "schema": LIST}})
check(st == 200 and validates(json.loads(d["choices"][0]["message"]["content"]), LIST),
      "json_object with llama-server's 'schema' member obeys the schema")
# llama-server's json_schema field on chat too
st, d = chat(plain, {"json_schema": REFS})
check(st == 200 and validates(json.loads(d["choices"][0]["message"]["content"]), REFS),
      "chat 'json_schema' field obeys the schema")

# completions: grammar (GBNF) and json_schema
YESNO = 'root ::= ("yes" | "no") " " [a-z]{1,6} "."'
for label, srv in (("plain", plain), ("DFlash", spec)):
    st, _, b = request(srv.port, "POST", "/v1/completions",
                       {"model": "m", "prompt": "Once upon a time", "grammar": YESNO, "temperature": 0,
                        "max_tokens": 50}, timeout=120)
    d = jbody(b)
    t = d["choices"][0]["text"] if st == 200 else None
    import re
    check(st == 200 and t is not None and re.fullmatch(r"(yes|no) [a-z]{1,6}\.", t) is not None and
          d["choices"][0]["finish_reason"] == "stop", "/v1/completions grammar / %s: %r matches the grammar" %
          (label, t))
st, _, b = request(spec.port, "POST", "/completion",
                   {"prompt": "Once upon a time", "json_schema": PERSON, "temperature": 0, "n_predict": 300},
                   timeout=120)
d = jbody(b)
try:
    inst = json.loads(d["content"])
except Exception:
    inst = None
check(st == 200 and validates(inst, PERSON) and d.get("stop_type") == "eos",
      "/completion json_schema (DFlash): the content is valid for the schema (%s %r)" % (st, d and d.get("content")))
st, _, b = request(plain.port, "POST", "/completion",
                   {"prompt": "Once upon a time", "grammar": YESNO, "temperature": 0, "n_predict": 50}, timeout=120)
d = jbody(b)
check(st == 200 and re.fullmatch(r"(yes|no) [a-z]{1,6}\.", d["content"]) is not None,
      "/completion grammar: %r matches the grammar" % (d and d.get("content")))

# /v1/responses: text.format (the Responses API's response_format)
RB = {"model": "m", "input": "Tell me a story about Lily.", "temperature": 0, "max_output_tokens": 300,
      "text": {"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}}
st, _, b = request(spec.port, "POST", "/v1/responses", RB, timeout=120)
d = jbody(b)
texts = [c["text"] for o in (d or {}).get("output", []) if o.get("type") == "message" for c in o["content"]
         if c.get("type") == "output_text"] if st == 200 else []
try:
    inst = json.loads(texts[0])
except Exception:
    inst = None
check(st == 200 and d["status"] == "completed" and validates(inst, PERSON) and
      d["text"]["format"]["type"] == "json_schema", "/v1/responses text.format json_schema: valid output (%s %r)" %
      (st, texts or b[:200]))
st, _, b = request(plain.port, "POST", "/v1/responses",
                   dict(RB, text={"format": {"type": "json_schema", "name": "x", "schema": {"type": "string",
                                                                                           "pattern": "a"}}}))
d = jbody(b)
check(st == 400 and "pattern" in d["error"]["message"] and d["error"]["param"] == "text.format",
      "/v1/responses text.format with an unsupported keyword -> 400 (%s)" % (d and d["error"]["message"]))

# bad requests: 400 with a message naming the problem; the servers stay up
BAD = [
    ("/v1/chat/completions", rf_schema({"type": "string", "pattern": "^a+$"}), "pattern"),
    ("/v1/chat/completions", rf_schema({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}),
     "missing"),
    ("/v1/chat/completions", rf_schema({"enum": []}), "json_schema"),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema"),
    ("/v1/chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"schema": 5}}},
     "response_format.json_schema.schema"),
    ("/v1/chat/completions", {"response_format": {"type": "xml"}}, "xml"),
    ("/v1/chat/completions", {"response_format": "json"}, "response_format"),
    ("/v1/chat/completions", {"response_format": {"type": "json_object"}, "grammar": 'root ::= "a"'},
     "only one"),
    ("/v1/completions", {"grammar": 'root ::= "a" | undefined-rule'}, "undefined-rule"),
    ("/v1/completions", {"grammar": 'root ::= [z-a]'}, "grammar"),
    ("/v1/completions", {"grammar": 7}, "grammar"),
    ("/v1/completions", {"json_schema": "object"}, "json_schema"),
    ("/v1/completions", {"json_schema": {"type": "object", "not": {}}}, "not"),
    ("/completion", {"grammar": "root ::= (", "prompt": "x"}, "grammar"),
    ("/completion", {"json_schema": {"type": "integer", "multipleOf": 3}, "prompt": "x"}, "multipleOf"),
]
for path, extra, word in BAD:
    body = {"model": "m", "temperature": 0, "max_tokens": 8}
    if path == "/v1/chat/completions":
        body["messages"] = [{"role": "user", "content": "hi"}]
    elif path == "/v1/completions":
        body["prompt"] = "hi"
    else:
        body.pop("max_tokens")
    body.update(extra)
    st, _, b = request(plain.port, "POST", path, body)
    d = jbody(b)
    msg = (d or {}).get("error", {}).get("message", "") if isinstance(d, dict) else ""
    check(st == 400 and word in msg, "%s %s -> 400 naming %r: %s" % (path, json.dumps(extra)[:70], word, msg[:160]))
st, _, _ = request(plain.port, "GET", "/health")
check(st == 200, "the server is up after the bad requests")

for name, srv in (("DFlash", spec), ("plain", plain)):
    check(srv.stop() == 0, "%s server: clean exit" % name)

# serve's default grammar (-j / --grammar): requests without their own obey it
dflt = Server(T, "default", ["-m", TARGET, "--alias", "m", "-c", "512", "-t", "1", "-j", json.dumps(LIST)])
st, _, b = request(dflt.port, "POST", "/v1/completions",
                   {"model": "m", "prompt": "Once upon a time", "temperature": 0, "max_tokens": 100}, timeout=120)
d = jbody(b)
check(st == 200 and validates(json.loads(d["choices"][0]["text"]), LIST),
      "serve -j SCHEMA: a request without a grammar obeys it (%r)" % (d["choices"][0]["text"] if st == 200 else d))
st, _, b = request(dflt.port, "POST", "/v1/completions",
                   {"model": "m", "prompt": "Once upon a time", "temperature": 0, "max_tokens": 50,
                    "grammar": YESNO}, timeout=120)
d = jbody(b)
check(st == 200 and re.fullmatch(r"(yes|no) [a-z]{1,6}\.", d["choices"][0]["text"]) is not None,
      "serve -j SCHEMA: a request's own grammar replaces it")
check(dflt.stop() == 0, "default-grammar server: clean exit")
for args, word in ((["--grammar", "root ::= ("], "--grammar"), (["-j", '{"type": "string", "pattern": "a"}'], "pattern"),
                   (["-jf", os.path.join(T, "nonexistent.json")], "cannot read")):
    r = subprocess.run([BIN, "serve", "--port", "0", "-m", TARGET, "-t", "1"] + args, capture_output=True, text=True,
                       timeout=60)
    check(r.returncode != 0 and word in r.stderr, "serve %s: refused at start (%s)" % (" ".join(args)[:40],
                                                                                       r.stderr.strip()[:120]))
finish()
