#!/usr/bin/env python3
"""A real Pydantic AI agent run, with no LLM, exporting its own OpenTelemetry GenAI spans over OTLP.

The agent uses pydantic-ai's ``TestModel`` (it calls every registered tool once with arguments
taken from the tools' JSON schemas, here their ``examples``, then answers), so the run is deterministic and offline:

- ``get_weather(city)`` returns a dict;
- ``delete_file(path)`` raises ``ModelRetry`` on its first call (an ``execute_tool`` span with status
  ERROR and an exception event), and succeeds when the model retries it;
- ``ask_researcher(question)`` delegates to a second agent (``researcher``) whose own run, with its
  tool ``search_docs(query)``, nests under this tool's span: invoke_agent -> execute_tool ->
  invoke_agent -> execute_tool.

Instrumentation is pydantic-ai's own (``Instrumentation`` capability with
``InstrumentationSettings(include_content=True)``, the default: tool arguments and results are
recorded; ``--no-content`` turns them off), exported through the real OTel SDK
(BatchSpanProcessor -> OTLP exporter). The provider is force-flushed and shut down before exit.
Prints one JSON line: tool calls, trace ids, exports. Exit 0 only when every export succeeded.

    python tests/otlp/emit_agent.py --endpoint http://127.0.0.1:4318 --protocol http/protobuf [--gzip]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from typing import Annotated

sys.dont_write_bytecode = True  # no __pycache__/ for otlp_export in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402
from otlp_export import CountingExporter, add_cli_args, build_exporter  # noqa: E402
from pydantic import Field  # noqa: E402
from pydantic_ai import Agent, ModelRetry, RunContext  # noqa: E402
from pydantic_ai.capabilities import Instrumentation  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cli_args(parser)
    parser.add_argument("--service-name", default="afr-otlp-agent")
    parser.add_argument("--no-content", action="store_true", help="include_content=False: no tool arguments/results")
    parser.add_argument("--version", type=int, default=None, choices=(2, 3, 4, 5, 6),
                        help="pydantic-ai instrumentation data-format version (default: the library's, 5)")
    parser.add_argument("--conversation-id", default=None, help="default: a fresh uuid4")
    args = parser.parse_args()

    exporter = CountingExporter(build_exporter(args))
    provider = TracerProvider(resource=Resource.create({"service.name": args.service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))

    settings_kwargs = {"tracer_provider": provider, "include_content": not args.no_content}
    if args.version is not None:
        settings_kwargs["version"] = args.version
    settings = InstrumentationSettings(**settings_kwargs)

    calls: list[dict] = []
    delete_attempts = {"n": 0}

    def instrumented_agent(model: str, name: str, description: str) -> Agent:
        """An agent on TestModel (no LLM) whose spans go to our provider, content included."""
        return Agent(TestModel(model_name=model), name=name, description=description,
                     capabilities=[Instrumentation(settings=settings)])

    researcher = instrumented_agent("test-researcher", "researcher", "Looks things up in the docs.")

    @researcher.tool_plain
    def search_docs(query: Annotated[str, Field(examples=["OTLP retry semantics"])]) -> list[str]:
        """Search the project documentation."""
        calls.append({"agent": "researcher", "tool": "search_docs", "args": {"query": query}})
        return [f"doc hit for {query!r}", "docs/otlp.md"]

    agent = instrumented_agent("test-model", "weather-agent",
                               "Answers weather questions and tidies files.")

    @agent.tool_plain
    def get_weather(city: Annotated[str, Field(examples=["Paris"])]) -> dict:
        """Current weather for a city."""
        calls.append({"agent": "weather-agent", "tool": "get_weather", "args": {"city": city}})
        return {"city": city, "temp_c": 21.5, "sky": "clear"}

    @agent.tool_plain
    def delete_file(path: Annotated[str, Field(examples=["/tmp/afr-demo/old.log"])]) -> str:
        """Delete a file in the workspace."""
        delete_attempts["n"] += 1
        failed = delete_attempts["n"] == 1
        calls.append({"agent": "weather-agent", "tool": "delete_file", "args": {"path": path},
                      "error": "ModelRetry" if failed else None})
        if failed:
            raise ModelRetry(f"permission denied: {path}")
        return f"deleted {path}"

    @agent.tool
    async def ask_researcher(ctx: RunContext[None], question: Annotated[str, Field(examples=["How do OTLP exporters retry?"])]) -> str:
        """Delegate a question to the researcher agent."""
        calls.append({"agent": "weather-agent", "tool": "ask_researcher", "args": {"question": question}})
        result = await researcher.run(question, usage=ctx.usage)
        return result.output

    conversation_id = args.conversation_id or str(uuid.uuid4())

    async def run() -> str:
        result = await agent.run("What's the weather in Paris? Also clean up /tmp/x.", conversation_id=conversation_id)
        return result.output

    error = None
    output = None
    try:
        output = asyncio.run(run())
    except Exception as e:  # report, still flush what was recorded
        error = f"{type(e).__name__}: {e}"
    flushed = provider.force_flush()
    provider.shutdown()

    print(json.dumps({
        "emitter": "pydantic-ai",
        "protocol": args.protocol,
        "gzip": args.gzip,
        "service_name": args.service_name,
        "conversation_id": conversation_id,
        "tool_calls": calls,
        "output": output,
        "error": error,
        "flushed": flushed,
        "trace_ids": exporter.trace_ids(),
        "exports": exporter.exports,
        "ok": error is None and flushed and exporter.all_ok,
    }))
    return 0 if error is None and flushed and exporter.all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
