#!/usr/bin/env python3
"""The per-call cost of recording from Python, every way, side by side in one run.

One process, one workload (``afr gen --seed 42``: the events ``afr bench record`` records),
one machine, one after the other:

- ``Client.record``: one POST per event, answered once the event is durable;
- ``Recorder.submit``: the call alone (encode and enqueue), then one ``flush()`` for all;
  and ``submit(...).wait()`` per event, durable before the next;
- the same with ``AsyncRecorder``;
- witness-log 0.6.1's in-process ``step()`` (its journal, no fsync: its default), then one
  ``log.sync()``, and ``step(sync=True)`` (fsync per call; ``--fsync-events``, 1000, of the
  events), each call
  given the same event (a decorated tool per tool name, called with the event: two leaves,
  the intent and the result, as witness-log records a step);
- ``afr bench record --durability group --threads 1``: the Rust recorder in-process.

The AFR rows talk to a real ``afr serve`` (``--durability group``, the default) started here
on a fresh recorder directory. Per-call figures are medians and P99 of each call's wall
time; "events/s" is the events over the whole loop (with the final flush).

witness-log is not a dependency of afr_client: install it beside it, in a throwaway venv::

    python3 -m venv /tmp/benchvenv
    /tmp/benchvenv/bin/pip install -r clients/python/bench-requirements.txt ./clients/python
    /tmp/benchvenv/bin/python clients/python/bench.py --afr target/release/afr

Without witness-log its rows are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from afr_client import AsyncRecorder, Client, Recorder  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def percentile(sorted_us: List[float], p: float) -> float:
    """Nearest rank, as ``afr bench``: index ``round((n - 1) * p)``."""
    if not sorted_us:
        return 0.0
    return sorted_us[min(len(sorted_us) - 1, round((len(sorted_us) - 1) * p))]


class Row:
    def __init__(self, name: str, lat_ns: List[int], wall_s: float, durable: str) -> None:
        lat = sorted(x / 1000 for x in lat_ns)
        self.name = name
        self.median = percentile(lat, 0.5)
        self.p99 = percentile(lat, 0.99)
        self.eps = len(lat_ns) / wall_s if wall_s > 0 else 0.0
        self.durable = durable

    def as_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "median_us": round(self.median, 2), "p99_us": round(self.p99, 2),
                "events_per_s": round(self.eps), "durable": self.durable}


def timed(
    events: List[Dict[str, Any]], call: Callable[[Dict[str, Any]], Any]
) -> Tuple[List[int], float]:
    """Each call's wall time (ns) and the whole loop's (s)."""
    lat = []
    clock = time.perf_counter_ns
    t0 = time.perf_counter()
    for ev in events:
        a = clock()
        call(ev)
        lat.append(clock() - a)
    return lat, time.perf_counter() - t0


def find_afr(arg: Optional[str]) -> Path:
    for candidate in (arg, os.environ.get("AFR_BIN"), ROOT / "target" / "release" / "afr",
                      ROOT / "target" / "debug" / "afr"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    sys.exit("bench: no afr binary: pass --afr PATH or set AFR_BIN "
             "(cargo build --release -p afr-cli -p afr-eval)")


def start_server(afr: Path, d: Path) -> "subprocess.Popen[bytes]":
    subprocess.run([str(afr), "--dir", str(d), "init"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = subprocess.Popen([str(afr), "--dir", str(d), "serve"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    if not line.startswith("afr serve: listening on "):
        proc.kill()
        sys.exit(f"bench: afr serve did not start: {line}")
    return proc


def bench_afr(afr: Path, warm: List[Dict[str, Any]], events: List[Dict[str, Any]],
              tmp: Path) -> List[Row]:
    rows = []
    proc = start_server(afr, tmp / "afr")
    sock = str(tmp / "afr" / "afr.sock")
    try:
        c = Client(sock)
        for ev in warm:
            c.record(ev)
        lat, wall = timed(events, c.record)
        rows.append(Row("Client.record (one POST per call)", lat, wall, "at return"))
        c.close()

        with Recorder(sock) as r:
            for ev in warm:
                r.submit(ev)
            r.flush()
            t0 = time.perf_counter()
            lat, _ = timed(events, r.submit)
            r.flush()
            wall = time.perf_counter() - t0
            rows.append(Row("Recorder.submit, then one flush()", lat, wall, "at flush()"))
            lat, wall = timed(events, lambda ev: r.submit(ev).wait())
            rows.append(Row("Recorder.submit(...).wait() per call", lat, wall, "at return"))

        async def run_async() -> None:
            async with AsyncRecorder(sock) as ar:
                for ev in warm:
                    await ar.submit(ev)
                await ar.flush()
                clock = time.perf_counter_ns
                lat = []
                t0 = time.perf_counter()
                for ev in events:
                    a = clock()
                    await ar.submit(ev)
                    lat.append(clock() - a)
                await ar.flush()
                wall = time.perf_counter() - t0
                rows.append(Row("AsyncRecorder.submit, then one flush()", lat, wall, "at flush()"))
                lat = []
                t0 = time.perf_counter()
                for ev in events:
                    a = clock()
                    await (await ar.submit(ev))
                    lat.append(clock() - a)
                wall = time.perf_counter() - t0
                rows.append(Row("await (await AsyncRecorder.submit(...))", lat, wall, "at return"))

        asyncio.run(run_async())
    finally:
        proc.terminate()
        proc.wait(60)
    return rows


def effects(event: Dict[str, Any]) -> Any:
    """The tool witness-log's step() wraps: it returns the event's effects (its result)."""
    return event.get("effects")


def bench_witness_log(warm: List[Dict[str, Any]], events: List[Dict[str, Any]],
                      fsync_events: int, tmp: Path) -> List[Row]:
    try:
        import witness_log  # type: ignore[import-not-found]
    except ImportError:
        print("bench: witness-log is not installed: its rows are skipped "
              "(pip install -r clients/python/bench-requirements.txt)", file=sys.stderr)
        return []
    rows = []
    for sync in (False, True):
        log = witness_log.open(str(tmp / f"witness-{int(sync)}.jsonl"))
        steps: Dict[str, Callable[[Dict[str, Any]], Any]] = {}

        def call(ev: Dict[str, Any]) -> Any:
            tool = ev["intent"]["tool"]
            fn = steps.get(tool)
            if fn is None:
                # One decorated tool per tool name, as an agent decorates its tools once.
                fn = steps[tool] = witness_log.step(log, name=tool, sync=sync)(effects)
            return fn(ev)

        for ev in warm:
            call(ev)
        log.sync()
        version = witness_log.__version__
        if sync:
            lat, wall = timed(events[:fsync_events], call)
            rows.append(Row(f"witness-log {version} step(sync=True)", lat, wall,
                            "at return (fsync)"))
        else:
            t0 = time.perf_counter()
            lat, _ = timed(events, call)
            log.sync()  # its checkpoint: the journal's fsync
            wall = time.perf_counter() - t0
            rows.append(Row(f"witness-log {version} step(), then one log.sync()", lat, wall,
                            "at log.sync()"))
        log.close()
    return rows


def bench_rust(afr: Path, n: int) -> Optional[Dict[str, Any]]:
    out = subprocess.run(
        [str(afr), "bench", "record", "--durability", "group", "--threads", "1",
         "--events", str(n), "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    doc: Dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--afr", help="the afr binary (default: $AFR_BIN, target/release/afr, "
                    "target/debug/afr)")
    ap.add_argument("--events", type=int, default=5000, help="events per row (default 5000)")
    ap.add_argument("--warmup", type=int, default=200, help="calls before each row's measure")
    ap.add_argument("--fsync-events", type=int, default=1000,
                    help="events of witness-log's step(sync=True) row (an fsync each; 1000)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = ap.parse_args()
    afr = find_afr(a.afr)
    gen = subprocess.run([str(afr), "gen", "--events", str(a.events + a.warmup), "--seed", "42"],
                         check=True, capture_output=True).stdout
    workload = [json.loads(line) for line in gen.splitlines()]
    warm, events = workload[: a.warmup], workload[a.warmup:]
    tmp = Path(tempfile.mkdtemp(prefix="afr-bench-"))
    try:
        rows = bench_afr(afr, warm, events, tmp)
        rows += bench_witness_log(warm, events, a.fsync_events, tmp)
        rust = bench_rust(afr, a.events)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps({"events": a.events, "afr": str(afr), "rows": [r.as_dict() for r in rows],
                          "afr_bench_record": rust}))
        return
    size = sum(len(json.dumps(e, separators=(",", ":"))) for e in events) / len(events)
    print(f"python bench: {a.events} events per row (afr gen --seed 42, {size:.0f} bytes of JSON "
          f"each; {min(a.fsync_events, a.events)} for step(sync=True)), Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cores, {afr}")
    print(f"{'':48} {'median µs':>10} {'P99 µs':>10} {'events/s':>10}  durable")
    for r in rows:
        print(f"{r.name:48} {r.median:>10.2f} {r.p99:>10.2f} {r.eps:>10.0f}  {r.durable}")
    if rust:
        print(f"{'afr bench record --durability group --threads 1':48} {rust['median_us']:>10.2f} "
              f"{rust['p99_us']:>10.2f} {rust['events_per_s']:>10.0f}  at receipt "
              f"(windows of 256: latency is submit to synced write)")


if __name__ == "__main__":
    main()
