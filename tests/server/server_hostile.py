# server_hostile.py - `blockdraft serve` under hostile or careless conditions
# (issue 16), run by tests/e2e/server_hostile.sh on the ASan+UBSan build, on
# loopback, every wait bounded:
#   * a chat template with range()/slice steps near 2**63 (UBSan, item 5);
#   * a model name that is a *.gguf file in the working directory (item 7);
#   * a model whose file fails to load, then is fixed (item 17);
#   * the served model file truncated between requests and during a stream,
#     then restored (SIGBUS, item 4);
#   * foreign Origin and Host headers, non-JSON POST bodies (item 8);
#   * a slowloris burst, then a normal request (item 12);
#   * a client that half-closes after its request (item 14);
#   * SIGTERM while /models/apply downloads from a stalled server (item 13);
#   * a config asking for a huge context and 1024 slots (item 23);
#   * a prompt of megabytes (item 23).
# Every server must stop cleanly on SIGTERM with no sanitizer report.
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import srvtest
from srvtest import SHARED, TARGET, Server, check, finish, is_error_object, jbody, tmpdir
from srvtest import request as _request


def request(*a, **k):
    """srvtest.request; a transport error (a dead server) is status None."""
    try:
        return _request(*a, **k)
    except OSError as e:
        return None, {}, repr(e).encode()


def text_of(b):
    try:
        return jbody(b)["choices"][0]["text"]
    except (TypeError, KeyError, IndexError):
        return None


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
print("hostile-conditions test on the ASan build", binary, flush=True)
srvtest.BIN = binary
ROOT = os.environ.get("BD_ROOT", ".")
T = tmpdir()
ENV = {"ASAN_OPTIONS": "detect_leaks=1:malloc_context_size=8:allocator_may_return_null=1",
       "UBSAN_OPTIONS": "print_stacktrace=1"}
servers = []


def start(name, args, env=None, cwd=None):
    e = dict(ENV)
    e.update(env or {})
    s = Server(T, name, args, env=e, cwd=cwd)
    servers.append(s)
    return s


def stop(s, what):
    rc = s.stop(timeout=30)
    log = s.text_log()
    bad = re.findall(r"(ERROR: (?:AddressSanitizer|LeakSanitizer).*|runtime error:.*|SUMMARY: .*)", log)
    check(rc == 0 and not bad, "%s: clean exit on SIGTERM (status %s)%s" % (what, rc, "; " + "; ".join(bad[:3]) if bad else ""))
    if rc != 0 or bad:
        print(log[-3000:])


def alive(s):
    try:
        return s.p.poll() is None and request(s.port, "GET", "/health", timeout=10)[0] == 200
    except OSError:
        return False


def raw(port, data, timeout=20, half_close=False):
    """Send bytes, read the whole answer (until EOF or timeout)."""
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        c.sendall(data)
        if half_close:
            c.shutdown(socket.SHUT_WR)
        while True:
            b = c.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    finally:
        c.close()
    return out


def post_bytes(path, body, host="127.0.0.1", ctype="application/json", extra=b""):
    b = json.dumps(body).encode() if not isinstance(body, bytes) else body
    ct = b"Content-Type: %s\r\n" % ctype.encode() if ctype else b""
    return (b"POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\nConnection: close\r\n%s\r\n"
            % (path.encode(), host.encode(), ct, len(b), extra) + b)


def status_of(resp):
    m = re.match(rb"HTTP/1\.[01] (\d+)", resp)
    return int(m.group(1)) if m else None


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)


COMP = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}

# ---------------------------------------------------------------------------
# 1. One server: template, model resolution, Origin/Host/Content-Type,
#    slowloris, half-close, failed load retried, truncation while served.
# ---------------------------------------------------------------------------
work = os.path.join(T, "cwd")
models = os.path.join(T, "models")
os.makedirs(work)
os.makedirs(models)
shutil.copy(TARGET, os.path.join(work, "stolen.gguf"))
tmpl = os.path.join(T, "overflow.jinja")
write_file(tmpl, "{{ range(1, 2, 9223372036854775807)|list|length }}{{ 'abc'[1::9223372036854775807] }}"
                 "{% for m in messages %}{{ m.content }}{% endfor %}")
served = os.path.join(T, "served.gguf")
shutil.copy(TARGET, served)
s = start("main", ["-m", served, "--alias", "stories", "-c", "2048", "-t", "2", "--parallel", "2",
                   "--chat-template-file", tmpl, "--models-dir", models, "--conn-limit", "8"], cwd=work)
