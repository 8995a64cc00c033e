#!/usr/bin/env python3
"""Range-capable HTTP test server for the gallery end-to-end tests.

usage: gallery_server.py ROOT PORTFILE LOGFILE

Serves files under ROOT on 127.0.0.1 (a free port, written to PORTFILE once
listening). The first path component picks a behaviour, the rest is the
file path under ROOT:

  /files/F        200 or 206 (Range: bytes=N-), Accept-Ranges: bytes
  /cut/F          first request for F: full Content-Length, half the bytes,
                  then the connection is closed; later requests behave as /files
  /flaky/F        the first two requests for F answer 500, then as /files
  /always500/F    always 500
  /stall/F        headers and 1000 bytes, then silence until the client leaves
  /redir/N/F      302 to /redir/N-1/F ... /redir/0/F -> /files/F
  /xhost/F        302 to http://localhost:PORT/files/F (another host name)
  /lie/F          200 claiming Content-Length = size + 1000, sends size bytes,
                  closes (Range ignored)
  /slow/F         as /files, in 32 KiB pieces 20 ms apart
  /endless/F      200 without Content-Length: the file, then zeros (64 MiB in
                  all, in 1 MiB pieces) until the client leaves
  /portredir/P/F  302 to http://127.0.0.1:P/files/F (same host, another port)
  anything else   404
A query string (?x) is ignored except in the log.

Every request is appended to LOGFILE as one JSON line
{"path", "range", "auth", "host"}.
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT, PORTFILE, LOGFILE = sys.argv[1], sys.argv[2], sys.argv[3]
counts = {}
lock = threading.Lock()


def bump(key):
    with lock:
        counts[key] = counts.get(key, 0) + 1
        return counts[key]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def log_request_line(self):
        rec = {"path": self.path, "range": self.headers.get("Range"),
               "auth": self.headers.get("Authorization"), "host": self.headers.get("Host")}
        with lock, open(LOGFILE, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def file_path(self, rel):
        p = os.path.normpath(os.path.join(ROOT, rel))
        if not p.startswith(os.path.abspath(ROOT) + os.sep) or not os.path.isfile(p):
            return None
        return p

    def send_file(self, rel, piece=1 << 16, delay=0.0, cut_half=False):
        p = self.file_path(rel)
        if p is None:
            return self.send_error(404)
        data = open(p, "rb").read()
        size = len(data)
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        body = data[start:]
        if cut_half:
            body = body[: len(body) // 2]
        for i in range(0, len(body), piece):
            self.wfile.write(body[i:i + piece])
            self.wfile.flush()
            if delay:
                time.sleep(delay)

    def do_GET(self):
        self.log_request_line()
        # The query string only tells requests apart in the log.
        parts = self.path.split("?", 1)[0].lstrip("/").split("/", 1)
        mode, rest = parts[0], (parts[1] if len(parts) > 1 else "")
        if mode == "files":
            return self.send_file(rest)
        if mode == "slow":
            return self.send_file(rest, piece=32768, delay=0.02)
        if mode == "cut":
            first = bump("cut:" + rest) == 1
            self.send_file(rest, cut_half=first)
            if first:
                self.close_connection = True
            return
        if mode == "flaky":
            if bump("flaky:" + rest) <= 2:
                return self.send_error(500)
            return self.send_file(rest)
        if mode == "always500":
            return self.send_error(500)
        if mode == "stall":
            p = self.file_path(rest)
            if p is None:
                return self.send_error(404)
            data = open(p, "rb").read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:1000])
            self.wfile.flush()
            time.sleep(20)
            return
        if mode == "redir":
            n, _, f = rest.partition("/")
            n = int(n)
            loc = "/files/" + f if n == 0 else "/redir/%d/%s" % (n - 1, f)
            self.send_response(302)
            self.send_header("Location", loc)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "xhost":
            port = self.server.server_address[1]
            self.send_response(302)
            self.send_header("Location", "http://localhost:%d/files/%s" % (port, rest))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "endless":
            p = self.file_path(rest)
            if p is None:
                return self.send_error(404)
            data = open(p, "rb").read()
            self.send_response(200)
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(data)
                zeros = bytes(1 << 20)
                for _ in range(64):
                    self.wfile.write(zeros)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if mode == "portredir":
            port, _, f = rest.partition("/")
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:%s/files/%s" % (port, f))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "lie":
            p = self.file_path(rest)
            if p is None:
                return self.send_error(404)
            data = open(p, "rb").read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data) + 1000))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self.close_connection = True
            return
        return self.send_error(404)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = Server(("127.0.0.1", 0), Handler)
tmp = PORTFILE + ".tmp"
with open(tmp, "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(tmp, PORTFILE)
srv.serve_forever()
