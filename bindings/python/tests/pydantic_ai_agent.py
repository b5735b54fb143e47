"""A Pydantic AI agent run durably on stepjournal, for tests/test_pydantic_ai.py (run as a child
process): `python pydantic_ai_agent.py URL HANG` runs session s1; the tool named HANG waits
forever once started (for the SIGKILL), `none` lets every tool finish. Each tool start and the
agent's output are printed as JSON lines; the model (a FunctionModel, no network) calls
hold_seat (safe) and charge_card (unsafe) and then answers with what each tool returned."""

import asyncio
import json
import sys

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import stepjournal
from stepjournal.pydantic_ai import StepjournalDurability, current_call, run_durable, unit_tools

def report(**kw):
    print(json.dumps(kw), flush=True)

CALLS = [0]


def model_fn(messages, info: AgentInfo):
    CALLS[0] += 1
    # first request: call both tools; then: answer with what the tools said
    returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, (ToolReturnPart, RetryPromptPart))]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("hold_seat", {"seat": "14C"}, tool_call_id="t1"), ToolCallPart("charge_card", {"amount": 120}, tool_call_id="t2")])
    seen = {p.tool_name: (type(p).__name__, str(p.content)) for p in returns}
    return ModelResponse(parts=[TextPart(json.dumps(seen))])

def make_agent(hang):
    agent = Agent(FunctionModel(model_fn), name="booker", capabilities=[StepjournalDurability()])
    @agent.tool_plain(metadata={"stepjournal": {"replay": "safe"}})
    async def hold_seat(seat: str) -> str:
        c = current_call()
        report(started="hold_seat", dispatch=c.dispatch_id, attempt=c.attempt)
        if hang == "hold_seat":
            await asyncio.Event().wait()
        return f"held {seat}"
    @agent.tool_plain
    async def charge_card(amount: int) -> str:
        c = current_call()
        report(started="charge_card", dispatch=c.dispatch_id, attempt=c.attempt)
        if hang == "charge_card":
            await asyncio.Event().wait()
        return f"charged {amount}"
    return agent

async def main(url, hang):
    journal = await stepjournal.open_journal(url, tools=unit_tools())
    agent = make_agent(hang)
    result = await run_durable(agent, journal, "s1", "book 14C and pay")
    report(output=json.loads(result.output), model_calls=CALLS[0])
    await journal.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
