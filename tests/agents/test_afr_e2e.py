"""AFR end to end with the real coding-agent CLIs: `afr setup`, `afr hook` (through `afr-hook`
and `afr serve`), `afr mcp wrap`, `afr approve` / `afr reject`, `afr recover`, `afr otlp`, and
anchoring, disclosure and `afr-verify`.

Each test runs Claude Code, Codex or Gemini CLI (tests/agents/node_modules, scripts/setup.sh)
headless against the scripted model server, configured only by the real `afr setup` on a
scratch HOME and project, with `afr serve` on a fresh `afr init` store, and reads back what
was recorded with `afr query --json`. A CLI that is not installed, or AFR binaries that are not
built, are skipped with the reason.

    AFR_BIN=target/debug/afr .venv/bin/python -m pytest tests/agents/test_afr_e2e.py
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from afr_harness import ROOT, Approver, OtlpRelay, Recorder, afr_bin, free_port, missing_binaries, processes, wait_for  # noqa: E402
from agents import CLIS, filesystem_mcp, installed, run_session  # noqa: E402

PROMPT = "Run the scripted task (AFR end-to-end test)."

# Native shell tool of each CLI, as the hook and the policy see it.
SHELL_TOOL = {"claude-code": "Bash", "codex": "Bash", "gemini": "run_shell_command"}

# The commands of the session; the policy below decides them by these markers.
SHELL = "echo hello-from-shell"
FAILING = "echo failing-out; echo failing-err >&2; exit 3"
DENIED = "touch afr-denied.txt"
APPROVED = "echo approved-output > afr-approved.txt; echo approved-ran"
REJECTED = "echo rejected-output > afr-rejected.txt"

POLICY = """\
default = "allow"

[[rule]]
id = "no-denied-file"
args = { command = "*afr-denied*" }
verdict = "deny"
reason = "the test denies this command"

[[rule]]
id = "approve-this-one"
args = { command = "*afr-approved*" }
verdict = "escalate"
reason = "a person decides (approves)"

[[rule]]
id = "reject-this-one"
args = { command = "*afr-rejected*" }
verdict = "escalate"
reason = "a person decides (rejects)"
"""


def need(cli: str | None = None, *binaries: str) -> None:
    why = missing_binaries("afr-hook", *binaries) or (installed(cli) if cli else None)
    if not Path(filesystem_mcp(Path("/")).args[0]).exists():
        why = why or "the filesystem MCP server is not installed in tests/mcp/node_modules (scripts/setup.sh)"
    if why:
        pytest.skip(why)


def setup_afr(rec: Recorder, cli: str, policy: Path, notes: dict):
    """The configure step of run_session: the real `afr setup` on the CLI's files as written."""

    def configure(paths: dict[str, Path], env: dict[str, str]) -> None:
        scope = ["--project", str(paths["project"])] if cli == "claude-code" else ["--user"]
        notes["setup"] = rec.setup(cli, *scope, "--policy", str(policy), env=env)
        notes["paths"] = paths

    return configure


def mcp_config(cli: str, paths: dict[str, Path]) -> dict:
    """The `fs` MCP server as the CLI will read it, after setup."""
    if cli == "claude-code":
        return json.loads((paths["project"] / ".mcp.json").read_text())["mcpServers"]["fs"]
    if cli == "codex":
        return tomllib.loads((paths["cli_home"] / "config.toml").read_text())["mcp_servers"]["fs"]
    return json.loads((paths["home"] / ".gemini/settings.json").read_text())["mcpServers"]["fs"]


def hook_commands(cli: str, paths: dict[str, Path]) -> list[str]:
    f = {
        "claude-code": paths["project"] / ".claude/settings.json",
        "codex": paths["cli_home"] / "hooks.json",
        "gemini": paths["home"] / ".gemini/settings.json",
    }[cli]
    hooks = json.loads(f.read_text())["hooks"]
    return [h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]]


