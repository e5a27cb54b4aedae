#!/usr/bin/env python3
"""A stdlib-only OTLP/HTTP capture sink, for checking what the emitters send.

Accepts ``POST /v1/traces`` and stores each request as ``NNNN.body`` (the raw body, as received,
still gzip-compressed if it was; a chunked body is de-chunked) and ``NNNN.json`` (method, path, headers, size, and, for a gzip
body, the decompressed size) in ``--dir``. Answers 200 with an empty ExportTraceServiceResponse in
the request's content type: ``application/x-protobuf`` -> empty body, ``application/json`` -> ``{}``.

``--status 503 --times 2 --retry-after 1`` answers the first two requests with that status (and a
Retry-After header) before accepting, to watch exporter retries. Prints the port it listens on
(``--port 0`` picks a free one) as ``listening <port>`` on stdout, then one line per request.

    python tests/otlp/capture_sink.py --port 0 --dir /tmp/otlp-capture
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4318)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--status", type=int, default=None, help="answer the first --times requests with this status")
    parser.add_argument("--times", type=int, default=1)
    parser.add_argument("--retry-after", default=None, help="Retry-After value sent with --status")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    lock = threading.Lock()
    state = {"n": 0, "failed": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _reply(self, status, body: bytes, content_type: str, extra=None):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _read_body(self) -> bytes:
            # The JS exporter (Node http) sends `Transfer-Encoding: chunked`, no Content-Length.
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()  # CRLF after the chunk
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_POST(self):
            body = self._read_body()
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if self.path.split("?")[0] != "/v1/traces":
                self._reply(404, b"not found", "text/plain")
                return
            with lock:
                state["n"] += 1
                n = state["n"]
                inject = args.status is not None and state["failed"] < args.times
                if inject:
                    state["failed"] += 1
            meta = {
                "seq": n,
                "method": "POST",
                "path": self.path,
                "headers": {k: v for k, v in self.headers.items()},
                "body_bytes": len(body),
                "answered": args.status if inject else 200,
            }
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                try:
                    meta["decompressed_bytes"] = len(gzip.decompress(body))
                except OSError as e:
                    meta["gzip_error"] = str(e)
            with open(os.path.join(args.dir, f"{n:04d}.body"), "wb") as f:
                f.write(body)
            with open(os.path.join(args.dir, f"{n:04d}.json"), "w") as f:
                json.dump(meta, f, indent=1)
            print(json.dumps({k: meta[k] for k in ("seq", "body_bytes", "answered")} | {"content_type": ctype,
                  "content_encoding": self.headers.get("Content-Encoding")}), flush=True)
            json_req = ctype == "application/json"
            resp_type = "application/json" if json_req else "application/x-protobuf"
            if inject:
                extra = {"Retry-After": args.retry_after} if args.retry_after else None
                # An rpc Status; empty is acceptable to the exporters (they only read the HTTP status).
                self._reply(args.status, b"{}" if json_req else b"", resp_type, extra)
                return
            self._reply(200, b"{}" if json_req else b"", resp_type)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