P = s.port
st, _, b = request(P, "POST", "/v1/chat/completions",
                   {"model": "stories", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
check(st == 200, "item 5: a template with range/slice steps near 2**63 starts and renders (status %s)" % st)
st, _, b = request(P, "POST", "/v1/completions", COMP)
ref = text_of(b) if st == 200 else None
check(ref, "reference completion")

# item 7: a *.gguf in the working directory is not a model name
st, _, b = request(P, "POST", "/v1/completions", dict(COMP, model="stolen.gguf"))
check(st == 404 and is_error_object(b), "item 7: model 'stolen.gguf' (a file in the working directory) -> %s" % st)
st, _, b = request(P, "GET", "/v1/models")
check(st == 200 and b"stolen" not in b, "item 7: /v1/models does not list it")

# item 8: foreign Origin / Host, non-JSON bodies
st, h, b = request(P, "POST", "/v1/completions", COMP, {"Content-Type": "text/plain"})
check(st == 415 and is_error_object(b), "item 8: a text/plain POST -> %s (415)" % st)
st, h, b = request(P, "POST", "/v1/completions", COMP, {"Content-Type": "application/x-www-form-urlencoded"})
check(st == 415, "item 8: a form-encoded POST -> %s (415)" % st)
resp = raw(P, post_bytes("/v1/completions", COMP, ctype=None))
check(status_of(resp) == 415, "item 8: a POST without Content-Type -> %s (415)" % status_of(resp))
st, h, b = request(P, "POST", "/v1/completions", COMP, {"Origin": "http://evil.example"})
check(st == 403 and is_error_object(b), "item 8: a foreign Origin -> %s (403)" % st)
st, h, b = request(P, "GET", "/v1/models", headers={"Origin": "http://evil.example"})
check(st == 403, "item 8: a foreign Origin on GET -> %s (403)" % st)
st, h, b = request(P, "POST", "/models/apply", {"id": "qwen3-4b-dflash"},
                   {"Origin": "https://evil.example", "Content-Type": "text/plain"})
check(st in (403, 415), "item 8: a cross-site /models/apply is refused (%s)" % st)
st, h, b = request(P, "POST", "/v1/completions", COMP, {"Host": "evil.example:%d" % P})
check(st == 403 and is_error_object(b), "item 8: a foreign Host (DNS rebinding) -> %s (403)" % st)
st, h, b = request(P, "POST", "/v1/completions", COMP, {"Host": "attacker.example"})
check(st == 403, "item 8: a foreign Host without port -> %s (403)" % st)
for host in ("localhost:%d" % P, "127.0.0.1:%d" % P, "LOCALHOST", "127.0.0.1"):
    st, h, b = request(P, "POST", "/v1/completions", COMP, {"Host": host})
    check(st == 200, "item 8: Host %s -> %s (200)" % (host, st))
st, h, b = request(P, "POST", "/v1/completions", COMP, {"Origin": "http://127.0.0.1:%d" % P})
check(st == 200, "item 8: the server's own origin -> %s (200)" % st)
st, h, b = request(P, "POST", "/v1/completions", COMP,
                   {"Content-Type": "application/json; charset=utf-8"})
check(st == 200, "item 8: application/json; charset=utf-8 -> %s (200)" % st)

# item 14: a client that half-closes after its request still gets the answer
resp = raw(P, post_bytes("/v1/completions", dict(COMP, model="stories")), half_close=True)
body = resp.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in resp else b""
check(status_of(resp) == 200 and b'"choices"' in resp,
      "item 14: a half-closed client gets its non-streamed answer (%r)" % resp[:60])

# item 12: slowloris -- more half-sent requests than the connection limit
# (8), one byte every 0.3 s; a normal request must still be answered fast
stop_trickle = threading.Event()
slow = []
for i in range(12):
    try:
        c = socket.create_connection(("127.0.0.1", P), timeout=5)
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
        slow.append(c)
    except OSError:
        pass


def trickle():
    while not stop_trickle.wait(0.3):
        for c in slow:
            try:
                c.sendall(b"a")
            except OSError:
                pass


th = threading.Thread(target=trickle)
th.start()
time.sleep(1.0)
t0 = time.time()
try:
    st, _, b = request(P, "POST", "/v1/completions", COMP, timeout=15)
except OSError as e:
    st = "error %r" % e
dt = time.time() - t0
check(st == 200 and dt < 5, "item 12: after a slowloris burst a request is answered in %.2f s (status %s)" % (dt, st))
stop_trickle.set()
th.join()
for c in slow:
    c.close()

# item 17: a model that fails to load is retried once its file changes
write_file(os.path.join(models, "fixme.yaml"), "name: fixme\nparameters:\n  model: fixme.gguf\n")
with open(TARGET, "rb") as f:
    head = f.read(4096)
with open(os.path.join(models, "fixme.gguf"), "wb") as f:
    f.write(head)
st, _, b = request(P, "POST", "/v1/completions", dict(COMP, model="fixme"))
check(st is not None and st >= 400 and is_error_object(b), "item 17: a truncated model file -> %s" % st)
shutil.copy(TARGET, os.path.join(models, "fixme.gguf"))
st, _, b = request(P, "POST", "/v1/completions", dict(COMP, model="fixme"))
check(st == 200 and text_of(b) == ref, "item 17: after the file is fixed -> %s (200)" % st)

# item 4: the served file truncated between requests, then restored
os.truncate(served, 65536)
st, _, b = request(P, "POST", "/v1/completions", COMP, timeout=60)
check(st is not None and st >= 500 and is_error_object(b) and alive(s),
      "item 4: a request after the model file was truncated -> %s, server alive" % st)
shutil.copy(TARGET, served)
st, _, b = request(P, "POST", "/v1/completions", COMP, timeout=60)
check(st == 200 and text_of(b) == ref,
      "item 4: after the file is restored the model is reloaded -> %s, same text" % st)

# item 4: truncated while a stream is being generated (SIGBUS on a pool
# thread without the guard)
first = b""
try:
    c = socket.create_connection(("127.0.0.1", P), timeout=60)
    c.sendall(post_bytes("/v1/completions", dict(COMP, max_tokens=1900, stream=True)))
    first = c.recv(4096)
except OSError:
    c = None
with open(served, "r+b") as f:
    f.truncate(4096)  # in place, as `cp` does before it writes
got = first
try:
    while c:
        x = c.recv(65536)
        if not x:
            break
        got += x
except OSError:
    pass
if c:
    c.close()
check(alive(s), "item 4: the server survives its model file being truncated mid-stream")
check(b"changed on disk" in got or b"truncated" in got,
      "item 4: the stream ends with an error naming the change (%r)" % got[-300:])
shutil.copy(TARGET, served)
st, _, b = request(P, "POST", "/v1/completions", COMP, timeout=60)
check(st == 200 and text_of(b) == ref, "item 4: restored again -> %s, same text" % st)

# item 23: a prompt of megabytes is refused before it is tokenized
big = "Once upon a time " * ((4 << 20) // 17)
t0 = time.time()
st, _, b = request(P, "POST", "/v1/completions", dict(COMP, prompt=big), timeout=60)
dt = time.time() - t0
check(st == 400 and b"context" in b and dt < 5, "item 23: a 4 MiB prompt -> %s in %.2f s" % (st, dt))
stop(s, "main server")

# ---------------------------------------------------------------------------
# 2. --cors: the listed origin is allowed and echoed, others refused
# ---------------------------------------------------------------------------
s = start("cors", ["-m", TARGET, "--alias", "stories", "-t", "1", "--cors", "https://app.example"])
st, h, b = request(s.port, "POST", "/v1/completions", COMP, {"Origin": "https://app.example"})
check(st == 200 and h.get("access-control-allow-origin") == "https://app.example", "item 8: --cors origin allowed")
st, h, b = request(s.port, "POST", "/v1/completions", COMP, {"Origin": "https://other.example"})
check(st == 403 and "access-control-allow-origin" not in h, "item 8: another origin refused under --cors (%s)" % st)
st, h, b = request(s.port, "OPTIONS", "/v1/completions", headers={"Origin": "https://other.example"})
check(st == 403, "item 8: preflight of another origin refused (%s)" % st)
stop(s, "cors server")

# ---------------------------------------------------------------------------
# 3. item 23: configs asking for more than the model or the machine has
# ---------------------------------------------------------------------------
m23 = os.path.join(T, "models23")
os.makedirs(m23)
shutil.copy(TARGET, os.path.join(m23, "s.gguf"))
write_file(os.path.join(m23, "greedy.yaml"), "name: greedy\ncontext_size: 1000000\nthreads: 4096\n"
           "options: [\"parallel:1024\"]\nparameters:\n  model: s.gguf\n")
long_ctx = os.path.join(m23, "long.gguf")
r = subprocess.run([os.path.join(os.environ["BD_BUILD"], "tests", "bd-gguf-edit"), TARGET, long_ctx, "--set-u32",
                    "llama.context_length", "16777216"], capture_output=True, text=True)
check(r.returncode == 0, "bd-gguf-edit: a stories file trained for 16M tokens (%s)" % r.stderr.strip())
write_file(os.path.join(m23, "huge.yaml"), "name: huge\ncontext_size: 16777216\noptions: [\"parallel:64\"]\n"
           "parameters:\n  model: long.gguf\n")
s = start("limits", ["--models-dir", m23, "-t", "1"])
st, _, b = request(s.port, "POST", "/v1/completions", dict(COMP, model="greedy"), timeout=120)
check(st == 200 and text_of(b) == ref, "item 23: greedy config served (%s)" % st)
st, _, b = request(s.port, "GET", "/v1/models")
g = [m for m in (jbody(b) or {}).get("data", []) if m.get("id") == "greedy"]
check(g and g[0].get("context_size") == 128 and g[0].get("slots", 0) <= 64,
      "item 23: context_size capped at the trained 128, slots at most 64 (%s)" % (g[0] if g else None))
t0 = time.time()
st, _, b = request(s.port, "POST", "/v1/completions", dict(COMP, model="huge"), timeout=120)
check(st is not None and st >= 400 and b"memory" in b and time.time() - t0 < 30,
      "item 23: 64 slots x 16M tokens refused before allocating (%s %s)" % (st, (jbody(b) or {}).get("error", {}).get("message")))
check(alive(s), "item 23: the server is still up")
stop(s, "limits server")

# ---------------------------------------------------------------------------
# 4. item 13: SIGTERM during /models/apply from a stalled server
# ---------------------------------------------------------------------------
www = os.path.join(T, "www")
os.makedirs(os.path.join(www, "stories"))
shutil.copy(TARGET, os.path.join(www, "stories", "target.gguf"))
portfile = os.path.join(T, "gport")
gsrv = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "e2e", "lib", "gallery_server.py"), www, portfile,
                         os.path.join(T, "greq.log")])
