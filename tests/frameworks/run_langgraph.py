#!/usr/bin/env python3
"""A real LangGraph agent run under a real LangChain instrumentation, exporting OTLP.

The graph is a team: a parent StateGraph ``team`` with two agent nodes run one after the other,
each a subgraph whose ``ToolNode`` runs its tools: ``researcher``, LangGraph's prebuilt ReAct
agent (``langgraph.prebuilt.create_react_agent(..., name="researcher")``), then ``writer``,
LangChain 1.x's agent on LangGraph (``langchain.agents.create_agent(..., name="writer")``, which
tags its runs ``lc_agent_name``). The models are LangChain's own ``GenericFakeChatModel`` (no LLM,
no network) with tool binding accepted; the researcher's answers two tool calls in one turn, the
writer's one, then each a final answer:

- ``search(query, limit)`` returns a list;
- ``fetch_page(url)`` raises ``ToolException``, which the tool handles
  (``handle_tool_error=True``): the ToolNode returns a ``ToolMessage`` with ``status: error`` and
  the agent carries on (the span's status stays OK);
- ``save_note(title, body)`` (the writer's) returns a string.

``--instrumentation openinference`` (openinference-instrumentation-langchain) or ``openllmetry``
(opentelemetry-instrumentation-langchain, traceloop). ``--session`` goes into the run's
``metadata.session_id`` (both instrumentations read it).

    python run_langgraph.py --endpoint http://127.0.0.1:4318 --instrumentation openinference
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import finish, parser, provider  # noqa: E402


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--instrumentation", choices=("openinference", "openllmetry"), required=True)
    args = p.parse_args()
    tp = provider(args, f"afr-langgraph-{args.instrumentation}")
    if args.instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tp)
    else:
        os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=tp)

    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import ToolException, tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import create_react_agent

    calls: list[dict] = []

    class ScriptedChatModel(GenericFakeChatModel):
        """GenericFakeChatModel that accepts tools (the ReAct agent binds them)."""

        def bind_tools(self, tools, **kwargs):  # type: ignore[no-untyped-def]
            return self

    @tool
    def search(query: str, limit: int = 3) -> list[str]:
        """Search the project documentation."""
        calls.append({"tool": "search", "args": {"query": query, "limit": limit}})
        return [f"hit {i} for {query}" for i in range(limit)]

    @tool
    def fetch_page(url: str) -> str:
        """Fetch a web page."""
        calls.append({"tool": "fetch_page", "args": {"url": url}})
        raise ToolException(f"403 Forbidden: {url}")

    fetch_page.handle_tool_error = True

    model = ScriptedChatModel(messages=iter([
        AIMessage(content="", tool_calls=[
            {"name": "search", "args": {"query": "OTLP retry semantics", "limit": 2}, "id": "call_search_1"},
            {"name": "fetch_page", "args": {"url": "https://example.invalid/private"}, "id": "call_fetch_1"},
        ]),
        AIMessage(content="Two hits; the page was forbidden."),
    ]))
    researcher = create_react_agent(model, [search, fetch_page], name="researcher")

    @tool
    def save_note(title: str, body: str) -> str:
        """Save a note."""
        calls.append({"tool": "save_note", "args": {"title": title, "body": body}})
        return f"saved {title}"

    writer_model = ScriptedChatModel(messages=iter([
        AIMessage(content="", tool_calls=[
            {"name": "save_note", "args": {"title": "retries", "body": "OTLP: retry 429/503"}, "id": "call_note_1"},
        ]),
        AIMessage(content="Noted."),
    ]))
    writer = create_agent(writer_model, [save_note], name="writer")
    team = StateGraph(MessagesState)
    team.add_node("researcher", researcher)
    team.add_node("writer", writer)
    team.add_edge(START, "researcher")
    team.add_edge("researcher", "writer")
    graph = team.compile(name="team")
    config = {"metadata": {"session_id": args.session}} if args.session else {}
    out = graph.invoke({"messages": [HumanMessage("What does OTLP say about retries?")]}, config=config)
    return finish(args, tp, {"calls": calls, "answer": out["messages"][-1].content})


if __name__ == "__main__":
    sys.exit(main())
