#!/usr/bin/env python3
"""A scripted model server: answers the model APIs of Claude Code, Codex and Gemini CLI on
127.0.0.1 with a fixed sequence of turns, so the CLIs run end to end offline.

Standard library only. Each turn of the script is one CLI-neutral tool call or the final text:

    {"shell": "echo hi"}
    {"write": {"path": "a.txt", "content": "hello\\n"}}
    {"edit": {"path": "a.txt", "old": "hello", "new": "bye"}}     # Codex: whole lines
    {"mcp": {"server": "fs", "tool": "read_text_file", "args": {"path": "/abs/a.txt"}}}
    {"agent": {"prompt": "...", "turns": [...]}}   # a sub-agent with its own turns
    {"text": "done"}

A script file is either a list of turns or {"turns": [...]}. Relative paths in write/edit are
joined to the project directory given with --cwd (Claude Code and Gemini CLI want absolute
paths). After the last turn every further request gets the last text turn (or "done").

The server advances one step when the result of the previous step comes back: each answer to a
main request is remembered, and a main request carrying N tool results gets step N (a retry of
an earlier request gets the same answer again). One script turn may take two steps: an MCP
call is preceded by Claude Code's ToolSearch (when the MCP tool is deferred) and by Codex's
tool_search_call. Side requests get answers that keep the CLI going without moving the script;
as configured by agents.py the only one seen is Codex's POST /v1/analytics/codex/turn-costs
(Claude Code makes none with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1, Gemini CLI none with a
fixed model); count_tokens, generateContent and the next-speaker / routing schemas are answered
in case.

A sub-agent turn calls Claude Code's Agent tool (foreground, general-purpose), Codex's
multi_agent_v1 spawn_agent then wait_agent (offered with model "gpt-5-codex", not "gpt-5.5") or
Gemini CLI's invoke_agent (generalist); its prompt opens with AFR_SUBAGENT-<turn index>, which
tells the sub-agent's own requests apart: they follow the agent's turns (Gemini CLI's sub-agent
ends with complete_task). A Codex model without those tools gets plain text for the turn.

APIs spoken:
- Anthropic Messages, streaming SSE: POST /v1/messages (Claude Code), plus count_tokens;
- OpenAI Responses, streaming SSE: POST /v1/responses (Codex);
- Gemini: POST /v1beta/models/M:streamGenerateContent?alt=sse, :generateContent,
  :countTokens (Gemini CLI).

Every request (method, path, headers of interest, JSON body) is appended to --log as JSONL.

Run: python3 model_server.py --script turns.json [--log requests.jsonl] [--cwd DIR]
     [--port-file F]; prints the port on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from otlp_sink import read_body  # noqa: E402 - the same chunked/Content-Length reader

Turn = dict[str, Any]


KINDS = ("shell", "write", "edit", "mcp", "agent", "text")
SUBAGENT_MARK = "AFR_SUBAGENT-"


def check_turns(turns: list[Turn], where: str = "turn") -> list[Turn]:
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or len(turn.keys() & set(KINDS)) != 1:
            raise ValueError(f"{where} {i}: want exactly one of {', '.join(KINDS)}: {turn!r}")
        if "agent" in turn:
            check_turns(turn["agent"].get("turns", []), f"{where} {i} agent turn")
    return turns


def load_script(path: str) -> list[Turn]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return check_turns(data["turns"] if isinstance(data, dict) else data)


def subagent_prompt(index: int, turn: Turn) -> str:
    """The prompt of the sub-agent of turn `index`; its marker tells its requests apart."""
    return f"{SUBAGENT_MARK}{index}: {turn['agent'].get('prompt', 'Run the scripted sub-task.')}"


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


@dataclass(frozen=True)
class Step:
    """One answer of the script, with the seed of its ids and its time, fixed when first given."""

    answer: Any
    seed: str
    created: int


def side_step(answer: Any) -> Step:
    return Step(answer, uuid.uuid4().hex[:24], int(time.time()))


class Script:
    """The turns, the steps answered so far, and the lock that orders them."""

    def __init__(self, turns: list[Turn], cwd: str | None) -> None:
        self.turns = turns
        self.cwd = cwd
        self.lock = threading.Lock()
        # Per API: the answers given so far, step by step (a list of "step" objects).
        self.steps: dict[str, list[Any]] = {}
        # Per API: (turn index, sub-step) of the next step to emit.
        self.cursor: dict[str, tuple[int, int]] = {}

    def path(self, p: str) -> str:
        if self.cwd and not os.path.isabs(p):
            return os.path.join(self.cwd, p)
        return p

    def conversation(self, api: str, first_user_text: str) -> tuple[str, list[Turn]]:
        """(state key, turns) of a request: the main script, or the turns of a sub-agent whose
        marker (subagent_prompt) opens the conversation."""
        m = re.search(re.escape(SUBAGENT_MARK) + r"(\d+)", first_user_text or "")
        if m:
            i = int(m.group(1))
            if i < len(self.turns) and "agent" in self.turns[i]:
                return f"{api}/agent{i}", self.turns[i]["agent"].get("turns") or [{"text": "sub-agent done"}]
        return api, self.turns

    def step(self, key: str, turns: list[Turn], n_results: int, plan) -> Any:
        """The answer for a request of conversation `key` carrying n_results tool results.

        plan(turn, sub, index) -> (answer, more): the answer for sub-step `sub` of `turn`, the
        turn at `index` (None past the end: then the last text turn), and whether the turn has
        another sub-step after it.
        """
        with self.lock:
            steps = self.steps.setdefault(key, [])
            if n_results < len(steps):
                return steps[n_results]  # a retry: the same answer, the same ids
            ti, sub = self.cursor.get(key, (0, 0))
            turn = turns[ti] if ti < len(turns) else None
            if turn is None:
                turn = next((t for t in reversed(turns) if "text" in t), {"text": "done"})
                answer, _ = plan(turn, 0, ti)
            else:
                answer, more = plan(turn, sub, ti)
                self.cursor[key] = (ti, sub + 1) if more else (ti + 1, 0)
            step = Step(answer, uuid.uuid4().hex[:24], int(time.time()))
            steps.append(step)
            return step


# --- tool name resolution from the tools a request declares ------------------------------------


def _pick(declared: list[str], *candidates: str) -> str | None:
    for c in candidates:
        if c in declared:
            return c
    return None


def _mcp_name(declared: list[str], server: str, tool: str) -> str | None:
    """The declared name of MCP tool `tool` of `server` (mcp__S__T, mcp_S_T, S__T, ...)."""
    for name in declared:
        if name.endswith(tool) and server in name and name != tool:
            return name
    return None


def _patch_add(path: str, content: str) -> str:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def _patch_update(path: str, old: str, new: str) -> str:
    minus = "".join(f"-{line}\n" for line in old.rstrip("\n").split("\n"))
    plus = "".join(f"+{line}\n" for line in new.rstrip("\n").split("\n"))
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n{minus}{plus}*** End Patch\n"


# --- Anthropic Messages (Claude Code) ----------------------------------------------------------


def anthropic_is_main(body: dict) -> bool:
    names = [t.get("name") for t in body.get("tools") or []]
    return "Bash" in names


def anthropic_n_results(body: dict) -> int:
    n = 0
    for m in body.get("messages", []):
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, list):
            n += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def anthropic_first_user_text(body: dict) -> str:
    for m in body.get("messages", []):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            return "\n".join(b.get("text", "") for b in c or [] if isinstance(b, dict) and b.get("type") == "text")
    return ""


def anthropic_plan(script: Script, body: dict):
    declared = [t.get("name") for t in body.get("tools") or []]

    def plan(turn: Turn, sub: int, index: int):
        if "text" in turn:
            return ("text", str(turn["text"])), False
        if "agent" in turn:
            return ("tool", "Agent", {
                "description": "scripted sub-agent",
                "prompt": subagent_prompt(index, turn),
                "subagent_type": turn["agent"].get("type", "general-purpose"),
                "run_in_background": False,
            }), False
        if "shell" in turn:
            return ("tool", "Bash", {"command": turn["shell"], "description": "scripted shell command"}), False
        if "write" in turn:
            w = turn["write"]
            return ("tool", "Write", {"file_path": script.path(w["path"]), "content": w["content"]}), False
        if "edit" in turn:
            e = turn["edit"]
            return (
                "tool",
                "Edit",
                {"file_path": script.path(e["path"]), "old_string": e["old"], "new_string": e["new"]},
            ), False
        m = turn["mcp"]
        name = f"mcp__{m['server']}__{m['tool']}"
        if sub == 0 and name not in declared and "ToolSearch" in declared:
            return ("tool", "ToolSearch", {"query": f"select:{name}", "max_results": 1}), True
        return ("tool", name, m.get("args", {})), False

    return plan


def anthropic_stream(model: str, step: Step) -> bytes:
    answer = step.answer
    msg_id = "msg_" + step.seed
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    out = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
    ]
    if answer[0] == "text":
        out.append(_sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
        out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": answer[1]}}))
        stop = "end_turn"
    else:
        _, name, tool_input = answer
        tool_id = "toolu_" + step.seed
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}}},
            )
        )
        out.append(
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}},
            )
        )
        stop = "tool_use"
    out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(_sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}}))
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


# --- OpenAI Responses (Codex) ------------------------------------------------------------------


OPENAI_RESULT_TYPES = {"function_call_output", "custom_tool_call_output", "tool_search_output", "mcp_tool_call_output"}


def openai_n_results(body: dict) -> int:
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    return sum(1 for it in items if isinstance(it, dict) and it.get("type") in OPENAI_RESULT_TYPES)


def openai_tool_names(body: dict) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        if t.get("name"):
            names.append(t["name"])
        for sub in t.get("tools") or []:  # namespaces
            if sub.get("name"):
                names.append(sub["name"])
    return names


def openai_first_user_text(body: dict) -> str:
    texts = []
    for it in body.get("input") or []:
        if isinstance(it, dict) and it.get("type") == "message" and it.get("role") == "user":
            c = it.get("content")
            texts += [c] if isinstance(c, str) else [p.get("text", "") for p in c or [] if isinstance(p, dict)]
    return "\n".join(texts)


def openai_last_agent_id(body: dict) -> str:
    """The agent id in the output of the last spawn_agent call (its JSON, or the first id-like word)."""
    for it in reversed(body.get("input") or []):
        if isinstance(it, dict) and it.get("type") == "function_call_output":
            out = it.get("output")
            text = out if isinstance(out, str) else json.dumps(out)
            try:
                obj = json.loads(text)
                for k in ("agent_id", "id", "target"):
                    if isinstance(obj, dict) and obj.get(k):
                        return str(obj[k])
            except ValueError:
                pass
            m = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27,}", text)
            return m.group(0) if m else text.strip()
    return ""


def openai_plan(script: Script, body: dict):
    declared = openai_tool_names(body)

    def shell_call(cmd: str):
        name = _pick(declared, "exec_command", "shell_command", "shell", "local_shell") or "shell"
        if name == "exec_command":
            args = {"cmd": cmd}
        elif name == "shell_command":
            args = {"command": cmd}
        else:
            args = {"command": ["bash", "-lc", cmd]}
        return {"type": "function_call", "name": name, "arguments": json.dumps(args)}

    def plan(turn: Turn, sub: int, index: int):
        if "agent" in turn and "spawn_agent" in declared:
            if sub == 0:
                args = {"message": subagent_prompt(index, turn)}
                return {"type": "function_call", "name": "spawn_agent", "namespace": "multi_agent_v1", "arguments": json.dumps(args)}, True
            return {"type": "function_call", "name": "wait_agent", "namespace": "multi_agent_v1",
                    "arguments": json.dumps({"targets": [openai_last_agent_id(body)], "timeout_ms": 30000})}, False
        if "text" in turn or "agent" in turn:  # no multi_agent_v1 tools: no sub-agent
            text = str(turn.get("text", "(this model has no sub-agent tools)"))
            return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}, False
        if "shell" in turn:
            return shell_call(turn["shell"]), False
        if "write" in turn:
            w = turn["write"]
            return {"type": "custom_tool_call", "name": "apply_patch", "input": _patch_add(w["path"], w["content"])}, False
        if "edit" in turn:
            e = turn["edit"]
            return {"type": "custom_tool_call", "name": "apply_patch", "input": _patch_update(e["path"], e["old"], e["new"])}, False
        m = turn["mcp"]
        if sub == 0:
            return {
                "type": "tool_search_call",
                "execution": "client",
                "status": "completed",
                "arguments": {"query": f"{m['server']} {m['tool']}", "limit": 8},
            }, True
        return {
            "type": "function_call",
            "name": m["tool"],
            "namespace": f"mcp__{m['server']}",
            "arguments": json.dumps(m.get("args", {})),
        }, False

    return plan


def openai_stream(model: str, step: Step) -> bytes:
    resp_id = "resp_" + step.seed
    item = dict(step.answer)
    item.setdefault("id", ("msg_" if item["type"] == "message" else "fc_") + step.seed)
    if item["type"] != "message":
        item.setdefault("call_id", "call_" + step.seed)
    item.setdefault("status", "completed")
    base = {"id": resp_id, "object": "response", "created_at": step.created, "model": model}
    out = [
        _sse("response.created", {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}}),
        _sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
    ]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        out.append(
            _sse(
                "response.output_text.delta",
                {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text},
            )
        )
    out.append(_sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}))
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    out.append(_sse("response.completed", {"type": "response.completed", "response": {**base, "status": "completed", "output": [item], "usage": usage}}))
    return b"".join(out)


# --- Gemini (Gemini CLI) -----------------------------------------------------------------------


def gemini_n_results(body: dict) -> int:
    n = 0
    for c in body.get("contents", []):
        for p in c.get("parts", []) or []:
            if isinstance(p, dict) and "functionResponse" in p:
                n += 1
    return n


def gemini_tool_names(body: dict) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        for fd in t.get("functionDeclarations") or []:
            names.append(fd.get("name"))
    return names


def gemini_first_user_text(body: dict) -> str:
    for c in body.get("contents", []):
        if c.get("role") == "user":
            return "\n".join(p.get("text", "") for p in c.get("parts", []) if isinstance(p, dict))
    return ""


def gemini_plan(script: Script, body: dict):
    declared = gemini_tool_names(body)

    def plan(turn: Turn, sub: int, index: int):
        if "text" in turn:
            if "complete_task" in declared:  # a sub-agent ends by calling complete_task
                return {"functionCall": {"name": "complete_task", "args": {"result": {"response": str(turn["text"])}}}}, False
            return {"text": str(turn["text"])}, False
        if "agent" in turn:
            args = {"agent_name": turn["agent"].get("type", "generalist"), "prompt": subagent_prompt(index, turn)}
            return {"functionCall": {"name": "invoke_agent", "args": args}}, False
        if "shell" in turn:
            return {"functionCall": {"name": "run_shell_command", "args": {"command": turn["shell"], "description": "scripted shell command"}}}, False
        if "write" in turn:
            w = turn["write"]
            return {"functionCall": {"name": "write_file", "args": {"file_path": script.path(w["path"]), "content": w["content"]}}}, False
        if "edit" in turn:
            e = turn["edit"]
            return {
                "functionCall": {
                    "name": "replace",
                    "args": {
                        "file_path": script.path(e["path"]),
                        "old_string": e["old"],
                        "new_string": e["new"],
                        "instruction": "scripted edit",
                    },
                }
            }, False
        m = turn["mcp"]
        name = _mcp_name(declared, m["server"], m["tool"]) or f"mcp_{m['server']}_{m['tool']}"
        return {"functionCall": {"name": name, "args": m.get("args", {})}}, False

    return plan


def gemini_chunk(model: str, step: Step) -> dict:
    return {
        "candidates": [{"content": {"role": "model", "parts": [step.answer]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": model,
        "responseId": step.seed[:20],
    }


# --- HTTP --------------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    server: "ModelServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _send(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if ctype == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(data)

    def _json(self, obj: Any, status: int = 200) -> None:
        self._send(status, "application/json", json.dumps(obj).encode())

    def do_GET(self) -> None:
        self.server.record(self, None, "GET")
        path = self.path.split("?")[0]
        if path.endswith("/models"):
            self._json({"object": "list", "data": [], "models": []})
        else:
            self._json({})

    def do_HEAD(self) -> None:
        self.server.record(self, None, "HEAD")
        self._send(200, "application/json", b"")

    def do_POST(self) -> None:
        raw = read_body(self)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw[:2000].decode("utf-8", "replace")}
        kind = self.server.dispatch(self, body)
        self.server.record(self, body, "POST", kind)


class ModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, turns: list[Turn], log_path: str | None = None, cwd: str | None = None, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.script = Script(check_turns(turns), cwd)
        self.log_path = log_path
        self.log_lock = threading.Lock()
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self) -> "ModelServer":
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def record(self, h: Handler, body: Any, method: str, kind: str = "") -> None:
        if not self.log_path:
            return
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("authorization", "x-api-key", "x-goog-api-key")}
        line = json.dumps({"t": time.time(), "method": method, "path": h.path, "kind": kind, "headers": headers, "body": body})
        with self.log_lock, open(self.log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    # Returns a short label of what the request was taken for (logged with it).
    def dispatch(self, h: Handler, body: dict) -> str:
        path = h.path.split("?")[0]
        s = self.script
        if path.endswith("/v1/messages/count_tokens"):
            h._json({"input_tokens": 100})
            return "anthropic.count_tokens"
        if path.endswith("/v1/messages"):
            model = body.get("model", "claude")
            if anthropic_is_main(body):
                key, turns = s.conversation("anthropic", anthropic_first_user_text(body))
                step = s.step(key, turns, anthropic_n_results(body), anthropic_plan(s, body))
                kind = "anthropic.main"
            else:
                step = side_step(("text", anthropic_side_text(body)))
                kind = "anthropic.side"
            if body.get("stream"):
                h._send(200, "text/event-stream", anthropic_stream(model, step))
            else:
                h._json(anthropic_message(model, step))
            return kind
        if path.endswith("/responses"):
            model = body.get("model", "gpt")
            key, turns = s.conversation("openai", openai_first_user_text(body))
            step = s.step(key, turns, openai_n_results(body), openai_plan(s, body))
            h._send(200, "text/event-stream", openai_stream(model, step))
            return "openai.main"
        if ":streamGenerateContent" in path or ":generateContent" in path:
            model = path.split("/models/")[-1].split(":")[0]
            streaming = ":streamGenerateContent" in path
            if streaming and body.get("tools"):
                key, turns = s.conversation("gemini", gemini_first_user_text(body))
                step = s.step(key, turns, gemini_n_results(body), gemini_plan(s, body))
                kind = "gemini.main"
            else:
                step = side_step({"text": gemini_side_text(body)})
                kind = "gemini.side"
            chunk = gemini_chunk(model, step)
            if streaming:
                h._send(200, "text/event-stream", f"data: {json.dumps(chunk)}\r\n\r\n".encode())
            else:
                h._json(chunk)
            return kind
        if ":countTokens" in path:
            h._json({"totalTokens": 100})
            return "gemini.count_tokens"
        # Codex posts /v1/analytics/codex/turn-costs after each turn; {} keeps it going.
        h._json({})
        return "other"


def anthropic_message(model: str, step: Step) -> dict:
    answer = step.answer
    content = [{"type": "text", "text": answer[1]}] if answer[0] == "text" else [
        {"type": "tool_use", "id": "toolu_" + step.seed, "name": answer[1], "input": answer[2]}
    ]
    return {
        "id": "msg_" + step.seed,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "end_turn" if answer[0] == "text" else "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def anthropic_side_text(body: dict) -> str:
    """A request without the Bash tool (titles, topic checks; none seen with nonessential
    traffic off): a short text."""
    return "Scripted session"


def gemini_side_text(body: dict) -> str:
    """A request without tools or not streamed (next-speaker check, routing; none seen with a
    fixed model): JSON where a schema is asked. The shapes are unmeasured guesses."""
    cfg = body.get("generationConfig") or {}
    schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema")
    if schema:
        props = (schema.get("properties") or {}).keys()
        if "next_speaker" in props:
            return json.dumps({"reasoning": "The model finished its turn.", "next_speaker": "user"})
        if "model_choice" in props:
            return json.dumps({"reasoning": "Simple task.", "model_choice": "flash"})
        return json.dumps({k: "" for k in props})
    return "Scripted session"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--script", required=True)
    ap.add_argument("--log")
    ap.add_argument("--cwd")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    a = ap.parse_args()
    srv = ModelServer(load_script(a.script), a.log, a.cwd, a.port)
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(srv.port))
        os.replace(a.port_file + ".tmp", a.port_file)
    print(srv.port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
