#!/usr/bin/env python3
"""A real smolagents run under openinference-instrumentation-smolagents, exporting OTLP.

Two ``ToolCallingAgent``s on smolagents' own ``OpenAIServerModel``, pointed at the scripted model
of model_server.py (no LLM, no network): ``manager`` delegates to its managed agent
``researcher`` (smolagents offers a managed agent to its manager as a tool), which calls

- ``search_docs(query, limit)``, returning a string;
- ``read_file(path)``, which raises (smolagents reports the error to the model and goes on);

then each answers with smolagents' ``final_answer`` tool. ``--session`` runs it inside
OpenInference's ``using_session`` (every span gets ``session.id``).

    python run_smolagents.py --endpoint http://127.0.0.1:4318
"""

from __future__ import annotations

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import finish, parser, provider  # noqa: E402
from model_server import MODEL, serving  # noqa: E402

SCRIPT = {
    "AFR_AGENT=manager": [
        {"tool": "researcher", "args": {"task": "Find what OTLP says about retries", "additional_args": {}}},
        {"tool": "final_answer", "args": {"answer": "Retry on 429 and 503."}},
    ],
    "AFR_AGENT=researcher": [
        {"tool": "search_docs", "args": {"query": "OTLP retry", "limit": 2}},
        {"tool": "read_file", "args": {"path": "/etc/secret"}},
        {"tool": "final_answer", "args": {"answer": "429 and 503 are retryable."}},
    ],
}


def main() -> int:
    args = parser(__doc__).parse_args()
    tp = provider(args, "afr-smolagents")
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    SmolagentsInstrumentor().instrument(tracer_provider=tp)
    from openinference.instrumentation import using_session
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    calls: list[dict] = []

    @tool
    def search_docs(query: str, limit: int) -> str:
        """Search the project documentation.

        Args:
            query: what to look for.
            limit: how many hits.
        """
        calls.append({"tool": "search_docs", "args": {"query": query, "limit": limit}})
        return "; ".join(f"hit {i} for {query}" for i in range(limit))

    @tool
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: the file's path.
        """
        calls.append({"tool": "read_file", "args": {"path": path}})
        raise PermissionError(f"permission denied: {path}")

    with serving(SCRIPT) as (url, script):
        model = OpenAIServerModel(model_id=MODEL, api_base=url, api_key="not-used")
        researcher = ToolCallingAgent(
            tools=[search_docs, read_file], model=model, name="researcher",
            description="Looks things up in the docs.", instructions="AFR_AGENT=researcher", max_steps=5,
        )
        manager = ToolCallingAgent(
            tools=[], model=model, name="manager", managed_agents=[researcher],
            instructions="AFR_AGENT=manager", max_steps=4,
        )
        session = using_session(args.session) if args.session else contextlib.nullcontext()
        with session:
            answer = manager.run("What does OTLP say about retries?")
        model_calls = len(script.requests)
    return finish(args, tp, {"calls": calls, "answer": str(answer), "model_calls": model_calls})


if __name__ == "__main__":
    sys.exit(main())