def check_setup(cli: str, notes: dict) -> None:
    """setup wrapped the MCP server configured before it, and its hooks run afr-hook."""
    fs = mcp_config(cli, notes["paths"])
    assert fs["command"] == str(afr_bin()), (fs, notes["setup"])
    wrap = fs["args"]  # --dir D mcp wrap --policy P -- node server.js ROOT
    assert wrap[2:4] == ["mcp", "wrap"] and wrap[-1] == str(notes["paths"]["project"]), fs
    cmds = hook_commands(cli, notes["paths"])
    assert cmds and all(" hook " + cli in c and "afr-hook" in c and "--mcp-wrapped fs" in c for c in cmds), cmds


def via(e: dict) -> str:
    return ((e.get("code_provenance") or {}).get("capture") or {}).get("via", "")


def args(e: dict) -> dict:
    a = (e.get("intent") or {}).get("args")
    return a if isinstance(a, dict) else {}


def shell_events(events: list[dict], command: str) -> list[dict]:
    return [e for e in events if args(e).get("command") == command]


def summary(events: list[dict]) -> str:
    """One line per event: how it was captured, its tool, its command or arguments."""
    lines = []
    for e in events:
        what = (e.get("execution") or {}).get("command") or json.dumps((e.get("intent") or {}).get("args"))[:100]
        lines.append(f"  {via(e):18} {e.get('category', ''):10} {(e.get('intent') or {}).get('tool', ''):28} {what}")
    return "\n".join(lines)


def one(found: list[dict], what: str, everything: list[dict]) -> dict:
    assert len(found) == 1, (f"{what}: want exactly one event, got {len(found)}:\n" + json.dumps(found, indent=1)[:12000]
                             + "\nall events:\n" + summary(everything))
    return found[0]


def text(v: object) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def decide(call: dict) -> tuple[str, list[str]] | None:
    prompt = call.get("prompt") or ""
    if call.get("rule") == "approve-this-one" and APPROVED in prompt:
        return "approve", ["--as", "alice@example.test"]
    if call.get("rule") == "reject-this-one" and REJECTED in prompt:
        return "reject", ["--as", "bob@example.test", "--reason", "not this one"]
    return None


def verify_export(rec: Recorder, tmp: Path, events: int) -> dict:
    """`afr export` of the sealed log and `afr verify-export --json` of it: verified, whole."""
    out = tmp / "log.afr"
    rec.run("export", "--out", str(out))
    p = rec.run("verify-export", "--json", str(out), check=False)
    v = json.loads(p.stdout)
    assert v["outcome"] != "tampered", v
    assert (p.returncode, v["outcome"], v["events"]) == (0, "verified", events), v
    return v


# --- (a)-(h): one session per CLI ---------------------------------------------------------------


