#!/usr/bin/env python3
"""A tiny OTLP/HTTP sink on 127.0.0.1: keeps every POST body (logs, traces, metrics).

Standard library only. Bodies are read whole whether they come with a Content-Length or chunked
(Gemini CLI sends chunked bodies), gunzipped when Content-Encoding says gzip, and parsed when they
are JSON (OTLP/JSON); protobuf bodies are kept as base64. Every request is answered 200 with an
empty body of the request's content type (an empty Export*ServiceResponse in either encoding).

    python3 otlp_sink.py OUT.jsonl      # prints the port; one line per POST in OUT.jsonl

or in-process: `sink = OtlpSink(path).start(); sink.port; sink.posts; sink.stop()`.
"""

from __future__ import annotations

import base64
import gzip
import json
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def read_body(h: BaseHTTPRequestHandler) -> bytes:
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                break
            chunks.append(h.rfile.read(size))
            h.rfile.readline()
        return b"".join(chunks)
    n = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(n) if n else b""


class _Handler(BaseHTTPRequestHandler):
    server: "OtlpSink"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:
        raw = read_body(self)
        enc = self.headers.get("Content-Encoding", "").lower()
        if enc == "gzip":
            raw = gzip.decompress(raw)
        elif enc == "deflate":
            raw = zlib.decompress(raw)
        ctype = self.headers.get("Content-Type", "")
        post: dict[str, Any] = {
            "t": time.time(),
            "path": self.path,
            "content_type": ctype,
            "content_encoding": enc,
            "chunked": self.headers.get("Transfer-Encoding", "").lower() == "chunked",
            "user_agent": self.headers.get("User-Agent", ""),
        }
        if "json" in ctype:
            try:
                post["body"] = json.loads(raw)
            except ValueError:
                post["raw"] = raw.decode("utf-8", "replace")
        else:
            post["protobuf_b64"] = base64.b64encode(raw).decode()
        self.server.keep(post)
        self.send_response(200)
        self.send_header("Content-Type", ctype or "application/json")
        body = b"{}" if "json" in ctype else b""
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class OtlpSink(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, out_path: str | None = None, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.out_path = out_path
        self.posts: list[dict] = []
        self.lock = threading.Lock()

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def keep(self, post: dict) -> None:
        with self.lock:
            self.posts.append(post)
            if self.out_path:
                with open(self.out_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(post) + "\n")

    def start(self) -> "OtlpSink":
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def log_records(posts: list[dict]) -> list[dict]:
    """Every OTLP/JSON log record of the posts, with its resource and scope attributes beside it."""
    out = []
    for p in posts:
        body = p.get("body")
        if not isinstance(body, dict):
            continue
        for rl in body.get("resourceLogs", []):
            for sl in rl.get("scopeLogs", []):
                for rec in sl.get("logRecords", []):
                    out.append({"resource": rl.get("resource", {}), "scope": sl.get("scope", {}), "record": rec})
    return out


def attrs(kvs: list[dict]) -> dict:
    """OTLP/JSON attributes as a plain dict (stringValue, intValue, boolValue, ... unwrapped)."""
    out = {}
    for kv in kvs or []:
        v = kv.get("value", {})
        out[kv["key"]] = next(iter(v.values()), None) if v else None
    return out


def main() -> int:
    sink = OtlpSink(sys.argv[1] if len(sys.argv) > 1 else None)
    print(sink.port, flush=True)
    try:
        sink.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
