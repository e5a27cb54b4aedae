"""Runs one headless session of a real coding-agent CLI against the scripted model server.

Claude Code, Codex and Gemini CLI (the versions pinned in tests/agents/package.json, installed by
scripts/setup.sh) each run in a scratch HOME and project directory, answered by
model_server.ModelServer on 127.0.0.1, with:

- a hook command configured for every hook event the CLI has (Claude Code: the project's
  .claude/settings.json; Codex: $CODEX_HOME/hooks.json, run with --dangerously-bypass-hook-trust;
  Gemini CLI: ~/.gemini/settings.json hooksConfig/hooks); the event name is appended to its argv;
- optionally MCP servers (stdio) and an OTLP/HTTP JSON endpoint for the CLI's logs (and traces);
- a timeout on everything: the CLI runs in its own process group, killed whole on timeout.

    from agents import run_session, installed
    r = run_session("codex", [{"shell": "echo hi > out.txt"}, {"text": "done"}], workdir=tmp,
                    hook=["python3", "capture_hook.py", "hooks.jsonl", "codex"])
    r.exit_code, r.stdout, r.stderr, r.project

Standard library only. The facts behind each setting are in tests/agents/FACTS.md.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from model_server import ModelServer  # noqa: E402

CLIS = ("claude-code", "codex", "gemini")

BINARIES = {
    "claude-code": HERE / "node_modules/@anthropic-ai/claude-code/bin/claude.exe",
    "codex": HERE / "node_modules/.bin/codex",
    "gemini": HERE / "node_modules/.bin/gemini",
}

# Every hook event each CLI knows (read from the pinned versions); tool events get matcher "*".
HOOK_EVENTS = {
    "claude-code": [
        "PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "PermissionRequest",
        "PermissionDenied", "Notification", "UserPromptSubmit", "UserPromptExpansion",
        "SessionStart", "SessionEnd", "Stop", "StopFailure", "SubagentStart", "SubagentStop",
        "PreCompact", "PostCompact", "PreModelSwitch", "PostModelSwitch", "Setup",
        "TeammateIdle", "TaskCreated", "TaskCompleted", "Elicitation", "ElicitationResult",
        "ConfigChange", "InstructionsLoaded", "CwdChanged", "FileChanged", "DirectoryAdded",
        "MessageDisplay", "PreSkillShellCommand",
    ],
    "codex": [
        "PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact",
        "SessionStart", "SessionEnd", "UserPromptSubmit", "SubagentStart", "SubagentStop", "Stop",
    ],
    "gemini": [
        "BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "BeforeModel", "AfterModel",
        "BeforeToolSelection", "SessionStart", "SessionEnd", "PreCompress", "Notification",
    ],
}
TOOL_EVENTS = {
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "PermissionDenied",
    "BeforeTool", "AfterTool",
}

# The model each CLI is told to use: one its own model table knows (Codex: else no apply_patch
# tool; Gemini CLI: a fixed model, so no routing call).
MODELS = {"claude-code": "claude-sonnet-4-5", "codex": "gpt-5.5", "gemini": "gemini-2.5-flash"}

DEFAULT_PROMPT = "Run the scripted task."


@dataclass
class McpServer:
    """A stdio MCP server: command, args, env."""

    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def filesystem_mcp(root: Path) -> McpServer:
    """The pinned @modelcontextprotocol/server-filesystem (tests/mcp/), serving `root`."""
    entry = ROOT / "tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    return McpServer("node", [str(entry), str(root)])


@dataclass
class Result:
    cli: str
    exit_code: int | None  # None: killed on timeout
    stdout: str
    stderr: str
    seconds: float
    pid: int
    timed_out: bool
    home: Path
    project: Path
    cli_home: Path  # CODEX_HOME for Codex, ~/.claude or ~/.gemini for the others
    requests_log: Path

    def events(self) -> list[dict]:
        """stdout as JSON lines (each CLI's stream-json / --json output), non-JSON lines skipped."""
        out = []
        for line in self.stdout.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out


def installed(cli: str) -> str | None:
    """None when `cli` is installed and runs, else why not."""
    exe = BINARIES[cli]
    if not exe.exists():
        return f"{cli} is not installed in tests/agents/node_modules (scripts/setup.sh installs it)"
    try:
        p = subprocess.run([str(exe), "--version"], capture_output=True, timeout=30, env={**os.environ, "HOME": "/nonexistent"})
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{cli} --version failed: {e}"
    if p.returncode != 0:
        return f"{cli} --version exited {p.returncode}: {p.stderr.decode(errors='replace')[:200]}"
    return None


def _hook_command(hook: list[str] | str, event: str) -> str:
    """argv with the event name appended, or a raw shell command with {event} replaced."""
    if isinstance(hook, str):
        return hook.replace("{event}", event)
    return shlex.join([*hook, event])


def _hooks_block(cli: str, hook: list[str] | str, timeout: float) -> dict:
    """The {"EVENT": [{matcher, hooks: [command]}]} object, shared by all three CLIs."""
    # Gemini CLI's hook timeout is in milliseconds, the others' in seconds.
    t = int(timeout * 1000) if cli == "gemini" else int(timeout)
    out: dict[str, Any] = {}
    for ev in HOOK_EVENTS[cli]:
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": _hook_command(hook, ev), "timeout": t}]}
        if ev in TOOL_EVENTS:
            group = {"matcher": "*", **group}
        out[ev] = [group]
    return out


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def _base_env(home: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "USER": os.environ.get("USER", "root"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
    }
    return env


def _setup_claude(d: dict, port: int, hook, hook_timeout, mcp, otlp, traces, model) -> tuple[list[str], dict]:
    # d["project_mcp"]: the MCP servers go into the project's .mcp.json, which Claude Code reads
    # itself (enableAllProjectMcpServers: no approval prompt), instead of --mcp-config.
    home, proj = d["home"], d["project"]
    env = _base_env(home)
    env.update(
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
        ANTHROPIC_API_KEY="sk-ant-scripted",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        IS_SANDBOX="1",  # --dangerously-skip-permissions as root
        CLAUDE_CODE_PROPAGATE_TRACEPARENT="1",
    )
    if otlp:
        env.update(
            CLAUDE_CODE_ENABLE_TELEMETRY="1",
            OTEL_LOGS_EXPORTER="otlp",
            OTEL_METRICS_EXPORTER="none",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/json",
            OTEL_EXPORTER_OTLP_ENDPOINT=otlp,
            OTEL_LOG_TOOL_DETAILS="1",
            OTEL_LOG_USER_PROMPTS="1",
            OTEL_LOGS_EXPORT_INTERVAL="500",
            OTEL_BSP_SCHEDULE_DELAY="500",
        )
        if traces:
            env.update(OTEL_TRACES_EXPORTER="otlp", CLAUDE_CODE_ENHANCED_TELEMETRY_BETA="1")
    settings: dict[str, Any] = {}
    if hook:
        settings["hooks"] = _hooks_block("claude-code", hook, hook_timeout)
    if mcp and d.get("project_mcp"):
        settings["enableAllProjectMcpServers"] = True
    (proj / ".claude").mkdir(parents=True, exist_ok=True)
    (proj / ".claude/settings.json").write_text(json.dumps(settings, indent=2))
    args = ["--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", "--model", model]
    if mcp:
        cfg = {"mcpServers": {n: {"type": "stdio", "command": s.command, "args": s.args, "env": s.env} for n, s in mcp.items()}}
        if d.get("project_mcp"):
            (proj / ".mcp.json").write_text(json.dumps(cfg, indent=2))
        else:
            path = d["root"] / "mcp.json"
            path.write_text(json.dumps(cfg, indent=2))
            args += ["--mcp-config", str(path), "--strict-mcp-config"]
    d["cli_home"] = home / ".claude"
    return args, env


def _setup_codex(d: dict, port: int, hook, hook_timeout, mcp, otlp, traces, model) -> tuple[list[str], dict]:
    home = d["home"]
    codex_home = d["root"] / "codex-home"
    codex_home.mkdir(parents=True, exist_ok=True)
    env = _base_env(home)
    env.update(CODEX_HOME=str(codex_home), AFR_SCRIPTED_API_KEY="sk-scripted")
    lines = [
        f"model = {_toml_str(model)}",
        'model_provider = "scripted"',
        "",
        "[model_providers.scripted]",
        'name = "scripted"',
        f'base_url = "http://127.0.0.1:{port}/v1"',
        'env_key = "AFR_SCRIPTED_API_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        "[features]",
        "plugins = false",
        "remote_plugin = false",
        "apps = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
    ]
    for name, s in (mcp or {}).items():
        lines += ["", f"[mcp_servers.{name}]", f"command = {_toml_str(s.command)}", "args = [" + ", ".join(_toml_str(a) for a in s.args) + "]"]
        if s.env:
            lines += ["env = { " + ", ".join(f"{k} = {_toml_str(v)}" for k, v in s.env.items()) + " }"]
    if otlp:
        lines += [
            "",
            "[otel]",
            'environment = "afr-test"',
            "log_user_prompt = true",
            f'exporter = {{ otlp-http = {{ endpoint = "{otlp}/v1/logs", protocol = "json" }} }}',
        ]
        if traces:  # some two thousand spans a session, most of them internal
            lines += [f'trace_exporter = {{ otlp-http = {{ endpoint = "{otlp}/v1/traces", protocol = "json" }} }}']
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n")
    if hook:
        (codex_home / "hooks.json").write_text(json.dumps({"hooks": _hooks_block("codex", hook, hook_timeout)}, indent=2))
    args = ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust"]
    d["cli_home"] = codex_home
    return args, env


def _setup_gemini(d: dict, port: int, hook, hook_timeout, mcp, otlp, traces, model) -> tuple[list[str], dict]:
    home = d["home"]
    env = _base_env(home)
    env.update(
        GEMINI_API_KEY="scripted",
        GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{port}",
        GEMINI_CLI_TRUST_WORKSPACE="true",  # else -p exits 55 in an untrusted folder
    )
    settings: dict[str, Any] = {
        # GOOGLE_GEMINI_BASE_URL alone selects the "gateway" auth type, which 0.61 rejects in -p
        # ("Invalid auth method selected."); the API-key type still honours the base URL.
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    }
    if hook:
        settings["hooksConfig"] = {"enabled": True}
        settings["hooks"] = _hooks_block("gemini", hook, hook_timeout)
    if mcp:
        settings["mcpServers"] = {n: {"command": s.command, "args": s.args, "env": s.env, "trust": True} for n, s in mcp.items()}
    if otlp:
        settings["telemetry"] = {"enabled": True, "target": "local", "otlpEndpoint": otlp, "otlpProtocol": "http", "logPrompts": True}
    gdir = home / ".gemini"
    gdir.mkdir(parents=True, exist_ok=True)
    (gdir / "settings.json").write_text(json.dumps(settings, indent=2))
    args = ["--output-format", "stream-json", "--approval-mode", "yolo", "-m", model]
    d["cli_home"] = gdir
    return args, env


SETUP = {"claude-code": _setup_claude, "codex": _setup_codex, "gemini": _setup_gemini}


def run_session(
    cli: str,
    script: list[dict],
    *,
    workdir: Path,
    hook: list[str] | str | None = None,
    hook_timeout: float = 30,
    mcp: dict[str, McpServer] | None = None,
    otlp: str | None = None,
    traces: bool = False,
    model: str | None = None,
    prompt: str = DEFAULT_PROMPT,
    timeout: float = 90,
    env: dict[str, str] | None = None,
    project_files: dict[str, str] | None = None,
    project_mcp: bool = False,
    configure: Callable[[dict[str, Path], dict[str, str]], None] | None = None,
) -> Result:
    """Runs one session of `cli` in workdir/{home,project} against a fresh scripted model server.

    The model server logs every request to workdir/model-requests.jsonl; the CLI's stdout and
    stderr are also kept in workdir/cli-stdout.txt and cli-stderr.txt.

    hook: argv of the hook command (the event name is appended), or a shell command string in
    which {event} is replaced by the event name; mcp: stdio MCP servers by name;
    otlp: the OTLP/HTTP base URL (http://127.0.0.1:P) for the CLI's logs (and its traces with
    traces=True; Gemini CLI sends traces and metrics whenever telemetry is on); env: extra
    variables for the CLI (and so for its hooks); model: instead of MODELS[cli] (Codex offers its
    multi_agent_v1 sub-agent tools with "gpt-5-codex", not with "gpt-5.5", which has apply_patch).
    project_mcp: Claude Code's servers in the project's .mcp.json (read by the CLI itself, as a
    user has them) rather than a --mcp-config file. configure(paths, env): called once the
    CLI's configuration is written and before it starts, with {"root", "home", "project",
    "cli_home"} and the CLI's environment (HOME, CODEX_HOME, ...), e.g. to run `afr setup` on
    it; it may change the environment.
    """
    if cli not in SETUP:
        raise ValueError(f"unknown CLI {cli!r}; want one of {CLIS}")
    workdir = Path(workdir).resolve()
    d: dict[str, Any] = {"root": workdir, "home": workdir / "home", "project": workdir / "project", "project_mcp": project_mcp}
    d["home"].mkdir(parents=True, exist_ok=True)
    d["project"].mkdir(parents=True, exist_ok=True)
    for rel, content in (project_files or {}).items():
        p = d["project"] / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    requests_log = workdir / "model-requests.jsonl"
    server = ModelServer(script, str(requests_log), cwd=str(d["project"])).start()
    try:
        args, cli_env = SETUP[cli](d, server.port, hook, hook_timeout, mcp, otlp, traces, model or MODELS[cli])
        cli_env.update(env or {})
        if configure:
            configure({k: d[k] for k in ("root", "home", "project", "cli_home")}, cli_env)
        argv = [str(BINARIES[cli]), *args]
        argv += [prompt] if cli == "codex" else ["-p", prompt]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=d["project"],
            env=cli_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, killed whole on timeout
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate(timeout=10)
        # A CLI can leave children behind (MCP servers, background shells): end the group.
        _kill_group(proc.pid)
        (workdir / "cli-stdout.txt").write_bytes(out)
        (workdir / "cli-stderr.txt").write_bytes(err)
        return Result(
            cli=cli,
            exit_code=None if timed_out else proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            seconds=time.monotonic() - t0,
            pid=proc.pid,
            timed_out=timed_out,
            home=d["home"],
            project=d["project"],
            cli_home=d["cli_home"],
            requests_log=requests_log,
        )
    finally:
        server.stop()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def read_jsonl(path: Path) -> list[dict]:
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
