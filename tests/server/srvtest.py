# srvtest.py - small helpers for the server tests (tests/server/*.py):
# start `blockdraft serve` on a free port, HTTP requests over loopback,
# SSE parsing, and check bookkeeping. Python standard library only.
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("SERVE_BIN") or os.environ["BD_BIN"]
SHARED = os.environ["BD_SHARED"]
STORIES = os.path.join(SHARED, "fixtures", "stories260K")
TARGET = os.path.join(STORIES, "stories260K.gguf")
DRAFTER = os.path.join(STORIES, "stories260K-dflash.gguf")

failures = []


def check(cond, what):
    if cond:
        print("ok:", what, flush=True)
    else:
        print("FAIL:", what, flush=True)
        failures.append(what)
    return cond


def finish():
    if failures:
        print("%d check(s) failed:" % len(failures))
        for f in failures:
            print("  -", f)
        sys.exit(1)
    print("all checks passed")


class Server:
    def __init__(self, tmp, name, args, env=None, cwd=None):
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "wb")
        e = dict(os.environ)
        if env:
            e.update(env)
        self.p = subprocess.Popen([BIN, "serve", "--port", "0"] + args, stdout=self.log, stderr=self.log, env=e,
                                  cwd=cwd)
        self.port = None
        t0 = time.time()
        while time.time() - t0 < 60:
            m = re.search(rb"listening on http://[0-9.]+:(\d+)", open(self.log_path, "rb").read())
            if m:
                self.port = int(m.group(1))
                break
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            print(open(self.log_path, errors="replace").read())
            raise SystemExit("FAIL: server %s did not start" % name)

    def text_log(self):
        return open(self.log_path, errors="replace").read()

    def pid(self):
        return self.p.pid

    def stop(self, timeout=60):
        """SIGTERM; returns the exit status (None if it had to be killed)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = None
        self.log.close()
        return rc


def request(port, method, path, body=None, headers=None, timeout=60, raw=None, chunked=False):
    """Returns (status, headers dict (lower-case), body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if chunked:
        c.request(method, path, body=iter([data[i:i + 65536] for i in range(0, len(data), 65536)]), headers=h,
                  encode_chunked=True)
    else:
        c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    b = r.read()
    hd = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, hd, b


def jbody(b):
    try:
        return json.loads(b)
    except Exception:
        return None


def sse_events(b):
    """Parse an SSE body into a list of JSON objects; the last item is
    the string '[DONE]' when the stream ended properly."""
    out = []
    for block in b.decode("utf-8", errors="replace").split("\n\n"):
        block = block.strip()
        if not block:
            continue
        assert block.startswith("data: "), block[:80]
        d = block[6:]
        out.append(d if d == "[DONE]" else json.loads(d))
    return out


def is_error_object(b, status=None):
    j = jbody(b)
    return isinstance(j, dict) and isinstance(j.get("error"), dict) and isinstance(j["error"].get("message"), str) \
        and isinstance(j["error"].get("type"), str)


def metrics(port, headers=None):
    st, _, b = request(port, "GET", "/metrics", headers=headers)
    out = {}
    for line in b.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        k, v = line.split()
        out[k] = float(v)
    return out


def tmpdir():
    return tempfile.mkdtemp(prefix="bd-server-test.")
