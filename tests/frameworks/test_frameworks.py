"""The OTLP receiver against real agent frameworks under their real instrumentations.

Each test starts `afr serve` on a fresh recorder and `afr otlp` beside it (recording through the
server), runs one script of this folder (a real framework run on a scripted model, exporting
with the OTel SDK's OTLP/HTTP exporter), waits for the receiver's export line, and reads what
the recorder holds with `afr query --json`:

- the tool's own arguments (not the instrumentation's wrapper) and result;
- the error of the tool that raised, or that reported a handled ToolException;
- the agent that ran each tool, the session id as the lane, delegation for a sub-agent's
  tools and for a handoff, and never an agent as its own delegator.

The frameworks and instrumentations are pinned in requirements.txt (installed by
scripts/setup.sh into tests/frameworks/.venv, which runs this file):

    AFR_BIN=target/debug/afr tests/frameworks/.venv/bin/python -m pytest -q tests/frameworks
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RUN_TIMEOUT = 180


def afr_bin() -> Path:
    p = Path(os.environ.get("AFR_BIN") or ROOT / "target/debug/afr").resolve()
    if not p.exists():
        pytest.fail(f"{p} is not built (cargo build -p afr-cli; AFR_BIN names the afr binary)")
    return p


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AFR_", "OTEL_", "OPENAI_", "TRACELOOP_"))}
    # No framework phones home: telemetry off, no hub look-ups, everything on loopback.
    e.update({"HF_HUB_OFFLINE": "1", "TRACELOOP_TELEMETRY": "false", "OPENAI_AGENTS_DISABLE_TRACING": "0",
              "LANGSMITH_TRACING": "false", "NO_PROXY": "127.0.0.1,localhost", "PYTHONDONTWRITEBYTECODE": "1"})
    return e


class Recorder:
    """A fresh recorder with `afr serve` and `afr otlp` (HTTP on a free port) running on it."""

    def __init__(self, dir: Path):
        self.afr = afr_bin()
        self.dir = dir
        self.run("init")
        self.log = open(dir.parent / "serve.log", "ab")
        self.serve = subprocess.Popen([str(self.afr), "--dir", str(dir), "serve"], stdout=self.log,
                                      stderr=self.log, env=env())
        self._wait(lambda: (dir / "afr.sock").exists(), "afr serve's socket")
        self.otlp = subprocess.Popen([str(self.afr), "--dir", str(dir), "otlp", "--http", "127.0.0.1:0", "--no-grpc"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env(), text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.endpoint = self._line(lambda l: l.startswith("afr otlp: OTLP/HTTP on ")).split(" on ", 1)[1]
        self.endpoint = self.endpoint.removesuffix("/v1/traces")

    def _read(self) -> None:
        assert self.otlp.stderr is not None
        for line in self.otlp.stderr:
            self.lines.put(line.rstrip("\n"))

    def _wait(self, cond, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def _line(self, match, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"afr otlp printed no such line; it printed: {self.seen}") from None
            self.seen.append(line)
            if match(line):
                return line

    def run(self, *args: str) -> str:
        p = subprocess.run([str(self.afr), "--dir", str(self.dir), *args], capture_output=True, text=True,
                           timeout=60, env=env())
        assert p.returncode == 0, f"afr {' '.join(args)} exited {p.returncode}: {p.stderr[-3000:]}"
        return p.stdout

    def events(self) -> list[dict]:
        rows = [json.loads(l) for l in self.run("query", "all", "--json").splitlines() if l.strip()]
        return [r["event"] for r in sorted(rows, key=lambda r: r["seq"])]

    def stop(self) -> None:
        for p in (self.otlp, self.serve):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.log.close()


@pytest.fixture
def recorder(tmp_path: Path):
    r = Recorder(tmp_path / "afr")
    try:
        yield r
    finally:
        r.stop()


def run_framework(rec: Recorder, script: str, *args: str, tools: int) -> tuple[dict, list[dict]]:
    """Runs `script ARGS` against the receiver: what it printed, and the events of its tool calls
    once the receiver has recorded `tools` of them (a span held for its parent is recorded
    when the parent comes or after --hold-ms)."""
    p = subprocess.run([sys.executable, str(HERE / script), "--endpoint", rec.endpoint, *args], capture_output=True,
                       text=True, timeout=RUN_TIMEOUT, env=env(), cwd=HERE)
    assert p.returncode == 0, f"{script} exited {p.returncode}\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-5000:]}"
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["ok"], report
    for _ in report["exports"]:
        rec._line(lambda l: l.startswith("afr otlp: export "))
    deadline = time.monotonic() + 20
    while True:
        events = [e for e in rec.events()
                  if any(s.get("kind") == "self_reported_span" for s in e["context_provenance"]["sources"])]
        if len(events) >= tools or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert len(events) == tools, f"{len(events)} tool events, not {tools}: {rec.seen}\n{json.dumps(events)[:5000]}"
    return report, events


def by_tool(events: list[dict], tool: str) -> dict:
    found = [e for e in events if e["intent"]["tool"] == tool]
    assert len(found) == 1, f"{len(found)} events of {tool}: {json.dumps(events, indent=1)[:6000]}"
    return found[0]


def delegator(e: dict) -> str | None:
    return (e.get("delegation_provenance") or {}).get("delegating_agent")


def error(e: dict) -> str | None:
    return (e.get("effects") or {}).get("error")


def sources(e: dict) -> list[str]:
    return [s["uri"] for s in e["context_provenance"]["sources"]]


def no_self_delegation(events: list[dict]) -> None:
    for e in events:
        if e["intent"]["tool"] != "handoff":
            assert delegator(e) != e["code_provenance"]["agent"], f"an agent its own delegator: {e}"


def recorded_args_are_the_calls(report: dict, events: list[dict]) -> None:
    """Every call a tool really received is recorded with exactly those arguments."""
    for call in report["calls"]:
        assert by_tool(events, call["tool"])["intent"]["args"] == call["args"], call


@pytest.mark.parametrize("instrumentation", ["openinference", "openllmetry"])
def test_langgraph(recorder: Recorder, instrumentation: str) -> None:
    report, events = run_framework(recorder, "run_langgraph.py", "--instrumentation", instrumentation,
                                   "--session", "lg-session-1", tools=3)
    assert sorted(e["intent"]["tool"] for e in events) == ["fetch_page", "save_note", "search"], events
    recorded_args_are_the_calls(report, events)
    search = by_tool(events, "search")
    assert search["effects"]["return_value"] == ["hit 0 for OTLP retry semantics", "hit 1 for OTLP retry semantics"]
    assert error(search) is None
    # The handled ToolException: the span is OK, the ToolMessage says status error.
    fetch = by_tool(events, "fetch_page")
    assert error(fetch) == "the tool reported an error: 403 Forbidden: https://example.invalid/private"
    assert "tool_call:call_fetch_1" in sources(fetch)
    # create_react_agent run as the team's node `researcher`; create_agent(name="writer").
    assert search["code_provenance"]["agent"] == "researcher"
    assert fetch["code_provenance"]["agent"] == "researcher"
    assert by_tool(events, "save_note")["code_provenance"]["agent"] == "writer"
    for e in events:
        assert e["lane"] == "conv-lg-session-1", e
        # OpenLLMetry calls the parent graph an agent (invoke_agent team); OpenInference does not.
        assert delegator(e) == ("team" if instrumentation == "openllmetry" else None), e
    no_self_delegation(events)


def test_smolagents(recorder: Recorder) -> None:
    report, events = run_framework(recorder, "run_smolagents.py", "--session", "sm-session-1", tools=4)
    recorded_args_are_the_calls(report, events)
    search = by_tool(events, "search_docs")
    assert search["intent"]["args"] == {"query": "OTLP retry", "limit": 2}
    assert search["effects"]["return_value"] == "hit 0 for OTLP retry; hit 1 for OTLP retry"
    assert search["code_provenance"]["agent"] == "researcher"
    assert search["code_provenance"]["model"] == "scripted-model"
    # The managed agent's tools were delegated by its manager.
    assert delegator(search) == "manager"
    read = by_tool(events, "read_file")
    assert error(read) == "PermissionError: permission denied: /etc/secret"
    finals = {e["code_provenance"]["agent"]: e for e in events if e["intent"]["tool"] == "final_answer"}
    assert set(finals) == {"manager", "researcher"}, events
    assert delegator(finals["manager"]) is None
    for e in events:
        assert e["lane"] == "conv-sm-session-1", e
    no_self_delegation(events)


def test_openai_agents_handoff(recorder: Recorder) -> None:
    report, events = run_framework(recorder, "run_openai_agents.py", "--session", "oa-session-1", tools=3)
    assert report["last_agent"] == "billing", report
    assert sorted(e["intent"]["tool"] for e in events) == ["handoff", "lookup_order", "refund"], events
    recorded_args_are_the_calls(report, events)
    lookup = by_tool(events, "lookup_order")
    assert lookup["effects"]["return_value"] == {"order_id": "A-17", "total": 12.5, "status": "paid"}
    assert lookup["code_provenance"]["agent"] == "triage"
    assert delegator(lookup) is None
    # The handoff is a delegation from triage to billing, not a tool named "handoff to billing".
    handoff = by_tool(events, "handoff")
    assert handoff["category"] == "delegation"
    assert handoff["intent"]["args"] == {"to": "billing"}
    assert handoff["code_provenance"]["agent"] == "triage"
    assert delegator(handoff) == "triage"
    # billing took over: its tools were delegated by triage.
    refund = by_tool(events, "refund")
    assert refund["code_provenance"]["agent"] == "billing"
    assert delegator(refund) == "triage"
    assert error(refund).startswith("Error running tool (non-fatal)"), refund
    for e in events:
        assert e["lane"] == "conv-oa-session-1", e
    no_self_delegation(events)
