#!/usr/bin/env python3
"""Captures the fixtures of tests/agents/fixtures/ from real sessions of each CLI.

    python3 tests/agents/capture.py [--cli claude-code|codex|gemini ...] [--workdir DIR] [--no-write]

Per CLI, three scripted sessions against the scripted model server, with capture_hook.py on
every hook event:

- full: a shell command, a file write, an edit, an MCP tool call (the pinned
  @modelcontextprotocol/server-filesystem of tests/mcp/), a failing shell command (exit 1) and
  a shell command the hook blocks with exit 2, with OTLP/HTTP JSON logs on;
- deny: one shell command per JSON deny shape (and a hook exiting 1), each of which would create
  a file if it ran; which files exist says which shapes block;
- timeout: a pre-tool hook that sleeps longer than its configured timeout;
- subagent: a sub-agent (Claude Code's Agent tool, Codex's spawn_agent/wait_agent with
  gpt-5-codex, Gemini CLI's invoke_agent) that runs one shell command.

Writes fixtures/<cli>/hook-events.jsonl (the full session's hook calls, trimmed),
otlp-logs.json (its tool, hook and prompt log records as one OTLP/JSON ExportLogsServiceRequest),
subagent-hook-events.jsonl (the sub-agent session's hook calls, trimmed),
outcomes.json (the checks, the deny and timeout results, what the model saw, the config files
written, session times). Prints a summary; exits 1 if a check failed. FACTS.md is written from
these.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import agents  # noqa: E402
from otlp_sink import OtlpSink, attrs, log_records  # noqa: E402

HOOK = HERE / "capture_hook.py"
FIXTURES = HERE / "fixtures"
MAX_STR = 2000  # longer strings in fixtures are cut to this many characters

DENY_MARKERS = [
    "AFR_DENY_SPECIFIC", "AFR_DENY_EXTRA", "AFR_DENY_TOPLEVEL", "AFR_DENY_BLOCK", "AFR_DENY_BOTH",
    "AFR_BLOCK_BOTH", "AFR_EXIT1",
]


def full_script(project: Path) -> list[dict]:
    return [
        {"shell": "echo hello-from-shell | tee shell-out.txt"},
        {"write": {"path": "notes.txt", "content": "alpha\nbeta\n"}},
        {"edit": {"path": "notes.txt", "old": "beta", "new": "gamma"}},
        {"mcp": {"server": "fs", "tool": "read_text_file", "args": {"path": str(project / "notes.txt")}}},
        {"shell": "echo failing-out; echo failing-err >&2; exit 1"},
        {"shell": "touch blocked.txt # AFR_BLOCK_EXIT2"},
        {"text": "all done"},
    ]


def deny_script() -> list[dict]:
    turns: list[dict] = [{"shell": f"touch {m.lower()}.txt # {m}"} for m in DENY_MARKERS]
    return turns + [{"text": "all done"}]


def timeout_script() -> list[dict]:
    return [{"shell": "touch slow.txt # AFR_SLOW_HOOK"}, {"text": "all done"}]


def subagent_script(project: Path) -> list[dict]:
    sub = [{"shell": "echo from-subagent | tee sub-out.txt"}, {"text": "sub-agent done"}]
    return [{"agent": {"prompt": "Run one command.", "turns": sub}}, {"text": "all done"}]


def cut(v: Any, limit: int = MAX_STR) -> Any:
    """v with every string longer than limit cut (marked), recursively."""
    if isinstance(v, str):
        return v if len(v) <= limit else v[:limit] + f"...[{len(v) - limit} more chars]"
    if isinstance(v, list):
        return [cut(x, limit) for x in v]
    if isinstance(v, dict):
        return {k: cut(x, limit) for k, x in v.items()}
    return v


def summarize_llm(v: Any) -> Any:
    """Gemini CLI's llm_request/llm_response (the whole conversation, tens of KB) in brief."""
    if not isinstance(v, dict):
        return v
    out: dict[str, Any] = {"_trimmed": "capture.py keeps the keys, the model and the last message"}
    out["keys"] = sorted(v)
    if "model" in v:
        out["model"] = v["model"]
    msgs = v.get("messages")
    if isinstance(msgs, list):
        out["messages_count"] = len(msgs)
        out["last_message"] = cut(msgs[-1] if msgs else None, 600)
    if "candidates" in v:
        out["candidates"] = cut(v["candidates"], 600)
    cfg = v.get("config")
    if isinstance(cfg, dict):
        out["config_keys"] = sorted(cfg)
    return out


