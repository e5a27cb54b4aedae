#!/usr/bin/env python3
"""A small MCP server on the PyPI `mcp` SDK (2.3.0), a peer for the gateway's tests.

  py_server.py stdio
  py_server.py http [--port N] [--stateless]
        Streamable HTTP at http://127.0.0.1:N/mcp; N=0 (default) picks a free port. Prints
        "listening on http://127.0.0.1:<port>/mcp" on stderr when ready. Only Host 127.0.0.1:*,
        localhost:* or [::1]:* is accepted (the SDK's DNS-rebinding guard).

It answers both protocol generations: 2026-07-28 (server/discover, `_meta` on every request,
no session) and 2025-11-25 (initialize). Tools:
  echo(message)          returns the message as text
  delete_record(id)      annotated destructiveHint=true
  confirm_delete(id)     asks the client "Delete record <id>?" with a form {approve: boolean};
                         2025-11-25: a server->client `elicitation/create` request mid-call;
                         2026-07-28: an `input_required` result, then the client's retry
                         carrying `inputResponses` and `requestState`.
Resource: memo://one (text). Logs go to stderr only.
"""

import argparse
import sys
from typing import Annotated

import anyio

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("afr-py-server", version="0.1.0", log_level="WARNING")


@server.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return message


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_record(id: str) -> str:
    """Delete a record (pretend): destructive, no confirmation."""
    return f"deleted record {id}"


class Approval(BaseModel):
    """The form the client fills in: one boolean."""

    approve: bool


def ask_approval(id: str) -> Elicit[Approval]:
    """Resolver: the SDK turns this into elicitation/create or input_required, per generation."""
    return Elicit(f"Delete record {id}?", Approval)


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def confirm_delete(id: str, answer: Annotated[ElicitationResult[Approval], Resolve(ask_approval)]) -> str:
    """Delete a record after the user approves it (asks the client through elicitation)."""
    if answer.action == "accept" and answer.data.approve:
        return f"deleted record {id} (approved)"
    return f"kept record {id} ({answer.action})"


@server.resource("memo://one", name="memo-one", mime_type="text/plain")
def memo_one() -> str:
    """A fixed memo."""
    return "first memo"


async def serve_http(port: int, stateless: bool, tls: list[str] | None = None) -> None:
    """Streamable HTTP at /mcp on 127.0.0.1:port (0 = any free port); prints
    "listening on http://127.0.0.1:<port>/mcp" on stderr once it accepts connections."""
    import uvicorn

    # 2026-07-28 requests are always served sessionless (one POST in, one response out, no
    # Mcp-Session-Id), whatever `stateless` says. It only concerns 2025-11-25 clients: by default
    # they get an Mcp-Session-Id and a back-channel, so elicitation/create can reach them; with
    # stateless each of their POSTs stands alone and confirm_delete fails ("no back-channel").
    app = server.streamable_http_app(stateless_http=stateless)
    ssl = {"ssl_certfile": tls[0], "ssl_keyfile": tls[1]} if tls else {}
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **ssl))

    async def announce() -> None:
        while not web.started:
            await anyio.sleep(0.02)
        bound = web.servers[0].sockets[0].getsockname()[1]
        scheme = "https" if tls else "http"
        print(f"listening on {scheme}://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await web.serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0, help="http: port on 127.0.0.1, 0 = any free one")
    parser.add_argument("--stateless", action="store_true",
                        help="http: no 2025-11-25 sessions either (then no elicitation for 2025-11-25)")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"),
                        help="http: serve https with this certificate chain and key (PEM)")
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        anyio.run(serve_http, args.port, args.stateless, args.tls)


if __name__ == "__main__":
    main()
