# server_cache.py - prompt-cache reuse across requests (run by
# tests/e2e/server_cache.sh).
#
#   1. A 20-turn chat (temperature 0) on stories260K without a drafter, two
#      slots: from turn 2 on, the prompt is forwarded only from where it
#      stops matching what the slot holds. The count is asserted exactly:
#      bd_generate leaves the prompt and every generated token but the last
#      in the session (all of them when it stopped at end-of-generation),
#      so cached = min(common prefix of those ids and the new prompt,
#      prompt length - 1), computed here from the returned ids. Two
#      conversations run interleaved on the two slots: each turn must go
#      to the slot holding its conversation (routing by longest prefix).
#      The same turns with "cache_prompt": false forward everything
#      (cached 0) and give the same replies; /metrics counts the reused
#      tokens.
#   2. The same conversation on stories260K + DFlash (one slot): identical
#      replies with the cache on and off, and from turn 2 on the whole
#      previous prompt is reused (the drafter's context too: the target
#      keeps only what the drafter's context also holds).
#   3. A hybrid target (make-model --arch qwen35, recurrent layers): token-
#      id prompts that extend the previous request's tokens are reused
#      without truncation (cached asserted exactly); a prompt that needs a
#      short truncation reuses it or falls back; one that needs a deep one
#      falls back to a fresh prefill (cached 0). Output equals cache off.
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import BIN, DRAFTER, SHARED, TARGET, Server, check, finish, jbody, metrics, request, tmpdir

T = tmpdir()
C, X = "/v1/chat/completions", "/v1/completions"


def cp(a, b):
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def chat(port, msgs, cache=True, n=8):
    st, h, b = request(port, "POST", C, {"model": "m", "messages": msgs, "max_tokens": n, "temperature": 0,
                                         "return_prompt_ids": True, "cache_prompt": cache}, timeout=120)
    assert st == 200, b[:300]
    return jbody(b)


TOPICS = ["a dog", "the sea", "a red ball", "Lily", "a big tree", "the moon", "a cat", "rain", "a bird", "the park",
          "a boat", "snow", "a toy", "the sun", "a frog", "cake", "a car", "flowers", "a bear", "the end"]


def conversation(port, tag, cache, turns, log):
    """One step of a conversation per call: yields after each turn."""
    msgs = []
    for t in range(turns):
        msgs.append({"role": "user", "content": "%s: tell me about %s." % (tag, TOPICS[t])})
        j = chat(port, msgs, cache)
        msgs.append({"role": "assistant", "content": j["choices"][0]["message"]["content"]})
        log.append(j)
        yield j


# ---------------------------------------------------------------------------
# 1. exact counts, two slots, routing, cache off
# ---------------------------------------------------------------------------
s = Server(T, "plain", ["-m", TARGET, "--alias", "m", "-c", "2048", "-t", "1", "--parallel", "2"])
P = s.port
logs = {"A": [], "B": []}
convs = {k: conversation(P, k, True, 20, logs[k]) for k in logs}
for t in range(20):
    for k in ("A", "B"):
        next(convs[k])
bad_counts, reused = [], 0
for k in ("A", "B"):
    L = logs[k]
    for t in range(1, 20):
        prev, cur = L[t - 1], L[t]
        held = prev["prompt_ids"] + (prev["generated_ids"] if prev["choices"][0]["finish_reason"] == "stop"
                                     else prev["generated_ids"][:-1])
        want = min(cp(held, cur["prompt_ids"]), len(cur["prompt_ids"]) - 1)
        got = cur["usage"]["prompt_tokens_details"]["cached_tokens"]
        reused += got
        if got != want or cur["timings"]["cache_n"] != got:
            bad_counts.append((k, t, got, want))
        if t == 19:
            fwd = cur["usage"]["prompt_tokens"] - got
            print("%s turn 20: %d prompt tokens, %d cached, %d forwarded" % (k, cur["usage"]["prompt_tokens"], got, fwd))
check(not bad_counts, "turns 2-20 of two interleaved conversations forward only what the slot does not hold "
      "(cached == expected for all 38 turns; mismatches %s)" % bad_counts[:4])
first = sum(L[0]["usage"]["prompt_tokens_details"]["cached_tokens"] for L in logs.values())
m = metrics(P)
check(m.get("blockdraft_prompt_tokens_cached_total") == reused + first,
      "/metrics counts the reused tokens (%s == %d)" % (m.get("blockdraft_prompt_tokens_cached_total"), reused + first))
big = [L[t]["usage"]["prompt_tokens_details"]["cached_tokens"] >= L[t - 1]["usage"]["prompt_tokens"]
       for L in logs.values() for t in range(1, 20)]
check(sum(big) >= 30, "the whole previous prompt is reused in %d of 38 turns" % sum(big))
off = []
gen = conversation(P, "A", False, 20, off)
for _ in range(20):
    next(gen)
same = [off[t]["choices"][0]["message"]["content"] == logs["A"][t]["choices"][0]["message"]["content"]
        for t in range(20)]
