"""A real `afr serve` for the tests, and a proxy that loses answers on purpose.

The `afr` binary is `$AFR_BIN`, else `target/debug/afr` of this checkout (`cargo build -p
afr-cli`; `scripts/test.sh` sets AFR_BIN).
"""

import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from afr_client._wire import ResponseReader

ROOT = Path(__file__).resolve().parents[3]
AFR_BIN = Path(os.environ.get("AFR_BIN", ROOT / "target" / "debug" / "afr"))
TOKEN = "0123456789abcdef0123456789abcdef"


def event(tool, **args):
    return {"category": "shell", "intent": {"tool": tool, "args": args}}


# A field the schema does not have: rejected, naming `intent.agrs`.
BAD = {"category": "shell", "intent": {"tool": "ls", "agrs": {}}}


class Server:
    """`afr --dir DIR serve ARGS...`, started once its socket is listening."""

    def __init__(self, dir, *args):
        if not AFR_BIN.is_file():
            pytest.fail(f"no afr binary at {AFR_BIN}: run `cargo build -p afr-cli` or set AFR_BIN")
        self.dir = dir
        self.socket = str(dir / "afr.sock")
        self.url = None
        self.proc = subprocess.Popen(
            [str(AFR_BIN), "--dir", str(dir), "serve", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        line = self._stderr_line(deadline=time.monotonic() + 30)
        assert line.startswith("afr serve: listening on "), line
        if " and http://" in line:
            self.url = "http://" + line.rsplit(" and http://", 1)[1]

    def _stderr_line(self, deadline):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stderr, selectors.EVENT_READ)
        buf = b""
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                self.kill()
                pytest.fail("afr serve did not start within 30 s")
            b = os.read(self.proc.stderr.fileno(), 1)
            if not b:
                self.proc.wait()
                pytest.fail(f"afr serve exited with {self.proc.returncode}: {buf.decode()}")
            buf += b
        sel.close()
        return buf.decode().strip()

    def stop(self):
        """SIGTERM, then the exit code and what was left on stderr."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("afr serve did not stop within 60 s of SIGTERM")
        return self.proc.returncode, err.decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class LosingProxy:
    """A Unix-socket proxy in front of a server that forwards each request whole, reads the
    server's answer, and throws the first `lose` answers away, closing the client's
    connection instead: the requests were recorded, but the client never learns it."""

    def __init__(self, upstream, path, lose=1):
        self.upstream = upstream
        self.path = str(path)
        self.lose = lose
        self.lost = 0
        self.requests = 0
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self._listener.close()

    def _accept(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        up.connect(self.upstream)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    buf += conn.recv(65536)
                body, buf = buf[:length], buf[length:]
                up.sendall(head + b"\r\n\r\n" + body)
                reader, raw = ResponseReader(), b""
                while True:
                    data = up.recv(65536)
                    if not data:
                        return
                    raw += data
                    if reader.feed(data) is not None:
                        break
                with self._lock:
                    self.requests += 1
                    losing = self.lost < self.lose
                    self.lost += losing
                if losing:
                    return
                conn.sendall(raw)
        except OSError:
            return
        finally:
            conn.close()
            up.close()
