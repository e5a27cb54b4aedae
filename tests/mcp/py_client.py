#!/usr/bin/env python3
"""A real MCP client on the PyPI `mcp` SDK (2.3.0), driven by argv, for the gateway's tests.

  py_client.py [OPTIONS] stdio -- CMD ARGS...
  py_client.py [OPTIONS] http URL [OPTIONS]

Options:
  --protocol auto|2025-11-25|2026-07-28
        auto: the SDK sends server/discover and falls back to initialize;
        2025-11-25: initialize only; 2026-07-28: server/discover only, no fallback.
  --read-resource URI          repeatable; done before the calls
  --call TOOL JSON_ARGS        repeatable; done in order
  --elicitation none|accept|decline|cancel
        none (default): do not declare the elicitation capability;
        accept: answer with every boolean field true (plus defaults, and "afr-test" for a
        required string without one); decline: answer action "decline"; cancel: answer
        action "cancel" (a headless host, as fast-agent is).
  --header K:V                 repeatable; extra HTTP header (e.g. Authorization)
  --meta JSON                  extra `_meta` keys on every tools/call, e.g.
                               '{"traceparent": "00-<32 hex>-<16 hex>-01"}' (the SDK itself adds
                               traceparent only when an OpenTelemetry SDK tracer is active)
  --timeout SECONDS            each call's read timeout (the SDK gives up on it, as an agent
                               framework's own timeout does)

Prints ONE JSON object on stdout at the end:
  {"protocol", "server": {name, version}, "tools": [names],
   "resources": [{uri, contents, error}], "calls": [{tool, isError, content,
   structuredContent, error}], "elicitations": [{message, action}]}
Everything else (SDK logs, the server's stderr) goes to stderr. The stdio server inherits this
process's whole environment (not the SDK's default short list). A JSON-RPC error from one call
is recorded in that call's "error" and does not stop the script. Exit status 0 unless the
connection itself failed.
"""

import argparse
import json
import os
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def parse_args(argv: list[str]) -> argparse.Namespace:
    # Split at the first "--": what follows is the stdio server's command line, verbatim.
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description="MCP test client (PyPI mcp)")
    p.add_argument("transport", choices=["stdio", "http"])
    p.add_argument("url", nargs="?", help="server URL (http)")
    p.add_argument("--protocol", default="auto", choices=["auto", "2025-11-25", "2026-07-28"])
    p.add_argument("--call", nargs=2, action="append", default=[], metavar=("TOOL", "JSON_ARGS"))
    p.add_argument("--read-resource", action="append", default=[], metavar="URI")
    p.add_argument("--elicitation", default="none", choices=["none", "accept", "decline", "cancel"])
    p.add_argument("--header", action="append", default=[], metavar="K:V")
    p.add_argument("--meta", type=json.loads, default=None, metavar="JSON")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="each call's read timeout (the SDK gives up on the call after it)")
    args = p.parse_args(argv)
    args.command = command
    if args.transport == "stdio" and not command:
        p.error("stdio needs a server command after --")
    if args.transport == "http" and not args.url:
        p.error("http needs a URL")
    return args


def fill_form(schema: dict[str, Any]) -> dict[str, Any]:
    """An "accept" answer to a form: booleans true, else the field's default, else a
    placeholder for required strings (so validating servers accept it)."""
    required = set(schema.get("required", []))
    answer: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        if prop.get("type") == "boolean":
            answer[name] = True
        elif "default" in prop:
            answer[name] = prop["default"]
        elif name in required and prop.get("type") == "string":
            answer[name] = "afr-test"
    return answer


def dump(model: Any) -> Any:
    """A pydantic model (or list of them) as wire-shaped JSON (camelCase, no nulls)."""
    if isinstance(model, list):
        return [dump(m) for m in model]
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": None, "server": None, "tools": [], "resources": [],
                           "calls": [], "elicitations": []}

    async def on_elicit(_ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
        out["elicitations"].append({"message": params.message, "action": args.elicitation})
        if args.elicitation == "decline":
            return types.ElicitResult(action="decline")
        if args.elicitation == "cancel":
            # A headless host (fast-agent) declares the capability and cancels every request.
            return types.ElicitResult(action="cancel")
        schema = getattr(params, "requested_schema", None) or {}  # URL-mode requests have none
        return types.ElicitResult(action="accept", content=fill_form(schema))

    async with AsyncExitStack() as stack:
        if args.transport == "stdio":
            # Pass our whole environment on: the SDK default keeps only HOME, PATH, etc., and
            # tests set variables (MEMORY_FILE_PATH, the gateway's settings) for the child.
            server: Any = StdioServerParameters(command=args.command[0], args=args.command[1:],
                                                env=dict(os.environ))
        else:
            headers = dict(h.split(":", 1) for h in args.header)
            headers = {k.strip(): v.strip() for k, v in headers.items()}
            # Our own HTTP client only to add headers; the SDK does not close one it was given.
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)))
            server = streamable_http_client(args.url, http_client=http)
        mode = {"auto": "auto", "2025-11-25": "legacy"}.get(args.protocol, args.protocol)
        client = Client(
            server,
            mode=mode,
            client_info=types.Implementation(name="afr-py-client", version="0.1.0"),
            elicitation_callback=None if args.elicitation == "none" else on_elicit,
            cache=None,  # every list/read goes to the wire, so a gateway sees it
        )
        if mode == "2026-07-28":
            # A version pin alone adopts without any request; send server/discover ourselves
            # (like auto does) so the server's answer, and its serverInfo, are real.
            await stack.enter_async_context(client)
            client.session.adopt(types.DiscoverResult.model_validate(
                await client.session.send_discover("2026-07-28")))
        else:
            await stack.enter_async_context(client)

        out["protocol"] = client.protocol_version
        if client.server_info is not None:
            out["server"] = {"name": client.server_info.name, "version": client.server_info.version}

        cursor = None
        while True:  # all pages
            listing = await client.list_tools(cursor=cursor)
            out["tools"] += [t.name for t in listing.tools]
            if not (cursor := listing.next_cursor):
                break

        for uri in args.read_resource:
            entry: dict[str, Any] = {"uri": uri, "contents": None, "error": None}
            try:
                entry["contents"] = dump((await client.read_resource(uri)).contents)
            except MCPError as e:
                entry["error"] = e.error.message
            out["resources"].append(entry)

        for tool, raw in args.call:
            call: dict[str, Any] = {"tool": tool, "isError": None, "content": None,
                                    "structuredContent": None, "error": None}
            try:
                result = await client.call_tool(tool, json.loads(raw), meta=args.meta,
                                                read_timeout_seconds=args.timeout)
                call.update(isError=result.is_error, content=dump(result.content),
                            structuredContent=result.structured_content)
            except MCPError as e:  # a JSON-RPC error response
                call["error"] = e.error.message
            except Exception as e:  # e.g. a result that fails validation
                call["error"] = f"{type(e).__name__}: {e}"
            out["calls"].append(call)
    return out


def describe(e: BaseException) -> str:
    """The innermost error of an (anyio) exception group, as "Type: message"."""
    while getattr(e, "exceptions", None):  # ExceptionGroup (duck-typed: Python 3.10 has none)
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"


def main() -> int:
    args = parse_args(sys.argv[1:])
    try:
        out = anyio.run(run, args)
    except BaseException as e:  # connection-level failure: still one JSON object
        if isinstance(e, KeyboardInterrupt):
            raise
        print(json.dumps({"error": describe(e)}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
