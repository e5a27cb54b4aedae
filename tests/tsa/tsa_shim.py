#!/usr/bin/env python3
"""A real RFC 3161 TSA for tests: Debian's `openssl ts -reply` behind a tiny HTTP server.

Usage: tsa_shim.py CONFIG

Each POST of an application/timestamp-query to /SECTION runs
`openssl ts -reply -config CONFIG -section SECTION -queryfile ...` and answers with its
TimeStampResp as application/timestamp-reply. Listens on 127.0.0.1, a free port, printed as
`listening http://127.0.0.1:PORT` on stdout; exits when stdin closes (the test ended).
Standard library only.
"""

import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading

MAX_QUERY = 64 * 1024
CONFIG = ""


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        section = self.path.strip("/")
        if not re.fullmatch(r"[A-Za-z0-9_]+", section):
            return self.answer(404, "text/plain", b"no such TSA\n")
        if self.headers.get("Content-Type") != "application/timestamp-query":
            return self.answer(415, "text/plain", b"want application/timestamp-query\n")
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_QUERY:
            return self.answer(413, "text/plain", b"bad length\n")
        query = self.rfile.read(length)
        with tempfile.TemporaryDirectory() as d:
            qpath, rpath = os.path.join(d, "q.tsq"), os.path.join(d, "r.tsr")
            with open(qpath, "wb") as f:
                f.write(query)
            run = subprocess.run(
                ["openssl", "ts", "-reply", "-config", CONFIG, "-section", section,
                 "-queryfile", qpath, "-out", rpath],
                capture_output=True, timeout=30, check=False)
            if run.returncode != 0 or not os.path.exists(rpath):
                sys.stderr.write(run.stderr.decode(errors="replace"))
                return self.answer(500, "text/plain", b"openssl ts -reply failed\n")
            with open(rpath, "rb") as f:
                reply = f.read()
        self.answer(200, "application/timestamp-reply", reply)

    def answer(self, status, ctype, body):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
        sys.stderr.write("tsa_shim: " + format % args + "\n")


def main():
    global CONFIG
    CONFIG = sys.argv[1]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
    sys.stdin.read()  # until the test closes our stdin, or dies
    server.shutdown()


if __name__ == "__main__":
    main()