def trim_hook_record(rec: dict, cli_pid: int) -> dict:
    rec = dict(rec)
    p = rec.get("payload")
    if isinstance(p, dict):
        p = dict(p)
        for k in ("llm_request", "llm_response"):
            if k in p:
                p[k] = summarize_llm(p[k])
        rec["payload"] = cut(p)
    # The parent chain up to the process the harness started (the CLI, or its node wrapper).
    chain = []
    for proc in rec.get("parents", []):
        chain.append(proc)
        if proc.get("pid") == cli_pid:
            break
    rec["parents"] = chain
    rec["cli_pid_started"] = cli_pid
    return rec


def pick_log_records(cli: str, posts: list[dict]) -> dict:
    """The tool, hook and prompt records of a session, as one OTLP/JSON logs request."""
    want_always = {
        "claude-code": ("claude_code.tool_decision", "claude_code.tool_result", "claude_code.user_prompt"),
        "codex": ("codex.tool_decision", "codex.tool_result", "codex.user_prompt", "codex.conversation_starts"),
        "gemini": ("gemini_cli.tool_call", "gemini_cli.user_prompt"),
    }[cli]
    want_once = {
        "claude-code": ("claude_code.hook_execution_start", "claude_code.hook_execution_complete", "claude_code.api_request"),
        "codex": ("codex.api_request",),
        "gemini": ("gemini_cli.api_request", "gemini_cli.api_response"),
    }[cli]
    seen: set[str] = set()
    groups: dict[str, dict] = {}
    for r in log_records(posts):
        rec = r["record"]
        a = attrs(rec.get("attributes"))
        name = a.get("event.name") or ""
        if cli == "claude-code" and name and not name.startswith("claude_code."):
            name = "claude_code." + name
        keep = name in want_always
        if name in want_once and name not in seen:
            keep = True
        # Gemini CLI: the hook_call records of tool events (they carry the hook's input).
        if name == "gemini_cli.hook_call" and a.get("hook_event_name") in ("BeforeTool", "AfterTool"):
            keep = True
        # Claude Code: the hook_execution records of the blocked call.
        if name.startswith("claude_code.hook_execution") and a.get("num_blocking") not in (None, "0"):
            keep = True
        if not keep:
            continue
        seen.add(name)
        key = json.dumps([r["resource"], r["scope"]], sort_keys=True)
        g = groups.setdefault(key, {"resource": r["resource"], "scope": r["scope"], "records": []})
        g["records"].append(cut(rec))
    return {
        "resourceLogs": [
            {"resource": g["resource"], "scopeLogs": [{"scope": g["scope"], "logRecords": g["records"]}]} for g in groups.values()
        ]
    }


def model_saw(requests_log: Path, needle: str) -> str | None:
    """The tool result text the model got back for the call whose input holds `needle`."""
    reqs = [q for q in agents.read_jsonl(requests_log) if q["kind"].endswith(".main")]
    if not reqs:
        return None
    body = reqs[-1]["body"]
    # Anthropic: tool_use in an assistant message, tool_result in the next user message.
    if "messages" in body:
        ids = {}
        for m in body["messages"]:
            for b in m["content"] if isinstance(m.get("content"), list) else []:
                if b.get("type") == "tool_use" and needle in json.dumps(b.get("input")):
                    ids[b["id"]] = True
                if b.get("type") == "tool_result" and b.get("tool_use_id") in ids:
                    c = b.get("content")
                    text = c if isinstance(c, str) else json.dumps(c)
                    return text.split("\n\n<system-reminder>")[0] + (" [is_error]" if b.get("is_error") else "")
    if "input" in body:
        calls = {}
        for it in body["input"]:
            if it.get("type") in ("function_call", "custom_tool_call") and needle in json.dumps(it):
                calls[it["call_id"]] = True
            if it.get("type") in ("function_call_output", "custom_tool_call_output") and it.get("call_id") in calls:
                return it.get("output") if isinstance(it.get("output"), str) else json.dumps(it.get("output"))
    if "contents" in body:
        ids = {}
        for c in body["contents"]:
            for p in c.get("parts", []):
                fc = p.get("functionCall")
                if fc and needle in json.dumps(fc.get("args")):
                    ids[fc.get("id")] = True
                fr = p.get("functionResponse")
                if fr and fr.get("id") in ids:
                    return json.dumps(fr.get("response"))
    return None


