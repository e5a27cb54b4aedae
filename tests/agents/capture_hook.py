#!/usr/bin/env python3
"""The capture hook: appends what a coding-agent CLI hands its hook to a JSONL file.

    capture_hook.py OUT.jsonl CLI EVENT

CLI is claude-code, codex or gemini; EVENT the hook event it was configured for. Each call appends
one line: the payload from stdin (parsed JSON), argv, the environment variables of interest (and
the names of all others), the hook's own pid and its parent pid chain (pid, comm, argv), and what
the hook answered. It prints nothing and exits 0, except on a pre-tool event whose tool input
holds one of these markers (so a script can make exactly one call blocked):

    AFR_BLOCK_EXIT2      exit 2 with a reason on stderr
    AFR_DENY_SPECIFIC    exit 0, stdout {"hookSpecificOutput": {..., "permissionDecision": "deny", ...}}
    AFR_DENY_EXTRA       the same plus an unknown top-level key
    AFR_DENY_TOPLEVEL    exit 0, stdout {"decision": "deny", "reason": ...}
    AFR_DENY_BLOCK       exit 0, stdout {"decision": "block", "reason": ...}
    AFR_DENY_BOTH        exit 0, stdout the AFR_DENY_SPECIFIC object plus "decision": "deny", "reason"
    AFR_BLOCK_BOTH       exit 0, stdout the AFR_DENY_SPECIFIC object plus "decision": "block", "reason"
    AFR_EXIT1            exit 1 with a reason on stderr (a failing hook, not a deny)
    AFR_SLOW_HOOK        sleep $AFR_HOOK_SLEEP seconds (default 5), then exit 0; a second line
                         ("woke") is appended if the hook was not killed first
"""

from __future__ import annotations

import json
import os
import sys
import time

PRE_TOOL_EVENTS = ("PreToolUse", "BeforeTool")
ENV_PREFIXES = ("CLAUDE", "GEMINI", "CODEX", "TRACEPARENT", "TRACESTATE", "OTEL", "AFR_")
ENV_EXTRA = ("PWD", "SHLVL", "HOME", "SHELL", "_")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def proc_info(pid: int) -> dict:
    info: dict = {"pid": pid}
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
        # comm is in parentheses and may hold spaces; the fields after it are space-separated.
        info["comm"] = stat[stat.index("(") + 1 : stat.rindex(")")]
        info["ppid"] = int(stat[stat.rindex(")") + 2 :].split()[1])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
        info["argv"] = [a if len(a) < 300 else a[:300] + "..." for a in argv[:8]]
    except (OSError, ValueError):
        pass
    return info


def parent_chain(limit: int = 8) -> list[dict]:
    chain = []
    pid = os.getppid()
    while pid > 1 and len(chain) < limit:
        info = proc_info(pid)
        chain.append(info)
        pid = info.get("ppid", 0)
    return chain


def selected_env() -> dict:
    out = {}
    for k, v in os.environ.items():
        if k.startswith(ENV_PREFIXES) or k in ENV_EXTRA:
            out[k] = "<redacted>" if any(w in k for w in SECRET_WORDS) else v
    return out


def deny_answer(event: str, marker: str, reason: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) for a marker."""
    specific = {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny", "permissionDecisionReason": reason}}
    if marker == "AFR_BLOCK_EXIT2":
        return 2, "", reason
    if marker == "AFR_DENY_SPECIFIC":
        return 0, json.dumps(specific), ""
    if marker == "AFR_DENY_EXTRA":
        return 0, json.dumps({**specific, "afr": {"note": "an unknown top-level key"}}), ""
    if marker == "AFR_DENY_TOPLEVEL":
        return 0, json.dumps({"decision": "deny", "reason": reason}), ""
    if marker == "AFR_DENY_BLOCK":
        return 0, json.dumps({"decision": "block", "reason": reason}), ""
    if marker == "AFR_DENY_BOTH":
        return 0, json.dumps({"decision": "deny", "reason": reason, **specific}), ""
    if marker == "AFR_BLOCK_BOTH":
        return 0, json.dumps({"decision": "block", "reason": reason, **specific}), ""
    if marker == "AFR_EXIT1":
        return 1, "", reason
    return 0, "", ""


MARKERS = (
    "AFR_BLOCK_EXIT2", "AFR_DENY_SPECIFIC", "AFR_DENY_EXTRA", "AFR_DENY_TOPLEVEL", "AFR_BLOCK_BOTH",
    "AFR_DENY_BLOCK", "AFR_DENY_BOTH", "AFR_EXIT1", "AFR_SLOW_HOOK",
)


def main() -> int:
    out_path = sys.argv[1]
    cli = sys.argv[2] if len(sys.argv) > 2 else ""
    event = sys.argv[3] if len(sys.argv) > 3 else ""
    raw = sys.stdin.buffer.read()
    try:
        payload = json.loads(raw) if raw.strip() else None
    except ValueError:
        payload = {"_raw": raw.decode("utf-8", "replace")}
    record = {
        "t": time.time(),
        "cli": cli,
        "event": event,
        "argv": sys.argv,
        "payload": payload,
        "env": selected_env(),
        "env_names": sorted(os.environ),
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "parents": parent_chain(),
    }
    code, stdout, stderr = 0, "", ""
    name = (payload or {}).get("hook_event_name", event) if isinstance(payload, dict) else event
    marker = None
    if name in PRE_TOOL_EVENTS and isinstance(payload, dict):
        tool_input = json.dumps(payload.get("tool_input"))
        marker = next((m for m in MARKERS if m in tool_input), None)
    if marker and marker != "AFR_SLOW_HOOK":
        code, stdout, stderr = deny_answer(name, marker, f"blocked by the capture hook ({marker})")
    record["answer"] = {"marker": marker, "exit": code, "stdout": stdout, "stderr": stderr}
    with open(out_path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    if marker == "AFR_SLOW_HOOK":
        time.sleep(float(os.environ.get("AFR_HOOK_SLEEP", "5")))
        with open(out_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": time.time(), "cli": cli, "event": event, "woke": True, "pid": os.getpid()}) + "\n")
    if stdout:
        sys.stdout.write(stdout)
    if stderr:
        sys.stderr.write(stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