check(all(same) and all(j["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 for j in off),
      "cache_prompt false: 20 identical replies, nothing reused")
check(s.stop() == 0, "plain server: clean exit")

# ---------------------------------------------------------------------------
# 2. speculative (DFlash): identical with the cache on and off
# ---------------------------------------------------------------------------
# --no-spec-adaptive: every turn must draft (the drafter's context reuse is checked)
s = Server(T, "spec", ["-m", TARGET, "-md", DRAFTER, "--alias", "m", "-c", "2048", "-t", "1", "--no-spec-adaptive"])
on, off = [], []
for g in (conversation(s.port, "A", True, 20, on), conversation(s.port, "A", False, 20, off)):
    for _ in range(20):
        next(g)
check([j["choices"][0]["message"]["content"] for j in on] == [j["choices"][0]["message"]["content"] for j in off]
      and [j["choices"][0]["message"]["content"] for j in on] ==
      [j["choices"][0]["message"]["content"] for j in logs["A"]],
      "DFlash: 20 replies identical with the cache on and off (and equal to the plain server's)")
whole = sum(on[t]["usage"]["prompt_tokens_details"]["cached_tokens"] >= on[t - 1]["usage"]["prompt_tokens"] and
            on[t]["usage"]["prompt_tokens_details"]["cached_tokens"] <= cp(on[t - 1]["prompt_ids"] +
                                                                             on[t - 1]["generated_ids"],
                                                                             on[t]["prompt_ids"])
            for t in range(1, 20))
check(whole >= 15 and on[-1]["speculative"]["n_drafted"] > 0,
      "DFlash: the previous prompt (target and drafter context) reused in %d of 19 turns, never more than matches" %
      whole)
check(s.stop() == 0, "spec server: clean exit")

# the same at the default adaptive draft length (plain steps hold the
# drafter's features back until the next draft; with the cache on, a turn
# starts from what the slot holds): replies identical, drafts or not
s = Server(T, "spec-adaptive", ["-m", TARGET, "-md", DRAFTER, "--alias", "m", "-c", "2048", "-t", "1"])
aon, aoff = [], []
for g in (conversation(s.port, "A", True, 20, aon), conversation(s.port, "A", False, 20, aoff)):
    for _ in range(20):
        next(g)
check([j["choices"][0]["message"]["content"] for j in aon] == [j["choices"][0]["message"]["content"] for j in aoff]
      == [j["choices"][0]["message"]["content"] for j in logs["A"]] and
      all(j["speculative"]["adaptive"] is True for j in aon + aoff),
      "DFlash, adaptive draft length: 20 replies identical with the cache on and off (and to the plain server's); "
      "%d and %d tokens drafted" % (sum(j["speculative"]["n_drafted"] for j in aon),
                                    sum(j["speculative"]["n_drafted"] for j in aoff)))
check(s.stop() == 0, "adaptive spec server: clean exit")

# ---------------------------------------------------------------------------
# 3. hybrid target
# ---------------------------------------------------------------------------
HY = os.path.join(T, "qwen35-tiny.gguf")
r = subprocess.run([BIN, "make-model", "--arch", "qwen35", "--shape", "tiny", "--quant", "q8_0", "--seed", "3",
                    "--vocab", os.path.join(SHARED, "fixtures", "qwen3-tokenizer", "qwen3-vocab.gguf"), "-o", HY],
                   capture_output=True, text=True)
check(r.returncode == 0, "make-model qwen35 tiny (%s)" % r.stderr.strip()[-200:])
s = Server(T, "hybrid", ["-m", HY, "--alias", "m", "-c", "1024", "-t", "1", "--parallel", "1"])


def cmpl(prompt, cache=True, n=12):
    st, h, b = request(s.port, "POST", X, {"model": "m", "prompt": prompt, "max_tokens": n, "temperature": 0,
                                           "ignore_eos": True, "return_prompt_ids": True, "cache_prompt": cache})
    assert st == 200, b[:300]
    return jbody(b)


j = cmpl("The hybrid model reads this prompt and then")
ids = j["prompt_ids"]
extend_ok, texts = [], []
for t in range(6):
    held = j["prompt_ids"] + j["generated_ids"][:-1]
    nxt = j["prompt_ids"] + j["generated_ids"] + [1000 + t, 2000 + t, 3000 + t]
    j2 = cmpl(nxt)
    ref = cmpl(nxt, cache=False)
    got = j2["usage"]["prompt_tokens_details"]["cached_tokens"]
    extend_ok.append(got == len(held) and j2["choices"][0]["text"] == ref["choices"][0]["text"] and
                     ref["usage"]["prompt_tokens_details"]["cached_tokens"] == 0)
    j = cmpl(nxt)  # the slot holds this conversation again
check(all(extend_ok), "hybrid: prompts extending the previous tokens reuse all of them, no truncation (%s)" % extend_ok)
held = j["prompt_ids"] + j["generated_ids"][:-1]
short = held[:-2] + [4242, 4343]
j2, ref = cmpl(short), cmpl(short, cache=False)
got = j2["usage"]["prompt_tokens_details"]["cached_tokens"]
print("hybrid: a truncation by 2 rows kept %d of %d tokens" % (got, len(held) - 2))
check(got in (len(held) - 2, 0) and j2["choices"][0]["text"] == ref["choices"][0]["text"],
      "hybrid: a short truncation reuses the prefix (within the rollback rows) or falls back; same output")
j = cmpl(held + [77])
deep = held[:8] + [5151, 5252, 5353]
j2, ref = cmpl(deep), cmpl(deep, cache=False)
check(j2["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 and
      j2["choices"][0]["text"] == ref["choices"][0]["text"],
      "hybrid: a deep truncation (beyond the rollback rows) falls back to a fresh prefill; same output")
check(s.stop() == 0, "hybrid server: clean exit")
finish()
