"""Latency of sequential tools/call echo through the real Python MCP SDK client (for `afr bench
mcp --sdk`): a stdio server command after `--`, N calls after a warm-up, each timed in this
process from the SDK call to its result. Prints one JSON object: {"calls", "median_us",
"p99_us"}.

    python sdk_latency.py --calls 500 --warmup 50 -- CMD ARGS...
"""

import argparse
import json
import os
import sys
import time

import anyio
from mcp import Client, StdioServerParameters  # type: ignore[attr-defined]


def percentile(sorted_us: list[float], q: float) -> float:
    if not sorted_us:
        return 0.0
    i = min(len(sorted_us) - 1, max(0, round(q * (len(sorted_us) - 1))))
    return sorted_us[i]


async def run(args: argparse.Namespace) -> dict:
    server = StdioServerParameters(command=args.command[0], args=args.command[1:], env=dict(os.environ))
    async with Client(server, mode="legacy", cache=None) as client:
        for i in range(args.warmup):
            await client.call_tool("echo", {"message": f"w{i}"})
        us: list[float] = []
        for i in range(args.calls):
            t = time.perf_counter()
            r = await client.call_tool("echo", {"message": f"m{i}"})
            us.append((time.perf_counter() - t) * 1e6)
            text = r.content[0].text if r.content else None
            if text != f"Echo: m{i}":
                raise SystemExit(f"call {i}: unexpected answer {text!r}")
    us.sort()
    return {"calls": len(us), "median_us": round(percentile(us, 0.5), 1), "p99_us": round(percentile(us, 0.99), 1)}


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit("usage: sdk_latency.py [--calls N] [--warmup N] -- CMD ARGS...")
    cut = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--warmup", type=int, default=50)
    args = p.parse_args(argv[:cut])
    args.command = argv[cut + 1:]
    print(json.dumps(anyio.run(run, args)))


if __name__ == "__main__":
    main()
