#!/usr/bin/env python3
"""Records MCP traffic between a client and a server, for reading wire facts (PEERS.md).

Standard library only. Two modes, each appending JSON lines to LOG:

  wiretap.py stdio LOG -- CMD ARGS...
      Runs CMD as the server; relays our stdin to its stdin and its stdout to our stdout,
      logging every line as {"dir": "c2s"|"s2c", "msg": <parsed JSON or raw text>, "pid"}.
      Use it as the server command of a stdio client.

  wiretap.py http LOG --listen PORT --upstream URL
      A small reverse proxy on 127.0.0.1:PORT forwarding every request to URL (same path is
      ignored: everything goes to URL). Logs each request (method, headers, body) and the
      response (status, headers, then each body chunk as it streams, so SSE events appear
      one by one). Responses are streamed unbuffered and delimited by closing the connection.
"""

import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_lock = threading.Lock()


def log(path: str, record: dict) -> None:
    record["t"] = round(time.time(), 3)
    record["pid"] = os.getpid()  # tells apart several wiretaps appending to one LOG
    with _lock, open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def as_json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def stdio_mode(logfile: str, cmd: list[str]) -> int:
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def pump(src, dst, direction):
        for line in iter(src.readline, b""):
            log(logfile, {"dir": direction, "msg": as_json(line.decode(errors="replace").strip())})
            dst.write(line)
            dst.flush()
        if direction == "c2s":
            log(logfile, {"dir": "c2s", "event": "client closed stdin"})
            dst.close()

    t_in = threading.Thread(target=pump, args=(sys.stdin.buffer, child.stdin, "c2s"), daemon=True)
    t_out = threading.Thread(target=pump, args=(child.stdout, sys.stdout.buffer, "s2c"), daemon=True)
    t_in.start()
    t_out.start()
    rc = child.wait()
    t_out.join(timeout=2)
    log(logfile, {"event": f"server exited {rc}"})
    return rc


def http_mode(logfile: str, port: int, upstream: str) -> None:
    target = urllib.parse.urlsplit(upstream)

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # keep stderr quiet
            pass

        def relay(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            rid = f"{threading.get_ident()}-{time.monotonic_ns()}"
            log(logfile, {"id": rid, "request": self.command, "headers": dict(self.headers),
                          "body": as_json(body.decode(errors="replace")) if body else None})
            conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=300)
            fwd = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            fwd["Host"] = target.netloc
            conn.request(self.command, target.path or "/", body=body or None, headers=fwd)
            resp = conn.getresponse()
            log(logfile, {"id": rid, "status": resp.status, "headers": dict(resp.getheaders())})
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                while chunk := resp.read1(65536):
                    log(logfile, {"id": rid, "chunk": chunk.decode(errors="replace")})
                    self.wfile.write(chunk)
                    self.wfile.flush()
                log(logfile, {"id": rid, "event": "response end"})
            except (BrokenPipeError, ConnectionResetError):
                log(logfile, {"id": rid, "event": "client went away"})
            finally:
                conn.close()

        do_GET = do_POST = do_DELETE = relay

    ThreadingHTTPServer(("127.0.0.1", port), Proxy).serve_forever()


def main() -> int:
    args = sys.argv[1:]
    if len(args) >= 4 and args[0] == "stdio" and args[2] == "--":
        return stdio_mode(args[1], args[3:])
    if len(args) == 6 and args[0] == "http" and args[2] == "--listen" and args[4] == "--upstream":
        http_mode(args[1], int(args[3]), args[5])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