def tool_records(cli: str, posts: list[dict], needle: str) -> list[str]:
    """Names of the OTel log records that mention `needle` (a marker in a call's input)."""
    out = []
    for r in log_records(posts):
        a = attrs(r["record"].get("attributes"))
        name = a.get("event.name") or ""
        if "tool" not in name:
            continue
        if needle in json.dumps(a):
            out.append(name)
    return out


def config_files(res: agents.Result) -> dict[str, str]:
    files = {}
    for p in [res.project / ".claude/settings.json", res.cli_home / "hooks.json", res.cli_home / "config.toml", res.cli_home / "settings.json"]:
        if p.is_file() and p.stat().st_size < 20000:
            files[str(p)] = p.read_text()
    mcp = res.home.parent / "mcp.json"
    if mcp.is_file():
        files[str(mcp)] = mcp.read_text()
    return files


def run(cli: str, workdir: Path, name: str, script_fn, **kw) -> tuple[agents.Result, Path, list[dict]]:
    w = workdir / cli / name
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir(parents=True)
    hooks = w / "hook-events.jsonl"
    sink = OtlpSink(str(w / "otlp.jsonl")).start()
    try:
        res = agents.run_session(
            cli,
            script_fn(w / "project"),
            workdir=w,
            hook=[sys.executable, str(HOOK), str(hooks), cli],
            otlp=sink.endpoint,
            **kw,
        )
        time.sleep(1.5)  # the last OTLP batches
    finally:
        sink.stop()
    return res, hooks, list(sink.posts)


