"""A scripted OpenAI-compatible model on 127.0.0.1: the frameworks' real model clients talk to it,
and it answers with the tool calls of a fixed script, then a final answer. Standard library only.

    with serving({"triage": [{"tool": "transfer_to_billing", "args": {}}],
                  "billing": [{"tool": "refund", "args": {"order": "A-1"}}, {"text": "done"}]}) as url:
        ...  # point the framework's OpenAI client at url (".../v1")

A script maps an agent's key to its turns. A request belongs to the first key that occurs in its
system (or developer) messages, else to the key "default"; each key answers its turns in order,
one per request (a counter per key: the frameworks here make no retries against a model that
answers). A turn is ``{"tool": name, "args": {...}}`` (one tool call), ``{"calls": [turn, ...]}``
(several in one answer) or ``{"text": "..."}``; past the last turn a key answers its last text
turn again (or "done").

API spoken: ``POST /v1/chat/completions`` (JSON, or server-sent events when ``stream`` is true),
``GET /v1/models``. Every request body is kept in ``requests`` for the tests to read.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

MODEL = "scripted-model"


class Script:
    def __init__(self, turns: dict[str, list[dict[str, Any]]]):
        self.turns = turns
        self.next: dict[str, int] = {k: 0 for k in turns}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.calls = 0

    def key_of(self, body: dict[str, Any]) -> str:
        system = " ".join(
            m["content"] if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
            for m in body.get("messages", [])
            if m.get("role") in ("system", "developer")
        )
        for k in self.turns:
            if k != "default" and k in system:
                return k
        return "default"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for this request, from its key's next turn."""
        with self.lock:
            self.requests.append(body)
            key = self.key_of(body)
            turns = self.turns.get(key) or [{"text": "done"}]
            i = self.next.get(key, 0)
            self.next[key] = i + 1
            if i < len(turns):
                turn = turns[i]
            else:
                turn = next((t for t in reversed(turns) if "text" in t), {"text": "done"})
            calls = turn.get("calls") or ([turn] if "tool" in turn else [])
            tool_calls = []
            for c in calls:
                self.calls += 1
                tool_calls.append({
                    "id": f"call_{self.calls}",
                    "type": "function",
                    "function": {"name": c["tool"], "arguments": json.dumps(c.get("args", {}))},
                })
        if tool_calls:
            return {"role": "assistant", "content": None, "tool_calls": tool_calls}
        return {"role": "assistant", "content": turn.get("text", "done")}


def _handler(script: Script):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode())
            else:
                self._send(404, b"{}")

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, json.dumps({"error": {"message": f"not scripted: {self.path}"}}).encode())
                return
            msg = script.answer(body)
            finish = "tool_calls" if msg.get("tool_calls") else "stop"
            created = int(time.time())
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            if not body.get("stream"):
                self._send(200, json.dumps({
                    "id": f"chatcmpl-{script.calls}-{created}", "object": "chat.completion", "created": created,
                    "model": MODEL, "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                    "usage": usage,
                }).encode())
                return
            # Streaming: the whole message in one delta, then the finish and usage chunks.
            delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
            if msg.get("tool_calls"):
                delta["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(msg["tool_calls"])]
            base = {"id": f"chatcmpl-{script.calls}-{created}", "object": "chat.completion.chunk",
                    "created": created, "model": MODEL}
            chunks = [
                dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
                dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
                dict(base, choices=[], usage=usage),
            ]
            out = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
            self._send(200, out, "text/event-stream")

    return Handler


@contextmanager
def serving(turns: dict[str, list[dict[str, Any]]]) -> Iterator[tuple[str, Script]]:
    """The scripted model on a free port of 127.0.0.1 until the block ends: (base URL, script)."""
    script = Script(turns)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        server.shutdown()
        server.server_close()
