"""Smoke tests of the coding-agent harness: one short scripted session per CLI.

Each session runs a real CLI (installed in tests/agents/node_modules by scripts/setup.sh) against
the scripted model server with the capture hook on every event, and checks that the scripted
shell command really ran and that the hook saw it before and after. A CLI that is not installed
is skipped with the reason. About 1 s (Codex), 2 s (Claude Code) and 3 s (Gemini CLI) each.

    .venv/bin/python -m pytest tests/agents/test_harness.py
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from agents import CLIS, installed, read_jsonl, run_session  # noqa: E402
from model_server import ModelServer  # noqa: E402

HOOK = HERE / "capture_hook.py"

# (pre-tool event, post-tool event, shell tool name) as each CLI names them.
SHELL_EVENTS = {
    "claude-code": ("PreToolUse", "PostToolUse", "Bash"),
    "codex": ("PreToolUse", "PostToolUse", "Bash"),
    "gemini": ("BeforeTool", "AfterTool", "run_shell_command"),
}


@pytest.mark.parametrize("cli", CLIS)
def test_scripted_shell_call_runs_and_the_hook_sees_it(cli: str, tmp_path: Path) -> None:
    why = installed(cli)
    if why:
        pytest.skip(why)
    hooks = tmp_path / "hook-events.jsonl"
    script = [{"shell": "echo harness-ok > out.txt"}, {"text": "done"}]
    r = run_session(cli, script, workdir=tmp_path / "session", hook=[sys.executable, str(HOOK), str(hooks), cli], timeout=60)
    assert r.exit_code == 0, f"{cli} exited {r.exit_code} after {r.seconds:.1f} s: {r.stderr[-2000:]}"
    assert (r.project / "out.txt").read_text() == "harness-ok\n"

    pre, post, shell = SHELL_EVENTS[cli]
    seen = []
    for h in read_jsonl(hooks):
        p = h.get("payload") or {}
        if "harness-ok" in json.dumps(p.get("tool_input")):
            seen.append((p.get("hook_event_name"), p.get("tool_name")))
    assert (pre, shell) in seen, seen
    assert (post, shell) in seen, seen
    assert seen.index((pre, shell)) < seen.index((post, shell))


def _post(port: int, path: str, body: dict) -> bytes:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read()


def test_model_server_advances_on_tool_results_and_replays_retries(tmp_path: Path) -> None:
    """No CLI needed: the Anthropic side of the model server, spoken to directly."""
    srv = ModelServer([{"shell": "echo one"}, {"text": "done"}], str(tmp_path / "requests.jsonl")).start()
    try:
        tools = [{"name": "Bash", "input_schema": {}}]
        first = {"model": "m", "stream": True, "tools": tools, "messages": [{"role": "user", "content": "go"}]}
        a = _post(srv.port, "/v1/messages?beta=true", first)
        assert b'"name":"Bash"' in a and b"echo one" in a and b'"stop_reason":"tool_use"' in a
        assert _post(srv.port, "/v1/messages?beta=true", first) == a  # a retry gets the same answer
        tool_use_id = json.loads(a.split(b"data: ")[2].split(b"\n")[0])["content_block"]["id"]
        second = dict(first)
        second["messages"] = first["messages"] + [
            {"role": "assistant", "content": [{"type": "tool_use", "id": tool_use_id, "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": "one"}]},
        ]
        b = _post(srv.port, "/v1/messages?beta=true", second)
        assert b'"text_delta"' in b and b"done" in b and b'"stop_reason":"end_turn"' in b
    finally:
        srv.stop()
    logged = read_jsonl(tmp_path / "requests.jsonl")
    assert [q["kind"] for q in logged] == ["anthropic.main"] * 3