@pytest.mark.parametrize("cli", CLIS)
def test_a_session_is_recorded_call_by_call(cli: str, tmp_path: Path) -> None:
    """shell, write, edit, MCP call (through the wrapped server), failing command, denied,
    approved and rejected calls: each recorded once, with its command, effects and decisions."""
    need(cli)
    rec = Recorder.init(tmp_path / "afr")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    project = tmp_path / "session/project"
    notes: dict = {}
    script = [
        {"shell": SHELL},
        {"write": {"path": "notes.txt", "content": "alpha\nbeta\n"}},
        {"edit": {"path": "notes.txt", "old": "beta", "new": "gamma"}},
        {"mcp": {"server": "fs", "tool": "read_text_file", "args": {"path": str(project / "notes.txt")}}},
        {"shell": FAILING},
        {"shell": DENIED},
        {"shell": APPROVED},
        {"shell": REJECTED},
        {"text": "done"},
    ]
    with rec.serving(), Approver(rec, decide) as person:
        r = run_session(cli, script, workdir=tmp_path / "session", mcp={"fs": filesystem_mcp(project)},
                        project_mcp=True, configure=setup_afr(rec, cli, policy, notes), prompt=PROMPT, timeout=90)
        assert r.exit_code == 0, f"{cli} exited {r.exit_code} after {r.seconds:.1f} s:\n{r.stderr[-3000:]}"
        check_setup(cli, notes)
        assert not person.errors, person.errors
        assert sorted(v for v, _ in person.decided) == ["approve", "reject"], person.decided
        rows = rec.events()
        assert not rec.journaled(), [p.read_text() for p in rec.journaled()]
    events = [e for _, e in rows]

    # What the session did to the project.
    assert (project / "notes.txt").read_text() == "alpha\ngamma\n"
    assert not (project / "afr-denied.txt").exists(), "the denied call ran"
    assert (project / "afr-approved.txt").read_text() == "approved-output\n"
    assert not (project / "afr-rejected.txt").exists(), "the rejected call ran"

    hooked = [e for e in events if via(e) == f"hook:{cli}"]
    gateway = [e for e in events if via(e) == "mcp-gateway"]
    assert len(hooked) + len(gateway) == len(events), [via(e) for e in events]
    for e in hooked:
        assert e["code_provenance"]["capture"]["strength"] == "inline", e
        assert e["code_provenance"]["agent"] == cli, e

    # The prompt.
    prompt = one([e for e in events if e["intent"]["tool"] == "user_prompt"], "the prompt", events)
    assert prompt["intent"]["args"]["prompt"] == PROMPT
    session = prompt["lane"]
    assert all(e["lane"] == session for e in hooked), [e["lane"] for e in hooked]

    calls = [e for e in hooked if e["intent"]["tool"] != "user_prompt"]

    # (a) a shell command.
    a = one(shell_events(calls, SHELL), "(a) the shell command", events)
    assert a["intent"]["tool"] == SHELL_TOOL[cli]
    assert a["category"] == "shell"
    assert a["execution"]["command"] == SHELL
    assert "hello-from-shell" in text(a["effects"]["return_value"]), a["effects"]
    assert not a["effects"].get("error"), a["effects"]

    # (b), (c) write a file, edit it.
    path = str(project / "notes.txt")
    if cli == "codex":
        patches = [e for e in calls if e["intent"]["tool"] == "apply_patch"]
        b = one([e for e in patches if "*** Add File: notes.txt" in e["execution"]["mutation"]["patch"]], "(b) the write", events)
        c = one([e for e in patches if "*** Update File: notes.txt" in e["execution"]["mutation"]["patch"]], "(c) the edit", events)
        assert len(patches) == 2, patches
        for e in (b, c):
            assert e["execution"]["command"] == "apply_patch"
            assert e["effects"]["state_changes"] == ["applied a patch"], e["effects"]
        assert "+alpha" in b["execution"]["mutation"]["patch"]
        assert "-beta\n+gamma" in c["execution"]["mutation"]["patch"]
    else:
        b = one([e for e in calls if (e.get("execution") or {}).get("command") == f"write {path}"], "(b) the write", events)
        c = one([e for e in calls if (e.get("execution") or {}).get("command") == f"edit {path}"], "(c) the edit", events)
        assert b["effects"]["state_changes"] == [f"wrote {path}"], b["effects"]
        assert c["effects"]["state_changes"] == [f"edited {path}"], c["effects"]
        assert "+alpha" in b["execution"]["mutation"]["diff"], b["execution"]
        assert "-beta" in c["execution"]["mutation"]["diff"] and "+gamma" in c["execution"]["mutation"]["diff"], c["execution"]
    for e in (b, c):
        assert e["category"] == "file"
        assert not e["effects"].get("error"), e["effects"]

    # (d) the MCP call: once, by the gateway (the server's real answer), not by the hook.
    d = one(gateway, "(d) the MCP call", events)
    assert d["intent"]["tool"] == "read_text_file"
    assert d["intent"]["args"] == {"path": path}
    assert d["execution"]["command"] == "tools/call"
    assert d["code_provenance"]["capture"]["strength"] == "inline"
    assert "alpha\\ngamma" in text(d["effects"]["return_value"]), d["effects"]
    assert not [e for e in calls if "read_text_file" in e["intent"]["tool"]], "the hook recorded the wrapped server's call too"

    # (e) a failing command: its output, and its error where the CLI reports one.
    e_ = one(shell_events(calls, FAILING), "(e) the failing command", events)
    assert e_["execution"]["command"] == FAILING
    assert "failing-out" in text(e_["effects"]), e_["effects"]
    err = e_["effects"].get("error") or ""
    if cli == "claude-code":
        assert err.startswith("Exit code 3"), e_["effects"]
    elif cli == "gemini":
        assert err == "exit status 3", e_["effects"]
    # Codex reports no exit status to its hooks (FACTS.md): the output only.

    # (f) denied: its verdict, no execution, and the file it would have made is absent.
    f = one(shell_events(events, DENIED), "(f) the denied call", events)
    assert f["policy_evaluation"][0]["guardrail"] == "no-denied-file"
    assert f["policy_evaluation"][0]["verdict"] == "deny"
    assert f["policy_evaluation"][0]["version"] == "sha256:" + hashlib.sha256(POLICY.encode()).hexdigest()
    assert not f.get("execution"), f
    assert f["effects"].get("error"), f["effects"]

    # (g) escalated and approved: the approval and the effects.
    g = one(shell_events(events, APPROVED), "(g) the approved call", events)
    assert g["policy_evaluation"][0]["guardrail"] == "approve-this-one"
    assert g["policy_evaluation"][0]["verdict"] == "escalate"
    assert g["human_approval"]["decision"] == "approved", g["human_approval"]
    assert g["human_approval"]["approver"] == "alice@example.test"
    assert APPROVED in g["human_approval"]["prompt"]
    assert g["execution"]["command"] == APPROVED
    assert "approved-ran" in text(g["effects"]["return_value"]), g["effects"]

    # (h) escalated and rejected: no execution.
    h = one(shell_events(events, REJECTED), "(h) the rejected call", events)
    assert h["policy_evaluation"][0]["guardrail"] == "reject-this-one"
    assert h["human_approval"]["decision"] == "rejected", h["human_approval"]
    assert h["human_approval"]["approver"] == "bob@example.test"
    assert not h.get("execution"), h
    assert h["effects"].get("error"), h["effects"]

    # Nothing else, except Claude Code's ToolSearch (the lookup of the deferred MCP tool).
    known = {id(x) for x in (a, b, c, e_, f, g, h)}
    rest = [e for e in calls if id(e) not in known]
    if cli == "claude-code":
        assert [e["intent"]["tool"] for e in rest] == ["ToolSearch"], rest
    else:
        assert rest == [], rest

    # The same answers from the query language (docs/query.md).
    assert [s for s, e in rows if e is f] == [s for s, _ in rec.events('policy_evaluation[].verdict = "deny"')]
    assert len(rec.events('human_approval.decision = "approved"')) == 1
    assert len(rec.events('effects.error exists and execution.command exists')) == (0 if cli == "codex" else 1)

    rec.run("seal")
    verify_export(rec, tmp_path, len(rows))


