# server_load.py - bounded load test of `blockdraft serve` on loopback (run
# by tests/e2e/server_load.sh), meant for the ASan+UBSan build.
#
# Concurrent clients mix normal chat and completions (streamed and not),
# clients that disconnect mid-stream or right after sending, garbage bytes,
# truncated and oversized bodies and invalid parameters. Checks:
#   * every well-formed request is answered: 200 with a complete body, or a
#     4xx/503 with an OpenAI error object; nothing hangs or resets;
#   * the server stays correct: greedy output after the load equals the
#     output before it; no job is left running or queued;
#   * memory is flat: resident size after the last round is within a bound
#     of the size after the first round;
#   * SIGTERM ends it with status 0 and the sanitizer reports nothing (with
#     ASan, LeakSanitizer runs at exit and fails the exit status on a leak).
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srvtest
from srvtest import DRAFTER, TARGET, Server, check, finish, is_error_object, jbody, metrics, request, sse_events, tmpdir


def is_asan(path):
    try:
        out = subprocess.run(["nm", "-D", path], capture_output=True, text=True).stdout
        out += subprocess.run(["nm", path], capture_output=True, text=True).stdout
        return "__asan_init" in out
    except OSError:
        return False


candidates = [os.environ["BD_BIN"], os.path.join(os.environ.get("BD_ROOT", "."), "build-debug", "blockdraft")]
binary = next((c for c in candidates if os.path.exists(c) and is_asan(c)), None)
if binary is None:
    # a load test without the sanitizers would pass without checking leaks
    print("FAIL: no ASan build found; `make debug-bin` builds build-debug/blockdraft (make test does)")
    sys.exit(1)
else:
    print("load test on the ASan build", binary)
srvtest.BIN = binary
asan = is_asan(binary)

T = tmpdir()
env = {"ASAN_OPTIONS": "detect_leaks=1:quarantine_size_mb=4:malloc_context_size=8:allocator_may_return_null=1",
       "UBSAN_OPTIONS": "print_stacktrace=1"}
s = Server(T, "load", ["-m", TARGET, "-md", DRAFTER, "--alias", "stories", "-c", "256", "-t", "1", "--parallel", "2",
                       "--queue", "6", "--max-body", "65536", "--timeout", "30"], env=env)
P = s.port
REF = {"model": "stories", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}
st, _, b = request(P, "POST", "/v1/completions", REF)
ref_text = jbody(b)["choices"][0]["text"] if st == 200 else None
check(ref_text, "reference completion before the load")

lock = threading.Lock()
stats = {"ok": 0, "rejected": 0, "busy": 0, "cut": 0, "garbage": 0}
problems = []


def note(kind, what=None):
    with lock:
        stats[kind] += 1
        if what:
            problems.append(what)


PROMPTS = ["Once upon a time", "Lily and her mom went to the park", "Tom had a red ball", "The cat sat"]


def raw_send(data, read=True, timeout=2):
    c = socket.create_connection(("127.0.0.1", P), timeout=timeout)
    try:
        c.sendall(data)
        if read:
            c.recv(65536)
    except OSError:
        pass
    finally:
        c.close()


def http_bytes(path, body_bytes, extra=b""):
    return (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
            % (path.encode(), len(body_bytes), extra) + body_bytes)


def op_chat(rng):
    req = {"model": "stories", "messages": [{"role": "user", "content": rng.choice(PROMPTS)}],
           "max_tokens": rng.randint(5, 60), "temperature": rng.choice([0, 0.8]), "seed": rng.randint(0, 99)}
    st, _, b = request(P, "POST", "/v1/chat/completions", req)
    j = jbody(b)
    if st == 200 and j and j["usage"]["completion_tokens"] >= 1 and "speculative" in j:
        note("ok")
    elif st == 503 and is_error_object(b):
        note("busy")
    else:
        note("ok", "chat: status %d body %r" % (st, b[:200]))


def op_stream(rng):
    chat = rng.random() < 0.5
    req = {"model": "stories", "max_tokens": rng.randint(5, 80), "temperature": 0, "stream": True,
           "stream_options": {"include_usage": True}}
    if chat:
        req["messages"] = [{"role": "user", "content": rng.choice(PROMPTS)}]
    else:
        req["prompt"] = rng.choice(PROMPTS)
    st, _, b = request(P, "POST", "/v1/chat/completions" if chat else "/v1/completions", req)
    if st == 503 and is_error_object(b):
        note("busy")
        return
    try:
        ev = sse_events(b)
        good = st == 200 and ev[-1] == "[DONE]" and any(isinstance(e, dict) and e.get("usage") for e in ev)
    except Exception as e:  # noqa: BLE001
        good = False
    note("ok", None if good else "stream: status %d body %r" % (st, b[-200:]))


