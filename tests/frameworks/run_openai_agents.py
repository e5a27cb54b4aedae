#!/usr/bin/env python3
"""A real OpenAI Agents SDK (openai-agents) run with a handoff, under
openinference-instrumentation-openai-agents, exporting OTLP.

Two agents on the SDK's own ``OpenAIChatCompletionsModel`` with an ``AsyncOpenAI`` client pointed
at the scripted model of model_server.py (no LLM, no network; the SDK's own trace export to
OpenAI is replaced by the instrumentor's processor, its default):

- ``triage`` calls ``lookup_order(order_id)``, then hands off to ``billing`` (the SDK offers the
  handoff to the model as the tool ``transfer_to_billing``);
- ``billing`` calls ``refund(order_id, amount)``, which raises (the SDK reports the error to the
  model and goes on), then answers.

``--session`` runs it inside OpenInference's ``using_session`` (every span gets ``session.id``).

    python run_openai_agents.py --endpoint http://127.0.0.1:4318 --session s-1
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import finish, parser, provider  # noqa: E402
from model_server import MODEL, serving  # noqa: E402

SCRIPT = {
    "AFR_AGENT=triage": [
        {"tool": "lookup_order", "args": {"order_id": "A-17"}},
        {"tool": "transfer_to_billing", "args": {}},
    ],
    "AFR_AGENT=billing": [
        {"tool": "refund", "args": {"order_id": "A-17", "amount": 12.5}},
        {"text": "The refund failed; a person will follow up."},
    ],
}


def main() -> int:
    args = parser(__doc__).parse_args()
    tp = provider(args, "afr-openai-agents")
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI
    from openinference.instrumentation import using_session

    calls: list[dict] = []

    @function_tool
    def lookup_order(order_id: str) -> dict:
        """Look an order up."""
        calls.append({"tool": "lookup_order", "args": {"order_id": order_id}})
        return {"order_id": order_id, "total": 12.5, "status": "paid"}

    @function_tool
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        calls.append({"tool": "refund", "args": {"order_id": order_id, "amount": amount}})
        raise RuntimeError(f"payment provider refused the refund of {order_id}")

    with serving(SCRIPT) as (url, script):
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=url, api_key="not-used"))
        billing = Agent(name="billing", instructions="AFR_AGENT=billing. Refunds.", tools=[refund], model=model)
        triage = Agent(name="triage", instructions="AFR_AGENT=triage. Route the customer.", tools=[lookup_order],
                       handoffs=[billing], model=model)
        session = using_session(args.session) if args.session else contextlib.nullcontext()
        with session:
            result = asyncio.run(Runner.run(triage, "Refund order A-17, please."))
        model_calls = len(script.requests)
    return finish(args, tp, {"calls": calls, "answer": str(result.final_output),
                             "last_agent": result.last_agent.name, "model_calls": model_calls})


if __name__ == "__main__":
    sys.exit(main())
