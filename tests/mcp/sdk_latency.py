"""Latency of sequential tools/call echo through the real Python MCP SDK client (for `afr bench
mcp --sdk`): one or more stdio server commands, after `--` and separated by `---`, all started
at once; after a warm-up on each, N calls per command, made one at a time and interleaved in
blocks (block 1 on the first command, block 1 on the second, ..., block 2 on the first, ...),
so that every side sees the same machine. Each call is timed in this process from the SDK call to its result.
Prints one JSON object: {"block", "sides": [{"calls", "median_us", "p99_us"}, ...]}, in the
order of the commands.

    python sdk_latency.py --calls 500 --warmup 50 [--block 25] -- CMD ARGS... [--- CMD ARGS...]
"""

import argparse
import json
import os
import sys
import time
from contextlib import AsyncExitStack

import anyio
from mcp import Client, StdioServerParameters  # type: ignore[attr-defined]


def percentile(sorted_us: list[float], q: float) -> float:
    if not sorted_us:
        return 0.0
    i = min(len(sorted_us) - 1, max(0, round(q * (len(sorted_us) - 1))))
    return sorted_us[i]


async def call(client: Client, message: str) -> None:
    r = await client.call_tool("echo", {"message": message})
    text = r.content[0].text if r.content else None
    if text != f"Echo: {message}":
        raise SystemExit(f"call {message}: unexpected answer {text!r}")


async def run(args: argparse.Namespace) -> dict:
    async with AsyncExitStack() as stack:
        clients = []
        for command in args.commands:
            server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
            clients.append(await stack.enter_async_context(Client(server, mode="legacy", cache=None)))
        for client in clients:
            for i in range(args.warmup):
                await call(client, f"w{i}")
        us: list[list[float]] = [[] for _ in clients]
        done = 0
        while done < args.calls:
            n = min(args.block, args.calls - done)
            for side, client in enumerate(clients):
                for i in range(done, done + n):
                    t = time.perf_counter()
                    await call(client, f"m{i}")
                    us[side].append((time.perf_counter() - t) * 1e6)
            done += n
    sides = []
    for s in us:
        s.sort()
        sides.append({"calls": len(s), "median_us": round(percentile(s, 0.5), 1), "p99_us": round(percentile(s, 0.99), 1)})
    return {"block": args.block, "sides": sides}


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit("usage: sdk_latency.py [--calls N] [--warmup N] [--block N] -- CMD ARGS... [--- CMD ARGS...]")
    cut = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--block", type=int, default=25)
    args = p.parse_args(argv[:cut])
    args.commands = [[]]
    for a in argv[cut + 1:]:
        if a == "---":
            args.commands.append([])
        else:
            args.commands[-1].append(a)
    if any(not c for c in args.commands):
        raise SystemExit("sdk_latency.py: an empty server command")
    print(json.dumps(anyio.run(run, args)))


if __name__ == "__main__":
    main()