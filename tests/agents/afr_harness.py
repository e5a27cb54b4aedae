"""AFR's side of the end-to-end tests: a fresh recorder, `afr serve` on it, `afr setup` of a
CLI, a person at `afr approve` / `afr reject`, and the events read back with `afr query`.

    rec = Recorder.init(tmp / "afr")          # afr init
    with rec.serving():                       # afr serve, stopped with SIGTERM
        with Approver(rec, decide):           # polls `afr approvals --json`, decides each call
            run_session(...)
        events = rec.events()                 # afr query --json all: [(seq, event)]

The binaries: AFR_BIN (the debug `afr` scripts/test.sh points at), else target/debug/afr;
`afr-hook` and `afr-verify` beside it. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def afr_bin() -> Path:
    return Path(os.environ.get("AFR_BIN") or ROOT / "target/debug/afr").resolve()


def missing_binaries(*names: str) -> str | None:
    """None when `afr` and the named binaries beside it are built, else why not."""
    afr = afr_bin()
    for p in [afr, *(afr.with_name(n) for n in names)]:
        if not p.exists():
            return f"{p} is not built (cargo build -p afr-cli -p afr-verify; AFR_BIN names the afr binary)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, cond: Callable[[], object], timeout: float = 30, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class AfrError(AssertionError):
    pass


@dataclass
class Recorder:
    """A recorder directory and the `afr` binary that works on it."""

    dir: Path
    afr: Path = field(default_factory=afr_bin)
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def init(cls, dir: Path, env: dict[str, str] | None = None) -> "Recorder":
        r = cls(Path(dir).resolve(), env=dict(env or {}))
        r.run("init")
        return r

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AFR_")}
        env.update(self.env)
        return env

    def run(self, *args: str, check: bool = True, input: bytes | None = None, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
        """`afr --dir D args...`; on failure (check) an AfrError with the command and its output."""
        argv = [str(self.afr), "--dir", str(self.dir), *args]
        p = subprocess.run(argv, input=input, capture_output=True, timeout=timeout, env={**self._env(), **(env or {})})
        if check and p.returncode != 0:
            raise AfrError(f"{' '.join(args)} exited {p.returncode}\nstdout: {p.stdout.decode(errors='replace')[-3000:]}"
                           f"\nstderr: {p.stderr.decode(errors='replace')[-3000:]}")
        return p

    def json(self, *args: str) -> object:
        return json.loads(self.run(*args).stdout)

    def events(self, query: str = "all") -> list[tuple[int, dict]]:
        """(seq, event) of every match of `afr query --json QUERY`, in sequence order."""
        out = self.run("query", query, "--json").stdout.decode()
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        return sorted((r["seq"], r["event"]) for r in rows)

    @property
    def journal(self) -> Path:
        return self.dir / "hook-journal"

    def journaled(self) -> list[Path]:
        return sorted(self.journal.glob("*.jsonl")) if self.journal.is_dir() else []

    @contextmanager
    def serving(self) -> Iterator[subprocess.Popen]:
        """`afr serve` on this directory until the block ends (SIGTERM, then waited for)."""
        log = open(self.dir.parent / f"{self.dir.name}-serve.log", "ab")
        sock = self.dir / "afr.sock"
        p = subprocess.Popen([str(self.afr), "--dir", str(self.dir), "serve"], stdout=log, stderr=log, env=self._env())
        try:
            wait_for("afr serve's socket", lambda: sock.exists() or p.poll() is not None, timeout=30)
            if p.poll() is not None:
                raise AfrError(f"afr serve exited {p.returncode}: {self.serve_log()[-2000:]}")
            yield p
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()

    def serve_log(self) -> str:
        f = self.dir.parent / f"{self.dir.name}-serve.log"
        return f.read_text(errors="replace") if f.exists() else ""

    def setup(self, cli: str, *args: str, env: dict[str, str]) -> str:
        """`afr setup CLI args...` in the CLI's environment (HOME, CODEX_HOME); its output."""
        p = self.run("setup", cli, *args, env={k: env[k] for k in ("HOME", "CODEX_HOME") if k in env})
        return p.stdout.decode() + p.stderr.decode()


class Approver(threading.Thread):
    """A person at the approval queue: polls `afr approvals --json` and decides each held call
    once with decide(call) -> ("approve" | "reject", extra args) or None (leave it)."""

    def __init__(self, rec: Recorder, decide: Callable[[dict], tuple[str, list[str]] | None]) -> None:
        super().__init__(daemon=True)
        self.rec, self.decide = rec, decide
        self.stopping = threading.Event()
        self.decided: list[tuple[str, dict]] = []  # (verb, the call as `afr approvals` showed it)
        self.errors: list[str] = []

    def run(self) -> None:
        seen: set[str] = set()
        while not self.stopping.is_set():
            try:
                p = self.rec.run("approvals", "--json", check=False)
                calls = json.loads(p.stdout or b"[]") if p.returncode == 0 else []
            except (ValueError, subprocess.TimeoutExpired) as e:
                self.errors.append(f"afr approvals --json: {e}")
                calls = []
            for c in calls:
                if c.get("id") in seen:
                    continue
                d = self.decide(c)
                if d is None:
                    continue
                verb, extra = d
                seen.add(c["id"])
                p = self.rec.run(verb, c["id"], *extra, check=False)
                if p.returncode != 0:
                    self.errors.append(f"afr {verb} {c['id']} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
                self.decided.append((verb, c))
            self.stopping.wait(0.1)

    def __enter__(self) -> "Approver":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.join(timeout=30)


def processes() -> list[tuple[int, str]]:
    """(pid, command line) of every process."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            out.append((int(d.name), cmd))
    return out


class OtlpRelay:
    """An OTLP/HTTP relay on 127.0.0.1: forwards each POST to `upstream` (`afr otlp`) as it came
    and answers with the upstream's status and body, keeping a parsed copy (otlp_sink's shape)
    and the status. Shows that the CLI's log records did reach the receiver, and were taken."""

    def __init__(self, upstream: str) -> None:
        import urllib.error
        import urllib.request
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from otlp_sink import read_body

        relay = self
        self.upstream = upstream
        self.posts: list[dict] = []
        self.lock = threading.Lock()

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a) -> None:
                pass

            def do_POST(self) -> None:
                raw = read_body(self)
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "content-encoding")}
                req = urllib.request.Request(relay.upstream + self.path, raw, headers, method="POST")
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, body, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
                except urllib.error.HTTPError as e:
                    status, body, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
                except OSError as e:
                    status, body, ctype = 502, str(e).encode(), "text/plain"
                post: dict = {"path": self.path, "status": status, "answer": body[:500].decode(errors="replace")}
                if "json" in self.headers.get("Content-Type", "") and not headers.get("Content-Encoding"):
                    try:
                        post["body"] = json.loads(raw)
                    except ValueError:
                        pass
                with relay.lock:
                    relay.posts.append(post)
                self.send_response(status)
                self.send_header("Content-Type", ctype or "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