for _ in range(100):
    if os.path.exists(portfile) and open(portfile).read():
        break
    time.sleep(0.05)
gport = int(open(portfile).read())
index = os.path.join(T, "index.yaml")
write_file(index, "- name: slowpull\n  overrides:\n    parameters:\n      model: slow/t.gguf\n  files:\n"
           "    - filename: slow/t.gguf\n      sha256: %s\n      uri: http://127.0.0.1:%d/stall/stories/target.gguf\n"
           % ("0" * 64, gport))
m13 = os.path.join(T, "models13")
s = start("apply", ["--models-dir", m13, "--shutdown-grace", "2"], env={"BLOCKDRAFT_GALLERY": index})
st, _, b = request(s.port, "POST", "/models/apply", {"id": "slowpull"})
uuid = (jbody(b) or {}).get("uuid")
check(st == 200 and uuid, "item 13: /models/apply started a pull (%d)" % st)
t0 = time.time()
msg = ""
while time.time() - t0 < 10:
    st, _, b = request(s.port, "GET", "/models/jobs/%s" % uuid)
    msg = (jbody(b) or {}).get("message", "")
    # downloaded_size is LocalAI's human-readable string: watch the partial file
    part = os.path.join(m13, "slow", "t.gguf.partial")
    if os.path.exists(part) and os.path.getsize(part) >= 1000:
        break
    time.sleep(0.1)
check("downloading" in msg, "item 13: the pull is downloading (%s)" % msg)
t0 = time.time()
s.p.send_signal(signal.SIGTERM)
try:
    rc = s.p.wait(timeout=15)
except subprocess.TimeoutExpired:
    s.p.kill()
    rc = s.p.wait()
    rc = "killed"
dt = time.time() - t0
check(rc == 0 and dt < 6, "item 13: SIGTERM during a download: exit %s after %.1f s (grace 2 s)" % (rc, dt))
partial = os.path.join(m13, "slow", "t.gguf.partial")
check(os.path.exists(partial) and os.path.getsize(partial) >= 1000,
      "item 13: the partial is kept for a resume (%s bytes)" % (os.path.getsize(partial) if os.path.exists(partial) else None))
log = s.text_log()
bad = re.findall(r"(ERROR: (?:AddressSanitizer|LeakSanitizer).*|runtime error:.*)", log)
check(not bad, "apply server: no sanitizer report%s" % ("; " + "; ".join(bad[:3]) if bad else ""))
s.log.close()
gsrv.kill()
gsrv.wait()
shutil.rmtree(T, ignore_errors=True)
finish()
