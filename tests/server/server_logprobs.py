# server_logprobs.py - log-probabilities are the target's (run by
# tests/e2e/server_logprobs.sh).
#
# Reference: `blockdraft eval --top 512` prints every logit of stories260K
# (vocabulary 512) at every position of a token sequence, from one plain
# batched forward over prompt + generated tokens -- not the generation
# path. This file takes the log-softmax of each row in double precision.
# Every returned logprob (the chosen token's and each top_logprobs entry,
# ids and order) must be within 1e-4 of it: with the DFlash drafter (where
# most tokens are drafts accepted from verify rows; n_accepted > 0 is
# checked) and without, greedy and sampled, chat and completions, streamed
# and not (the streamed entries concatenate to the non-streamed ones).
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import BIN, DRAFTER, TARGET, Server, check, finish, jbody, request, sse_events, tmpdir

T = tmpdir()
TOL = 1e-4


def reference(ids):
    """Log-softmax of the logits after each position of ids (double)."""
    r = subprocess.run([BIN, "eval", "-m", TARGET, "--ids", ",".join(map(str, ids)), "--top", "512", "--json", "-t",
                        "1"], capture_output=True, text=True, check=True)
    out = []
    for p in json.loads(r.stdout)["positions"]:
        lg = {i: v for i, v in p["top"]}
        mx = max(lg.values())
        lse = mx + math.log(sum(math.exp(v - mx) for v in lg.values()))
        out.append({i: v - lse for i, v in lg.items()})
    return out


def compare(name, prompt_ids, entries):
    """entries: [(id, logprob, [(id, logprob), ...])] of the generated tokens."""
    gen = [e[0] for e in entries]
    ref = reference(prompt_ids + gen)
    worst, bad = 0.0, []
    for k, (tid, lp, top) in enumerate(entries):
        row = ref[len(prompt_ids) - 1 + k]
        d = abs(lp - row[tid])
        worst = max(worst, d)
        if isinstance(top, dict):  # completions: {token text: logprob}, no ids: the values, descending
            want = sorted(row.values(), reverse=True)[:len(top)]
            got = sorted(top.values(), reverse=True)
            worst = max([worst] + [abs(a - b) for a, b in zip(got, want)])
            if d > TOL:
                bad.append((k, tid, lp, row[tid]))
            continue
        want_top = sorted(row.items(), key=lambda kv: (-kv[1], kv[0]))[:len(top)]
        if [t[0] for t in top] != [t[0] for t in want_top]:
            # equal log-probabilities may come in either order
            if not all(abs(a[1] - b[1]) <= TOL for a, b in zip(top, want_top)):
                bad.append((k, "top ids", [t[0] for t in top], [t[0] for t in want_top]))
        for t_id, t_lp in top:
            worst = max(worst, abs(t_lp - row[t_id]))
        if d > TOL:
            bad.append((k, tid, lp, row[tid]))
    check(not bad and worst <= TOL and len(entries) > 0,
          "%s: %d tokens, logprobs within %g of the log-softmax (worst %.2e) %s" % (name, len(entries), TOL, worst,
                                                                                   bad[:2]))


def cmpl_entries(j):
    lp = j["choices"][0]["logprobs"]
    out = []
    for k, lpv in enumerate(lp["token_logprobs"]):
        out.append((j["generated_ids"][k], lpv, lp["top_logprobs"][k]))
    return out


def chat_entries(content):
    return [(e["id"], e["logprob"], [(t["id"], t["logprob"]) for t in e["top_logprobs"]]) for e in content]


servers = {
    # fixed draft lengths: the verify rows' logprobs are checked, so drafts must be accepted
    "DFlash": Server(T, "spec", ["-m", TARGET, "-md", DRAFTER, "--alias", "m", "-c", "512", "-t", "1",
                                 "--no-spec-adaptive"]),
    "plain": Server(T, "plain", ["-m", TARGET, "--alias", "m", "-c", "512", "-t", "1"]),
}
for name, s in servers.items():
    P = s.port
    for temp in (0, 1.0):
        # chat, top 5
        body = {"model": "m", "messages": [{"role": "user", "content": "Tell me about Lily and her dog."}],
                "max_tokens": 48, "temperature": temp, "seed": 11, "logprobs": True, "top_logprobs": 5,
                "return_prompt_ids": True}
        st, h, b = request(P, "POST", "/v1/chat/completions", body)
        j = jbody(b)
        ents = chat_entries(j["choices"][0]["logprobs"]["content"])
        check([e[0] for e in ents] == j["generated_ids"], "%s T=%g chat: one entry per generated token" % (name, temp))
        compare("%s T=%g chat" % (name, temp), j["prompt_ids"], ents)
        if name == "DFlash":
            check(j["speculative"]["n_accepted"] > 0, "%s T=%g: %d drafted tokens accepted (their logprobs come from "
                  "verify rows)" % (name, temp, j["speculative"]["n_accepted"]))
        # streamed: the same entries, spread over the chunks
        st, h, b = request(P, "POST", "/v1/chat/completions", dict(body, stream=True))
        ev = sse_events(b)
        streamed = []
        for e in ev[:-1]:
            for c in e.get("choices") or []:
                if c.get("logprobs"):
                    streamed += c["logprobs"]["content"]
        check(streamed == j["choices"][0]["logprobs"]["content"],
              "%s T=%g chat streamed: the chunks carry the same %d entries" % (name, temp, len(streamed)))
        # completions, logprobs 3
        body = {"model": "m", "prompt": "Once upon a time", "max_tokens": 40, "temperature": temp, "seed": 5,
                "logprobs": 3, "return_prompt_ids": True}
        st, h, b = request(P, "POST", "/v1/completions", body)
        j = jbody(b)
        lp = j["choices"][0]["logprobs"]
        ents = cmpl_entries(j)
        compare("%s T=%g completions" % (name, temp), j["prompt_ids"], ents)
        # text_offset and tokens agree with the text
        text = j["choices"][0]["text"]
        check(lp["text_offset"][0] == 0 and "".join(lp["tokens"]) == text and
              all(text[o:].startswith(t) for o, t in zip(lp["text_offset"], lp["tokens"])) and
              all(len(tp) <= 3 for tp in lp["top_logprobs"]),
              "%s T=%g completions: tokens, text_offset and top_logprobs (<= 3) fit the text" % (name, temp))
    check(s.stop() == 0, "%s server: clean exit" % name)
finish()
