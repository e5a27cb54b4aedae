"""Shared exporter plumbing for emit_agent.py and emit_raw.py (the AFR OTLP receiver's Python peers).

Builds a real OpenTelemetry SDK span exporter for one of the three OTLP transports:

- ``http/protobuf``: ``opentelemetry-exporter-otlp-proto-http`` as shipped.
- ``grpc``: ``opentelemetry-exporter-otlp-proto-grpc`` as shipped.
- ``http/json``: the Python SDK has no OTLP/JSON exporter (1.45.x ships only the protobuf ones), so
  this is the shipped HTTP exporter (same HTTP client, retries, Retry-After, gzip) with the body
  re-encoded as OTLP/JSON per the OTLP specification: lowerCamelCase field names, trace and span
  ids as hex strings, enums as integers, 64-bit integers as decimal strings (the proto3 JSON
  mapping), ``bytesValue`` as base64. ``--json-ids base64`` sends ids the proto3-JSON way instead
  (not valid OTLP/JSON; for negative tests).

Every export is counted (``CountingExporter``) so the scripts can report what was sent and exit
non-zero when an export failed.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from urllib.parse import urlparse

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

PROTOCOLS = ("http/protobuf", "http/json", "grpc")
DEFAULT_ENDPOINTS = {
    "http/protobuf": "http://127.0.0.1:4318",
    "http/json": "http://127.0.0.1:4318",
    "grpc": "http://127.0.0.1:4317",
}


def add_cli_args(parser) -> None:
    parser.add_argument("--endpoint", help="receiver base URL (default http://127.0.0.1:4318, grpc :4317); "
                        "for HTTP, /v1/traces is appended unless the URL already has a path")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="http/protobuf")
    parser.add_argument("--gzip", action="store_true", help="compress requests (Content-Encoding: gzip / grpc-encoding: gzip)")
    parser.add_argument("--timeout", type=float, default=10.0, help="exporter timeout per export, seconds, retries included (default 10)")
    parser.add_argument("--header", action="append", default=[], metavar="K=V", help="extra request header / gRPC metadata (repeatable)")
    parser.add_argument("--json-ids", choices=("hex", "base64"), default="hex", help="http/json only: how trace/span ids are written")


def http_traces_url(endpoint: str) -> str:
    parsed = urlparse(endpoint)
    if parsed.path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _ids_to_hex(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _ids_to_hex(value)
    elif isinstance(node, list):
        for item in node:
            _ids_to_hex(item)
    return node


def otlp_json(spans: Sequence[ReadableSpan], ids: str = "hex") -> bytes:
    """An ExportTraceServiceRequest as OTLP/JSON bytes."""
    as_dict = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    if ids == "hex":
        _ids_to_hex(as_dict)
    return json.dumps(as_dict, separators=(",", ":")).encode()


def _make_json_exporter(url, compression, headers, timeout, ids):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    class OTLPJsonSpanExporter(OTLPSpanExporter):
        """The shipped OTLP/HTTP exporter, sending OTLP/JSON instead of protobuf."""

        def export(self, spans):
            if self._shutdown:
                return SpanExportResult.FAILURE
            result = self._client.export(otlp_json(spans, ids))
            return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE

    merged = {**headers, "Content-Type": "application/json"}
    return OTLPJsonSpanExporter(endpoint=url, compression=compression, headers=merged, timeout=timeout)


def build_exporter(args) -> SpanExporter:
    endpoint = args.endpoint or DEFAULT_ENDPOINTS[args.protocol]
    headers = dict(h.split("=", 1) for h in args.header)
    if args.protocol == "grpc":
        import grpc
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        parsed = urlparse(endpoint)
        return OTLPSpanExporter(
            endpoint=endpoint,
            insecure=parsed.scheme != "https",
            compression=grpc.Compression.Gzip if args.gzip else grpc.Compression.NoCompression,
            headers={k.lower(): v for k, v in headers.items()} or None,
            timeout=args.timeout,
        )
    from opentelemetry.exporter.otlp.proto.http import Compression

    compression = Compression.Gzip if args.gzip else Compression.NoCompression
    url = http_traces_url(endpoint)
    if args.protocol == "http/json":
        return _make_json_exporter(url, compression, headers, args.timeout, args.json_ids)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url, compression=compression, headers=headers or None, timeout=args.timeout)


class CountingExporter(SpanExporter):
    """Wraps an exporter and records every export call: how many spans, which traces, the result."""

    def __init__(self, inner: SpanExporter):
        self.inner = inner
        self.exports: list[dict] = []
        self._lock = threading.Lock()
        self._shut = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        with self._lock:
            self.exports.append({
                "spans": len(spans),
                "names": [s.name for s in spans],
                "trace_ids": sorted({format(s.context.trace_id, "032x") for s in spans}),
                "ok": result is SpanExportResult.SUCCESS,
            })
        return result

    def shutdown(self) -> None:
        # Several providers (one per dialect in emit_raw.py) may share this exporter.
        with self._lock:
            if self._shut:
                return
            self._shut = True
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)

    @property
    def all_ok(self) -> bool:
        return bool(self.exports) and all(e["ok"] for e in self.exports)

    def trace_ids(self) -> list[str]:
        return sorted({t for e in self.exports for t in e["trace_ids"]})
