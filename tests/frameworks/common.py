"""What every framework script here shares: the OTel SDK tracer provider exporting to the receiver,
the command line, and the one JSON line a script prints.

    tp = provider(args, "afr-langgraph")        # BatchSpanProcessor -> OTLP/HTTP protobuf exporter
    ...                                         # instrument the framework with tp, run it
    finish(args, tp, {"calls": [...]})          # flush, shut down, print {"ok", "exports", ...}

``--dump FILE`` also writes every span the run made, as one OTLP/JSON ExportTraceServiceRequest
(the encoding of tests/otlp/otlp_export.py): the Rust unit tests' fixtures
(otlp/tests/data/frameworks/) were written this way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "otlp"))

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from otlp_export import CountingExporter, http_traces_url, otlp_json  # noqa: E402


class Collect(SpanExporter):
    """Keeps every span (for --dump)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans):  # type: ignore[no-untyped-def]
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def parser(doc: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", required=True, help="OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318")
    p.add_argument("--dump", default=None, help="also write every span as one OTLP/JSON request here")
    p.add_argument("--session", default=None, help="the session id to send, where the framework takes one")
    return p


def provider(args: argparse.Namespace, service: str) -> TracerProvider:
    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    args._exporter = CountingExporter(OTLPSpanExporter(endpoint=http_traces_url(args.endpoint)))
    tp.add_span_processor(BatchSpanProcessor(args._exporter))
    args._collect = Collect()
    if args.dump:
        tp.add_span_processor(SimpleSpanProcessor(args._collect))
    return tp


def finish(args: argparse.Namespace, tp: TracerProvider, report: dict[str, Any]) -> int:
    tp.force_flush()
    tp.shutdown()
    if args.dump:
        with open(args.dump, "wb") as f:
            f.write(otlp_json(args._collect.spans))
    ok = args._exporter.all_ok
    print(json.dumps({"ok": ok, "exports": args._exporter.exports, "traces": args._exporter.trace_ids(), **report},
                     default=str))
    return 0 if ok else 1