def capture(cli: str, workdir: Path, write: bool) -> tuple[dict, list[str]]:
    failures: list[str] = []
    out: dict[str, Any] = {"cli": cli}

    # full
    res, hooks, posts = run(
        cli, workdir, "full", full_script, mcp={"fs": agents.filesystem_mcp(workdir / cli / "full" / "project")},
        traces=cli != "codex", timeout=120,
    )
    hk = agents.read_jsonl(hooks)
    proj = res.project
    checks = {
        "exit_code": res.exit_code,
        "seconds": round(res.seconds, 2),
        "shell_ran": (proj / "shell-out.txt").exists() and (proj / "shell-out.txt").read_text() == "hello-from-shell\n",
        "write_and_edit": (proj / "notes.txt").exists() and (proj / "notes.txt").read_text() == "alpha\ngamma\n",
        "blocked_call_did_not_run": not (proj / "blocked.txt").exists(),
        "hook_saw_blocked_call": any("AFR_BLOCK_EXIT2" in json.dumps((h.get("payload") or {}).get("tool_input")) for h in hk),
        "hook_events": sorted({(h.get("payload") or {}).get("hook_event_name") or h["event"] for h in hk}),
        "mcp_tool_seen_by_hook": sorted({(h.get("payload") or {}).get("tool_name") for h in hk if "read_text_file" in str((h.get("payload") or {}).get("tool_name"))}),
        "model_saw_blocked": model_saw(res.requests_log, "AFR_BLOCK_EXIT2"),
        "model_saw_failing": model_saw(res.requests_log, "exit 1"),
        "cli_stdout_items_naming_blocked_call": [cut(e, 400) for e in res.events() if "AFR_BLOCK_EXIT2" in json.dumps(e)],
        "cli_stderr_lines_about_hooks": [l for l in res.stderr.splitlines() if "hook" in l.lower()][:20],
        "otel_records_naming_blocked_call": tool_records(cli, posts, "AFR_BLOCK_EXIT2"),
        "otlp_posts": sorted({f"{p['path']} {p['content_type']} chunked={p['chunked']} gzip={p['content_encoding'] == 'gzip'}" for p in posts}),
        "model_requests": sorted({q["kind"] + " " + q["path"].split("?")[0] for q in agents.read_jsonl(res.requests_log)}),
    }
    for k in ("shell_ran", "write_and_edit", "blocked_call_did_not_run", "hook_saw_blocked_call"):
        if not checks[k]:
            failures.append(f"{cli} full: {k} failed")
    if res.exit_code != 0:
        failures.append(f"{cli} full: exit {res.exit_code}: {res.stderr[-500:]}")
    if not checks["mcp_tool_seen_by_hook"]:
        failures.append(f"{cli} full: no MCP tool call reached the hook")
    out["full"] = checks
    out["config_files"] = config_files(res)
    out["cli_pid_started"] = res.pid
    if write:
        d = FIXTURES / cli
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "hook-events.jsonl", "w", encoding="utf-8") as f:
            for h in hk:
                f.write(json.dumps(trim_hook_record(h, res.pid)) + "\n")
        (d / "otlp-logs.json").write_text(json.dumps(pick_log_records(cli, posts), indent=1) + "\n")

    # deny
    res, hooks, posts = run(cli, workdir, "deny", lambda p: deny_script(), timeout=120)
    hk = agents.read_jsonl(hooks)
    deny = {"exit_code": res.exit_code, "seconds": round(res.seconds, 2), "shapes": {}}
    for m in DENY_MARKERS:
        pre = next((h for h in hk if (h.get("payload") or {}).get("hook_event_name") in ("PreToolUse", "BeforeTool") and m in json.dumps(h["payload"].get("tool_input"))), None)
        post = [h["payload"]["hook_event_name"] for h in hk if (h.get("payload") or {}).get("hook_event_name") not in ("PreToolUse", "BeforeTool") and m in json.dumps((h.get("payload") or {}).get("tool_input"))]
        deny["shapes"][m] = {
            "hook_answer": pre["answer"] if pre else None,
            "call_ran": (res.project / f"{m.lower()}.txt").exists(),
            "model_saw": model_saw(res.requests_log, m),
            "later_hook_events_for_the_call": post,
            "otel_records": tool_records(cli, posts, m),
        }
    deny["cli_stderr_lines_about_hooks"] = [l for l in res.stderr.splitlines() if "hook" in l.lower()][:20]
    deny["cli_stdout_items_naming_markers"] = [cut(e, 400) for e in res.events() if any(m in json.dumps(e) for m in DENY_MARKERS)][:20]
    out["deny"] = deny
    if not all(s["hook_answer"] for s in deny["shapes"].values()):
        failures.append(f"{cli} deny: a deny call never reached the hook")

    # timeout
    res, hooks, posts = run(cli, workdir, "timeout", lambda p: timeout_script(), hook_timeout=2, env={"AFR_HOOK_SLEEP": "6"}, timeout=120)
    hk = agents.read_jsonl(hooks)
    time.sleep(5)  # a hook the CLI did not kill wakes up about now
    hk = agents.read_jsonl(hooks)
    out["timeout"] = {
        "configured_timeout_s": 2,
        "hook_sleeps_s": 6,
        "exit_code": res.exit_code,
        "session_seconds": round(res.seconds, 2),
        "call_ran": (res.project / "slow.txt").exists(),
        "hook_woke_after_sleep": any(h.get("woke") for h in hk),
        "model_saw": model_saw(res.requests_log, "AFR_SLOW_HOOK"),
        "later_hook_events_for_the_call": [h["payload"]["hook_event_name"] for h in hk if (h.get("payload") or {}).get("hook_event_name") not in ("PreToolUse", "BeforeTool") and "AFR_SLOW_HOOK" in json.dumps((h.get("payload") or {}).get("tool_input"))],
    }
    # subagent
    res, hooks, posts = run(cli, workdir, "subagent", subagent_script, timeout=120, model="gpt-5-codex" if cli == "codex" else None)
    hk = agents.read_jsonl(hooks)
    out["subagent"] = {
        "exit_code": res.exit_code,
        "seconds": round(res.seconds, 2),
        "subagent_shell_ran": (res.project / "sub-out.txt").exists(),
        "hook_events": [
            [(h.get("payload") or {}).get("hook_event_name"), (h.get("payload") or {}).get("tool_name"), (h.get("payload") or {}).get("agent_id")]
            for h in hk
            if (h.get("payload") or {}).get("hook_event_name") not in ("BeforeModel", "AfterModel", "BeforeToolSelection", "PreCompress")
        ],
    }
    if not out["subagent"]["subagent_shell_ran"]:
        failures.append(f"{cli} subagent: the sub-agent's shell command did not run")
    if write:
        with open(FIXTURES / cli / "subagent-hook-events.jsonl", "w", encoding="utf-8") as f:
            for h in hk:
                f.write(json.dumps(trim_hook_record(h, res.pid)) + "\n")
        (FIXTURES / cli / "outcomes.json").write_text(json.dumps(cut(out), indent=1) + "\n")
    return out, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", action="append", choices=agents.CLIS)
    ap.add_argument("--workdir", default="/tmp/afr-agents-capture")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    failures: list[str] = []
    for cli in a.cli or agents.CLIS:
        why = agents.installed(cli)
        if why:
            print(f"{cli}: skipped: {why}")
            continue
        out, f = capture(cli, Path(a.workdir), not a.no_write)
        failures += f
        print(json.dumps({k: v for k, v in out.items() if k != "config_files"}, indent=1))
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