# --- a CLI killed mid-call ---------------------------------------------------------------------


@pytest.mark.parametrize("cli", CLIS)
def test_a_cli_killed_mid_call_is_recovered_as_outcome_unknown(cli: str, tmp_path: Path) -> None:
    need(cli)
    rec = Recorder.init(tmp_path / "afr")
    # A command line no other process has; not a standalone sleep, which Claude Code 2.1.332
    # refuses before any hook runs ("Blocked: standalone sleep").
    sleep = "sleep 47.25"
    command = f"echo long-call-started; {sleep}; echo long-call-finished"
    notes: dict = {}
    result: dict = {}
    with rec.serving():
        t = threading.Thread(target=lambda: result.update(r=run_session(
            cli, [{"shell": command}, {"text": "done"}], workdir=tmp_path / "session", prompt=PROMPT,
            configure=setup_afr(rec, cli, tmp_path / "policy.toml", notes), timeout=60)), daemon=True)
        (tmp_path / "policy.toml").write_text('default = "allow"\n')
        t.start()
        journaled = wait_for("the call's journal entry", rec.journaled, timeout=45)
        sleepers = wait_for("the sleep command", lambda: [p for p, c in processes() if c.endswith(sleep)], timeout=30)
        agent = int(journaled[0].name.split(".")[0])
        os.killpg(os.getpgid(agent), signal.SIGKILL)
        t.join(timeout=30)
        for p in sleepers:  # the tool's process, in a group of its own under some CLIs
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert "r" in result, "run_session did not come back after the kill"
        # Gone, not only dead: Codex's and Gemini CLI's agent process (the native binary, the
        # relaunched node) is a grandchild, a zombie until init reaps it, and AFR takes a zombie
        # for a live agent (test_a_killed_agent_not_yet_reaped_is_an_orphan).
        wait_for("the agent's exit", lambda: not Path(f"/proc/{agent}").exists(), timeout=10)
        rec.run("recover")
        rows = rec.events()
        assert not rec.journaled(), "the orphan is still in the journal"
    events = [e for _, e in rows]
    k = one(shell_events(events, command), "the killed call", events)
    assert k["execution"]["command"] == command
    assert k["effects"]["error"].startswith("outcome unknown"), k["effects"]
    assert f"pid {agent}" in k["effects"]["error"], k["effects"]
    assert via(k) == f"hook:{cli}"


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan nobody reaps stays one in a container)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


