#!/usr/bin/env python3
"""Hand-built agent spans in three dialects, exported over OTLP with the plain OpenTelemetry SDK.

No agent framework: each dialect writes the attributes its real emitters write (see FACTS.md).
Per dialect, one trace:

- ``genai`` (OpenTelemetry GenAI semantic conventions; service ``afr-raw-genai``):
  ``invoke_agent planner`` (INTERNAL; gen_ai.agent.{id,name,version}, gen_ai.conversation.id) with
  children ``chat gpt-4o`` (CLIENT; gen_ai.request.model, gen_ai.provider.name, usage),
  ``execute_tool get_weather`` (arguments/result as JSON strings),
  ``execute_tool create_ticket`` (arguments/result as structured values: kvlist/array AnyValue),
  ``execute_tool delete_file`` (status ERROR + exception event + error.type), and
  ``load_config`` (a non-tool span, no gen_ai attributes).
- ``openinference`` (service ``afr-raw-openinference``): ``planner`` AGENT span (agent.name,
  session.id) with an LLM child (llm.model_name, llm.provider) and a TOOL child ``get_weather``
  (tool.name, tool.id, tool.description, tool.parameters, input.value/input.mime_type,
  output.value/output.mime_type).
- ``openllmetry`` (Traceloop SDK decorators; service ``afr-raw-openllmetry``, scope
  ``traceloop.tracer``): ``planner.agent`` (traceloop.span.kind=agent) with a ``get_weather.tool``
  child (traceloop.span.kind=tool, traceloop.entity.name, gen_ai.tool.name, gen_ai.agent.name,
  traceloop.entity.input = {"args": [...], "kwargs": {...}} JSON, traceloop.entity.output JSON).

``--children-first`` exports each trace's child spans in one OTLP request and its root agent
span in a later one (two exporter flushes), to exercise out-of-order arrival. Otherwise each
dialect's spans go in one OTLP request at the end (one TracerProvider, hence one resource and one
batch, per dialect). Prints one JSON line (spans and ids per dialect, exports); exits 0
only when every export succeeded.

    python tests/otlp/emit_raw.py --endpoint http://127.0.0.1:4318 --protocol http/json --dialect all
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid

sys.dont_write_bytecode = True  # no __pycache__/ for otlp_export in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402
from opentelemetry.trace import SpanKind, Status, StatusCode  # noqa: E402
from otlp_export import CountingExporter, add_cli_args, build_exporter  # noqa: E402

DIALECTS = ("genai", "openinference", "openllmetry")


def _ids(span) -> dict:
    ctx = span.get_span_context()
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}


def _child(tracer, parent, name, kind=SpanKind.INTERNAL, attributes=None):
    return tracer.start_as_current_span(name, context=trace.set_span_in_context(parent), kind=kind,
                                        attributes=attributes, record_exception=False, set_status_on_exception=False)


class PermissionDenied(Exception):
    pass


def emit_genai(tracer, flush, conversation_id: str) -> dict:
    out = {"dialect": "genai", "spans": []}
    root = tracer.start_span("invoke_agent planner", kind=SpanKind.INTERNAL, attributes={
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "openai",
        "gen_ai.agent.id": "agent_planner_01",
        "gen_ai.agent.name": "planner",
        "gen_ai.agent.version": "1.2.0",
        "gen_ai.agent.description": "Plans trips.",
        "gen_ai.conversation.id": conversation_id,
        "gen_ai.request.model": "gpt-4o",
    })
    with _child(tracer, root, "chat gpt-4o", SpanKind.CLIENT, {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": "chatcmpl-123",
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.usage.input_tokens": 97,
        "gen_ai.usage.output_tokens": 52,
        "gen_ai.conversation.id": conversation_id,
    }) as chat:
        out["spans"].append({"name": "chat gpt-4o", **_ids(chat)})
    with _child(tracer, root, "execute_tool get_weather", attributes={
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_weather_1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Current weather for a city.",
        "gen_ai.tool.call.arguments": json.dumps({"city": "Paris", "unit": "celsius"}),
        "gen_ai.conversation.id": conversation_id,
    }) as span:
        span.set_attribute("gen_ai.tool.call.result", json.dumps({"temp_c": 21.5, "sky": "clear"}))
        out["spans"].append({"name": "execute_tool get_weather", "tool": True, **_ids(span)})
    with _child(tracer, root, "execute_tool create_ticket", attributes={
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "create_ticket",
        "gen_ai.tool.call.id": "call_ticket_2",
        "gen_ai.tool.type": "function",
        # Structured (not JSON-string) values: the SDK encodes a dict as kvlistValue, a list as arrayValue.
        "gen_ai.tool.call.arguments": {"title": "Flight delayed", "priority": 2, "tags": ["travel", "urgent"], "notify": True},
        "gen_ai.conversation.id": conversation_id,
    }) as span:
        span.set_attribute("gen_ai.tool.call.result", {"ticket_id": "T-1001", "created": True})
        out["spans"].append({"name": "execute_tool create_ticket", "tool": True, "structured": True, **_ids(span)})
    with _child(tracer, root, "execute_tool delete_file", attributes={
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "delete_file",
        "gen_ai.tool.call.id": "call_delete_3",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": json.dumps({"path": "/etc/passwd"}),
        "gen_ai.conversation.id": conversation_id,
    }) as span:
        try:
            raise PermissionDenied("permission denied: /etc/passwd")
        except PermissionDenied as e:
            span.record_exception(e)
            span.set_status(Status(StatusCode.ERROR, str(e)))
            span.set_attribute("error.type", type(e).__qualname__)
        out["spans"].append({"name": "execute_tool delete_file", "tool": True, "error": True, **_ids(span)})
    with _child(tracer, root, "load_config", attributes={"code.function.name": "load_config", "config.path": "/etc/app.toml"}) as span:
        out["spans"].append({"name": "load_config", "tool": False, **_ids(span)})
    if flush is not None:
        flush()
    root.end()
    out["spans"].insert(0, {"name": "invoke_agent planner", "root": True, **_ids(root)})
    return out


def emit_openinference(tracer, flush, session_id: str) -> dict:
    out = {"dialect": "openinference", "spans": []}
    root = tracer.start_span("planner", kind=SpanKind.INTERNAL, attributes={
        "openinference.span.kind": "AGENT",
        "agent.name": "planner",
        "session.id": session_id,
        "input.value": "What's the weather in Paris?",
        "input.mime_type": "text/plain",
    })
    with _child(tracer, root, "ChatCompletion", attributes={
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-2024-08-06",
        "llm.provider": "openai",
        "llm.system": "openai",
        "llm.token_count.prompt": 97,
        "llm.token_count.completion": 52,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_oi_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": json.dumps({"city": "Paris"}),
        "session.id": session_id,
    }) as span:
        out["spans"].append({"name": "ChatCompletion", **_ids(span)})
    with _child(tracer, root, "get_weather", attributes={
        "openinference.span.kind": "TOOL",
        "tool.name": "get_weather",
        "tool.id": "call_oi_1",
        "tool.description": "Current weather for a city.",
        "tool.parameters": json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        "input.value": json.dumps({"city": "Paris"}),
        "input.mime_type": "application/json",
        "session.id": session_id,
    }) as span:
        span.set_attribute("output.value", json.dumps({"temp_c": 21.5, "sky": "clear"}))
        span.set_attribute("output.mime_type", "application/json")
        span.set_status(Status(StatusCode.OK))
        out["spans"].append({"name": "get_weather", "tool": True, **_ids(span)})
    if flush is not None:
        flush()
    root.set_attribute("output.value", "It is 21.5 °C and clear in Paris.")
    root.set_attribute("output.mime_type", "text/plain")
    root.end()
    out["spans"].insert(0, {"name": "planner", "root": True, **_ids(root)})
    return out


def emit_openllmetry(tracer, flush, conversation_id: str) -> dict:
    # What traceloop-sdk's @agent / @tool decorators write (traceloop/sdk/decorators/base.py,
    # tracing.py's on_start processor): span name "{entity}.{kind}", kind INTERNAL, entity input as
    # {"args": [...], "kwargs": {...}} JSON, output as JSON, gen_ai.agent.name copied onto
    # descendants, gen_ai.conversation.id when the app set one.
    out = {"dialect": "openllmetry", "spans": []}
    common = {"gen_ai.agent.name": "planner", "gen_ai.conversation.id": conversation_id}
    root = tracer.start_span("planner.agent", attributes={
        **common,
        "traceloop.span.kind": "agent",
        "traceloop.entity.name": "planner",
        "traceloop.entity.input": json.dumps({"args": ["What's the weather in Paris?"], "kwargs": {}}),
    })
    with _child(tracer, root, "get_weather.tool", attributes={
        **common,
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "get_weather",
        "gen_ai.tool.name": "get_weather",
        "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"city": "Paris"}}),
    }) as span:
        span.set_attribute("traceloop.entity.output", json.dumps({"temp_c": 21.5, "sky": "clear"}))
        out["spans"].append({"name": "get_weather.tool", "tool": True, **_ids(span)})
    if flush is not None:
        flush()
    root.set_attribute("traceloop.entity.output", json.dumps("It is 21.5 °C and clear in Paris."))
    root.end()
    out["spans"].insert(0, {"name": "planner.agent", "root": True, **_ids(root)})
    return out


EMITTERS = {
    "genai": (emit_genai, "afr-raw-genai", "afr.emit_raw", "0.1.0"),
    "openinference": (emit_openinference, "afr-raw-openinference", "openinference.instrumentation.afr_raw", "0.1.0"),
    "openllmetry": (emit_openllmetry, "afr-raw-openllmetry", "traceloop.tracer", None),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cli_args(parser)
    parser.add_argument("--dialect", choices=("all",) + DIALECTS, default="all")
    parser.add_argument("--children-first", action="store_true",
                        help="export child spans in an earlier OTLP request than their root agent span")
    parser.add_argument("--service-name", default=None, help="override every dialect's service.name")
    parser.add_argument("--conversation-id", default=None, help="default: a fresh uuid4 per dialect")
    args = parser.parse_args()

    exporter = CountingExporter(build_exporter(args))
    dialects = DIALECTS if args.dialect == "all" else (args.dialect,)
    providers = []
    results = []
    for dialect in dialects:
        fn, service, scope, scope_version = EMITTERS[dialect]
        # One provider per dialect: each gets its own resource (service.name), as separate apps would.
        provider = TracerProvider(resource=Resource.create({"service.name": args.service_name or service}))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        providers.append(provider)
        tracer = provider.get_tracer(scope, scope_version)
        flush = provider.force_flush if args.children_first else None
        results.append(fn(tracer, flush, args.conversation_id or str(uuid.uuid4())))
    flushed = all(p.force_flush() for p in providers)
    for p in providers:
        p.shutdown()
    ok = flushed and exporter.all_ok
    print(json.dumps({
        "emitter": "raw",
        "protocol": args.protocol,
        "gzip": args.gzip,
        "children_first": args.children_first,
        "traces": results,
        "exports": exporter.exports,
        "ok": ok,
    }))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
