#!/usr/bin/env python3
# bench_prompt_cache.py - time to first token of a chat turn with the
# prompt cache on and off (a benchmark, not a test; not part of make test).
#
#   tools/bench_prompt_cache.py BLOCKDRAFT MODEL.gguf [--turn 10] [--reply 32] [--threads 2] [--reps 3]
#
# Plays a conversation of TURN user turns with `blockdraft serve` (one
# slot, temperature 0, REPLY tokens per answer), then sends the last turn
# REPS times with "cache_prompt": true (the slot holds the conversation up
# to the previous turn) and REPS times with false (everything forwarded),
# streamed. Prints the median wall time from sending the request to the
# first streamed token, and the server's prompt_ms / cached tokens.
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("model")
ap.add_argument("--turn", type=int, default=10)
ap.add_argument("--reply", type=int, default=32)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--reps", type=int, default=3)
a = ap.parse_args()

log = tempfile.NamedTemporaryFile(prefix="bench-cache.", suffix=".log", delete=False)
srv = subprocess.Popen([a.bin, "serve", "--port", "0", "-m", a.model, "--alias", "m", "-t", str(a.threads),
                        "--parallel", "1", "-c", "4096"], stdout=log, stderr=log)
port = None
for _ in range(600):
    m = re.search(rb"listening on http://[0-9.]+:(\d+)", open(log.name, "rb").read())
    if m:
        port = int(m.group(1))
        break
    time.sleep(0.1)
assert port, open(log.name).read()


def post(body, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if not stream:
        d = json.loads(r.read())
        c.close()
        return d, time.perf_counter() - t0
    ttft, final, buf = None, None, b""
    while True:
        line = r.fp.readline()
        if not line or line.startswith(b"data: [DONE]"):
            break  # the connection may stay open (keep-alive): [DONE] ends the stream
        if not line.startswith(b"data: "):
            continue
        e = json.loads(line[6:])
        for ch in e.get("choices") or []:
            d = ch.get("delta") or {}
            if ttft is None and (d.get("content") or d.get("reasoning_content")):
                ttft = time.perf_counter() - t0
            if ch.get("finish_reason"):
                final = e
    c.close()
    return final, ttft


topics = ["the weather", "a recipe for bread", "how tides work", "the history of tea", "learning to swim",
          "a trip to the mountains", "why the sky is blue", "planting tomatoes", "the rules of chess",
          "a good book", "how clocks work", "writing a letter"]
msgs = []
for t in range(a.turn - 1):
    msgs.append({"role": "user", "content": "Turn %d. Tell me about %s, in a few sentences please." % (
        t + 1, topics[t % len(topics)])})
    d, _ = post({"messages": msgs, "max_tokens": a.reply, "temperature": 0, "ignore_eos": True})
    msgs.append({"role": "assistant", "content": d["choices"][0]["message"]["content"] or ""})
msgs.append({"role": "user", "content": "Turn %d. And what do you think about all that?" % a.turn})
res = {}
for cache in (True, False):
    ttfts, pms, cached, ptok = [], [], [], []
    for _ in range(a.reps):
        if cache:  # the slot holds the previous turn (its prompt and reply), as in a real chat
            post({"messages": msgs[:-2], "max_tokens": a.reply, "temperature": 0, "ignore_eos": True})
        final, ttft = post({"messages": msgs, "max_tokens": 4, "temperature": 0, "stream": True,
                            "cache_prompt": cache, "stream_options": {"include_usage": True}}, stream=True)
        ttfts.append(ttft)
        pms.append(final["timings"]["prompt_ms"])
        cached.append(final["timings"]["cache_n"])
        ptok.append(final["timings"]["prompt_n"])
    res[cache] = (statistics.median(ttfts), statistics.median(pms), cached[0], ptok[0])
srv.terminate()
srv.wait()
for cache in (True, False):
    t, pm, c, n = res[cache]
    print("turn %d, cache %-3s: time to first token %7.1f ms (median of %d), prompt %d tokens, %d cached, "
          "server prompt_ms %.1f" % (a.turn, "on" if cache else "off", t * 1e3, a.reps, n, c, pm))
print("speedup %.1fx" % (res[False][0] / res[True][0]))
os.unlink(log.name)