def op_stream_cut(rng):
    body = json.dumps({"model": "stories", "prompt": rng.choice(PROMPTS), "max_tokens": 200, "stream": True}).encode()
    c = socket.create_connection(("127.0.0.1", P), timeout=10)
    try:
        c.sendall(http_bytes("/v1/completions", body))
        c.recv(rng.choice([10, 300, 2000]))
    except OSError:
        pass
    c.close()
    note("cut")


def op_send_and_leave(rng):
    body = json.dumps({"model": "stories", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100}).encode()
    raw_send(http_bytes("/v1/chat/completions", body), read=False)
    note("cut")


def op_garbage(rng):
    kind = rng.randrange(6)
    if kind == 0:
        raw_send(bytes(rng.randrange(256) for _ in range(rng.randint(1, 3000))))
    elif kind == 1:  # body shorter than announced, then gone
        raw_send(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"prompt\":", read=False)
    elif kind == 2:  # header never finished
        raw_send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le", read=False)
    elif kind == 3:
        raw_send(http_bytes("/v1/chat/completions", b"{\"model\": \"stories\", \"messages\": [{\"role\": \"user\", \"content\": \"\xc3\x28\"}]}"))
    elif kind == 4:
        raw_send(http_bytes("/v1/completions", b"x" * 70000))
    else:
        raw_send(b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")
    note("garbage")


def op_bad_params(rng):
    bodies = [{"model": "stories", "messages": "nope"}, {"model": "x" * 300, "prompt": "a"},
              {"model": "stories", "prompt": "a", "max_tokens": 10 ** 15}, {"model": "stories", "prompt": ["a", 5]},
              {"model": "stories", "messages": [{"role": "user", "content": "hi"}], "stop": [1, 2]},
              {"model": "stories", "prompt": "Tom " * 400}]
    st, _, b = request(P, "POST", rng.choice(["/v1/completions", "/v1/chat/completions"]), rng.choice(bodies))
    if 400 <= st < 500 and is_error_object(b):
        note("rejected")
    else:
        note("rejected", "bad params: status %d body %r" % (st, b[:200]))


OPS = [(op_chat, 4), (op_stream, 4), (op_stream_cut, 2), (op_send_and_leave, 1), (op_garbage, 2), (op_bad_params, 2)]
WEIGHTED = [f for f, w in OPS for _ in range(w)]


def client(seed, n):
    rng = random.Random(seed)
    for _ in range(n):
        f = rng.choice(WEIGHTED)
        try:
            f(rng)
        except Exception as e:  # noqa: BLE001 - a well-formed request must not fail at the transport level
            if f in (op_chat, op_stream, op_bad_params):
                note("ok", "%s raised %r" % (f.__name__, e))


def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def round_(r, n_clients=8, n_ops=5 if asan else 10):
    th = [threading.Thread(target=client, args=(1000 * r + i, n_ops)) for i in range(n_clients)]
    for t in th:
        t.start()
    for t in th:
        t.join(120)
    # settle: no job running or queued
    t0 = time.time()
    while time.time() - t0 < 20:
        m = metrics(P)
        if m.get("blockdraft_requests_processing") == 0 and m.get("blockdraft_requests_deferred") == 0:
            break
        time.sleep(0.1)
    return m


t_start = time.time()
rss = []
for r in range(4):
    m = round_(r)
    rss.append(rss_kb(s.pid()))
    print("round %d: %s, rss %d MiB, %.1f s" % (r, stats, rss[-1] // 1024, time.time() - t_start), flush=True)
check(not problems, "every well-formed request answered cleanly (%d problems%s)" % (
    len(problems), (": " + "; ".join(problems[:5])) if problems else ""))
check(stats["ok"] > 20 and stats["garbage"] > 5 and stats["cut"] > 5, "the load mixed all kinds of clients: %s" % stats)
check(m.get("blockdraft_requests_processing") == 0 and m.get("blockdraft_requests_deferred") == 0,
      "no job left running or queued after the load")
# round 1 warms up (allocator caches, ASan quarantine); later rounds must
# not keep growing
growth = (rss[-1] - rss[1]) / 1024
check(growth < 12, "memory flat: rss after round 2 %d MiB, after round 4 %d MiB (growth %.1f MiB < 12)" % (
    rss[1] // 1024, rss[-1] // 1024, growth))
st, _, b = request(P, "POST", "/v1/completions", REF)
check(st == 200 and jbody(b)["choices"][0]["text"] == ref_text, "greedy output after the load equals the output before")
rc = s.stop()
log = s.text_log()
check(rc == 0, "SIGTERM after the load: exit status %s" % rc)
bad = re.findall(r"(ERROR: (?:AddressSanitizer|LeakSanitizer).*|runtime error:.*)", log)
check(not bad, "no sanitizer reports%s" % (": " + "; ".join(bad[:3]) if bad else ""))
if bad or rc != 0:
    print(log[-4000:])
print("total %.1f s, ASan: %s" % (time.time() - t_start, asan))
finish()