# --- hooks and OTLP logs together --------------------------------------------------------------


@pytest.fixture
def otlp_receiver(request, tmp_path: Path):
    """A fresh store, `afr serve` on it, and `afr otlp` on a free port (HTTP only); skipped when
    the receiver takes no logs (POST /v1/logs answered 404)."""
    need(request.node.callspec.params.get("cli"))
    rec = Recorder.init(tmp_path / "afr")
    with rec.serving():
        port = free_port()
        log = open(tmp_path / "otlp.log", "ab")
        p = subprocess.Popen([str(rec.afr), "--dir", str(rec.dir), "otlp", "--http", f"127.0.0.1:{port}", "--no-grpc",
                              "--hold-ms", "500"], stdout=log, stderr=log)
        try:
            url = f"http://127.0.0.1:{port}"

            def answer() -> int | None:
                req = urllib.request.Request(url + "/v1/logs", b'{"resourceLogs":[]}', {"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=5) as r:
                        return r.status
                except urllib.error.HTTPError as e:
                    return e.code
                except OSError:
                    assert p.poll() is None, (tmp_path / "otlp.log").read_text()
                    return None

            status = wait_for("afr otlp", answer, timeout=30)
            if status == 404:
                pytest.skip("afr otlp answers POST /v1/logs with 404: this build receives no OTLP logs")
            assert status == 200, status
            yield rec, url, p
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
            log.close()


# The log record of a finished tool call, by CLI (FACTS.md "OTel logs").
def tool_records(cli: str, posts: list[dict]) -> list[dict]:
    from otlp_sink import attrs, log_records

    names = {"claude-code": "tool_result", "codex": "codex.tool_result", "gemini": "gemini_cli.tool_call"}
    return [a for a in (attrs(r["record"].get("attributes")) for r in log_records(posts)) if a.get("event.name") == names[cli]]


@pytest.mark.parametrize("cli", CLIS)
def test_hooks_and_otlp_logs_record_each_call_once(cli: str, tmp_path: Path, otlp_receiver) -> None:
    rec, url, otlp = otlp_receiver
    relay = OtlpRelay(url)
    policy = tmp_path / "policy.toml"
    policy.write_text('default = "allow"\n')
    project = tmp_path / "session/project"
    notes: dict = {}
    script = [
        {"shell": SHELL},
        {"write": {"path": "notes.txt", "content": "alpha\nbeta\n"}},
        {"mcp": {"server": "fs", "tool": "read_text_file", "args": {"path": str(project / "notes.txt")}}},
        {"shell": FAILING},
        {"text": "done"},
    ]
    try:
        r = run_session(cli, script, workdir=tmp_path / "session", mcp={"fs": filesystem_mcp(project)}, project_mcp=True,
                        otlp=relay.endpoint, configure=setup_afr(rec, cli, policy, notes), prompt=PROMPT, timeout=90)
        assert r.exit_code == 0, f"{cli} exited {r.exit_code}:\n{r.stderr[-3000:]}"
        # The CLIs export logs in the background: wait for the tool records to have arrived.
        # Claude Code: 4 calls and its ToolSearch; Codex: 4 and its tool_search; Gemini CLI: 4.
        want = 4 if cli == "gemini" else 5
        wait_for(f"the CLI's {want} tool log records", lambda: len(tool_records(cli, relay.posts)) >= want, timeout=15)
        time.sleep(0.5)
    finally:
        relay.stop()
    logs = [p for p in relay.posts if p["path"] == "/v1/logs"]
    assert logs and all(p["status"] == 200 for p in logs), [(p["path"], p["status"], p["answer"]) for p in logs]
    otlp.send_signal(signal.SIGTERM)  # flush anything held
    otlp.wait(timeout=20)
    events = [e for _, e in rec.events()]
    for cmd in (SHELL, FAILING):
        one(shell_events(events, cmd), f"the shell command {cmd!r}", events)
    writes = [e for e in events if e["intent"]["tool"] in ("Write", "apply_patch", "write_file")]
    one(writes, "the write", events)
    one([e for e in events if e["intent"]["tool"] == "user_prompt"], "the prompt", events)
    # What the receiver recorded itself is a call the hooks never see (Codex's tool_search),
    # never a second copy of one they saw.
    hooked = {e["intent"]["tool"] for e in events if via(e).startswith("hook:")}
    for e in events:
        if via(e).startswith("otlp"):
            assert e["intent"]["tool"] not in hooked, e
    # The wrapped server's call: once, by the gateway (the hooks leave it to it, and so must the
    # receiver: the CLI logs it as one of its tool calls).
    mcp = one([e for e in events if "read_text_file" in e["intent"]["tool"]], "the MCP call", events)
    assert via(mcp) == "mcp-gateway", mcp


# --- the paper's scenario ----------------------------------------------------------------------

DROP = "psql -h prod-db -c 'DROP SCHEMA analytics CASCADE'"
ANVIL_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"  # anvil's first dev account


def rpc(url: str, method: str, params: list | None = None):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())["result"]


def test_the_papers_scenario_drop_schema_approved_anchored_disclosed_verified(tmp_path: Path) -> None:
    """Claude Code runs `psql … DROP SCHEMA` through Bash under an escalate rule; a person
    approves it with `afr approve`; the log is anchored on a local anvil; the event is disclosed
    and `afr-verify` says verified, showing the approval."""
    need("claude-code", "afr-verify")
    anvil_bin = ROOT / ".tools/bin/anvil"
    if not anvil_bin.exists():
        pytest.skip(f"{anvil_bin} is not installed (scripts/setup.sh)")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "psql").write_text("#!/bin/sh\necho 'DROP SCHEMA'\n")
    (fake / "psql").chmod(0o755)
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\nid = "prod-sql-needs-a-human"\ntool = "Bash"\nargs = { command = "psql*" }\n'
        'verdict = "escalate"\nreason = "schema changes in production need a person"\n'
    )
    port = free_port()
    anvil = subprocess.Popen([str(anvil_bin), "--port", str(port), "--silent"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        rec = Recorder.init(tmp_path / "afr", env={"AFR_ANCHOR_KEY": ANVIL_KEY})
        notes: dict = {}

        def dba(call: dict):
            if call.get("rule") == "prod-sql-needs-a-human" and DROP in (call.get("prompt") or ""):
                return "approve", ["--as", "dba@acme.example"]
            return None

        with rec.serving(), Approver(rec, dba) as person:
            r = run_session("claude-code", [{"shell": DROP}, {"text": "done"}], workdir=tmp_path / "session",
                            configure=setup_afr(rec, "claude-code", policy, notes), prompt="Drop the analytics schema on prod.",
                            env={"PATH": f"{fake}:{os.environ.get('PATH', '/usr/bin:/bin')}"}, timeout=90)
            assert r.exit_code == 0, r.stderr[-3000:]
            assert [v for v, _ in person.decided] == ["approve"], (person.decided, person.errors)
        rows = rec.events('execution.command ~ "DROP SCHEMA"')
        assert len(rows) == 1, rows
        seq, ev = rows[0]
        assert ev["execution"]["command"] == DROP
        assert ev["policy_evaluation"][0]["verdict"] == "escalate"
        assert ev["human_approval"]["decision"] == "approved"
        assert ev["effects"]["return_value"]["stdout"] == "DROP SCHEMA", ev["effects"]

        rec.run("seal")
        wait_for("anvil", lambda: _try(lambda: rpc(url, "eth_chainId")), timeout=15)
        contract = rec.json("deploy", "--rpc", url, "--json")["contract"]
        rec.run("anchor", "--rpc", url, "--contract", contract)
        recorder = rec.json("status", "--json")["recorder"]
        bundle = tmp_path / "drop.bundle"
        rec.run("disclose", "--seq", str(seq), "--with-keys", "--out", str(bundle))
        verify = [str(afr_bin().with_name("afr-verify")), "bundle", str(bundle), "--rpc", url, "--chain-id", "31337",
                  "--recorder", recorder, "--contract", contract]
        p = subprocess.run([*verify, "--json"], capture_output=True, timeout=60)
        v = json.loads(p.stdout)
        assert (p.returncode, v["outcome"]) == (0, "verified"), v
        approvals = [a for a in v["approvals"] if a["seq"] == seq]
        assert len(approvals) == 1, v["approvals"]
        assert approvals[0]["approver"] == "dba@acme.example" and approvals[0]["decision"] == "approved", approvals
        shown = subprocess.run(verify, capture_output=True, timeout=60).stdout.decode()
        assert "VERIFIED" in shown.upper() and f"approval at event {seq}" in shown, shown
    finally:
        anvil.terminate()
        anvil.wait(timeout=10)


def _try(f):
    try:
        return f()
    except OSError:
        return None


def test_a_killed_agent_not_yet_reaped_is_an_orphan(tmp_path: Path) -> None:
    """An agent killed mid-call whose parent has not reaped it yet (a zombie: it has exited) left
    its call behind as surely as one that is gone: `afr recover` records it. A stand-in agent
    (no CLI needed): a process that runs its pre-tool hook through afr-hook, then waits."""
    need(None)
    rec = Recorder.init(tmp_path / "afr")
    pre = {"session_id": "zombie-1", "transcript_path": "/t.jsonl", "cwd": str(tmp_path), "permission_mode": "default",
           "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "sleep 600"},
           "tool_use_id": "toolu_zombie"}
    code = (f"import subprocess, time\n"
            f"p = subprocess.run([{str(afr_bin().with_name('afr-hook'))!r}, '--dir', {str(rec.dir)!r}, 'hook', 'claude-code'],"
            f" input={json.dumps(pre)!r}.encode())\n"
            f"print(p.returncode, flush=True)\n"
            f"time.sleep(600)\n")
    agent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert agent.stdout.readline().strip() == b"0", "the pre-tool hook allowed the call"
        assert len(rec.journaled()) == 1
        agent.kill()
        wait_for("the agent to be a zombie", lambda: not alive(agent.pid), timeout=10)
        rec.run("recover")
        left = rec.journaled()
    finally:
        agent.kill()
        agent.wait()
    assert not left, "afr recover took the killed agent (pid %d, a zombie) for a live one" % agent.pid
    k = one(shell_events([e for _, e in rec.events()], "sleep 600"), "the killed call", [])
    assert k["effects"]["error"].startswith("outcome unknown"), k["effects"]
