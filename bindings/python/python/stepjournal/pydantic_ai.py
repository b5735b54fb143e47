"""A durable backend for Pydantic AI agents on stepjournal (the optional extra ``pydantic-ai``).

An agent run is a stepjournal session. Each durable unit of the run (a model request, a tool
call, tool discovery) is one step of the session with one call, its reply and dispatch id saved
before the unit's body runs, its result recorded after it. After a crash the run is started again
with the same session: Pydantic AI replays the agent loop from the start, every unit that
completed returns its recorded result without running, and the unit that was running when the
process died is decided by stepjournal's recovery rules:

- a model request, tool discovery, argument validation, and a tool whose metadata says
  ``{"stepjournal": {"replay": "safe"}}`` run again under the same dispatch id (attempt 2, ...,
  at most ``max_bodies`` in all);
- any other tool (``replay`` ``"unsafe"``, the default) may have had its effect: it is not run
  again, and the model is told so: the call fails with "The tool may have run. Check whether it
  took effect before repeating it."

Usage::

    journal = await stepjournal.open_journal("file:./data", tools=stepjournal.pydantic_ai.unit_tools())
    agent = Agent(model, name="booker", capabilities=[StepjournalDurability()])

    @agent.tool_plain(metadata={"stepjournal": {"replay": "safe"}})
    async def hold_seat(seat: str) -> str: ...

    result = await run_durable(agent, journal, "session-1", "book 14C")   # after a crash: the same call

A tool that keys its effect on the call's dispatch id reads it with :func:`current_call`.

Where Pydantic AI's backend interface falls short of the rule, and what this does instead: the
interface hands the engine one opaque unit at a time (a name, a body, a cache key), so the
engine sees neither the model's reply nor its calls as a whole. stepjournal's protocol saves a
reply with every call before any body starts; here each unit is saved as a reply of one call just
before it runs, which keeps the rule (nothing runs before its dispatch id is durable, nothing
that may have run runs again) but records the model's reply and its tool calls as separate steps.
Tool calls run one at a time (``sequential_tools_in_durable_context``), so the order of units is
the same on every replay.
"""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence

try:
    from pydantic_ai.durable_exec import (
        JSON_CODEC,
        BaseDurabilityCapability,
        CallToolResult,
        DurabilityEngineSpec,
        JournalCallableOperationBackend,
        RoleBasedOperationConfig,
        ToolsetCallToolId,
        record_durable_unit,
        replay_scope,
    )

    # Builds the recorded form of a failed tool call, as the base records one (the variants of
    # CallToolResult are private; this is the function the base itself wraps tool calls with).
    from pydantic_ai.durable_exec._toolset import wrap_tool_call_result
    from pydantic_ai.exceptions import ToolFailed
except ImportError as e:  # pragma: no cover - the extra is not installed
    raise ImportError("stepjournal.pydantic_ai needs Pydantic AI: pip install 'stepjournal[pydantic-ai]'") from e

from . import _journal, _tools
from ._errors import StepjournalError

UNSAFE_TOOL = "pydantic_ai.unit"
SAFE_TOOL = "pydantic_ai.unit.safe"

OUTCOME_UNKNOWN = "The tool may have run. Check whether it took effect before repeating it."
REPLAY_LIMIT = "The tool already ran the most times allowed. It will not be run again automatically."


@dataclass
class _Session:
    """One durable agent run: its stepjournal run, the recorded results, the next unit."""

    journal: _journal.Journal
    session: str
    run: _journal.Run
    recorded: Dict[str, Dict[str, Any]]
    next: int = 0
    bodies: Dict[str, Callable[[], Awaitable[object]]] = field(default_factory=dict)
    raised: Dict[str, BaseException] = field(default_factory=dict)


_current: contextvars.ContextVar[Optional[_Session]] = contextvars.ContextVar("stepjournal_pydantic_ai", default=None)
_call: contextvars.ContextVar[Optional[_tools.CallCtx]] = contextvars.ContextVar("stepjournal_pydantic_ai_call", default=None)
_sessions: Dict[str, _Session] = {}


def current_call() -> Optional[_tools.CallCtx]:
    """The stepjournal context of the unit running now (its ``dispatch_id``, ``attempt``,
    ``idempotency_key``), or None outside one: a tool keys its external effect on it."""
    return _call.get()


async def _unit(args: Any, ctx: _tools.CallCtx) -> object:
    state = _sessions.get(ctx.session_id)
    body = None if state is None else state.bodies.get(ctx.call_id)
    if state is None or body is None:
        raise StepjournalError(f"unit {ctx.call_id} of session {ctx.session_id} has no body in this process")
    token = _call.set(ctx)
    try:
        return await body()
    except BaseException as e:
        state.raised[ctx.call_id] = e
        raise
    finally:
        _call.reset(token)


def unit_tools() -> List[_tools.Tool]:
    """The two stepjournal tools a journal needs to run agents' units: give them to
    :func:`stepjournal.open_journal` (with any tools of your own)."""
    return [
        _tools.define_tool(UNSAFE_TOOL, {"type": "object"}, replay="unsafe", execute=_unit),
        _tools.define_tool(SAFE_TOOL, {"type": "object"}, replay="safe", execute=_unit),
    ]


async def _failed_payload(message: str) -> object:
    async def fail() -> None:
        raise ToolFailed(message)

    return JSON_CODEC.dump(CallToolResult, await wrap_tool_call_result(fail()))


async def _paired(name: str, is_tool_call: bool, reason: str, message: str) -> object:
    """What a unit answered without a result comes to: for a tool call, a failed call the model
    reads (the rules' message); for any other unit, an error (a model request is safe, so only
    the replay limit pairs one)."""
    text = OUTCOME_UNKNOWN if reason == "outcome_unknown" else REPLAY_LIMIT if reason == "replay_limit_reached" else message
    if not is_tool_call:
        raise StepjournalError(f"the durable unit {name} was answered {reason}: {text}")
    return await _failed_payload(text)


class _Backend(JournalCallableOperationBackend[Dict[str, Any]]):
    async def execute(
        self,
        *,
        operation_id: Any,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple,  # type: ignore[type-arg]
        config: Dict[str, Any],
    ) -> object:
        state = _current.get()
        if state is None:
            raise StepjournalError(f"the durable unit {name} ran outside run_durable()")
        call = f"u{state.next}"
        state.next += 1
        is_tool_call = isinstance(operation_id, ToolsetCallToolId)
        recorded = state.recorded.get(call)
        if recorded is not None:
            record_durable_unit(executed=False)
            if "paired" in recorded:
                return await _paired(name, is_tool_call, recorded["paired"], recorded["message"])
            if recorded["is_error"]:
                raise StepjournalError(f"the durable unit {name} failed when it ran: {recorded['output']}")
            return recorded["output"]
        safe = not is_tool_call or (config or {}).get("replay") == "safe"
        state.bodies[call] = body
        try:
            open_step = state.run.step
            if open_step is not None and call in {c["call"] for c in state.run.plan["calls"]}:
                # The unit the crashed process was running: the wake's plan decided it.
                outcome = await state.run.drive()
            else:
                step = await state.run.commit_reply(
                    {"text": name, "calls": [{"call": call, "tool": SAFE_TOOL if safe else UNSAFE_TOOL, "args": {"name": name}}]}
                )
                outcome = await step.drive()
        finally:
            state.bodies.pop(call, None)
        assert outcome is not None
        answer = next(a for a in outcome["answers"] if a["call"] == call)
        record_durable_unit(executed=call not in state.raised and answer["type"] == "tool_result")
        if answer["type"] == "paired":
            return await _paired(name, is_tool_call, answer.get("reason", ""), answer.get("message", ""))
        if answer.get("isError"):
            raised = state.raised.pop(call, None)
            if raised is not None:
                raise raised
            raise StepjournalError(f"the durable unit {name} failed: {answer['output']}")
        return answer["output"]


class StepjournalDurability(BaseDurabilityCapability[Any]):
    """The capability that makes an agent durable on stepjournal: add it to the agent's
    ``capabilities`` and run the agent with :func:`run_durable`."""

    engine_spec = DurabilityEngineSpec(
        engine_name="stepjournal",
        durable_unit_noun="call",
        durable_container_noun="session",
        codec=JSON_CODEC,
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={"function": "enter-always", "mcp": "enter-in-durable-unit", "dynamic": "enter-never"},
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        journal_discovery=True,
        sequential_tools_in_durable_context=True,
        tool_config_key="stepjournal",
    )

    @property
    def in_durable_context(self) -> bool:
        return _current.get() is not None

    def get_durable_operation_backend(self) -> _Backend:
        def tool_config(operation_id: Any, tool: Any, tool_name: str) -> Any:
            return self._build_resolve_tool_config({"replay": "unsafe"})(tool, tool_name)

        return _Backend(
            agent_name=self.name or "agent",
            default_model_id=self.default_model_id,
            config=RoleBasedOperationConfig(
                model={"replay": "safe"},
                event={"replay": "safe"},
                capability={"replay": "safe"},
                tool={"replay": "unsafe"},
                resolve_tool=tool_config,
            ),
        )


def _recorded(lines: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """Each unit's recorded outcome: its result, or the pairing recovery answered it with."""
    out: Dict[str, Dict[str, Any]] = {}
    for line in lines:
        event = json.loads(line)
        if event["type"] == "tool_result" and event["call"].startswith("u"):
            out[event["call"]] = {"output": event["output"], "is_error": event.get("is_error", False)}
        elif event["type"] == "paired" and event["call"].startswith("u"):
            out[event["call"]] = {"paired": event["reason"], "message": event.get("message", "")}
    return out


async def run_durable(agent: Any, journal: _journal.Journal, session: str, user_prompt: Optional[str] = None, **kwargs: Any) -> Any:
    """Runs ``agent`` durably as session ``session`` of ``journal``: a new session begins with
    ``user_prompt``; a session a crashed process left open is recovered by the rules and the
    agent loop replayed (call it again with the same arguments). Returns the agent's result."""
    if not await journal.export_lines(session):
        run = await journal.begin_run(session, {"kind": "new_turn", "message": user_prompt or ""})
    else:
        run = await journal.begin_run(session, {"kind": "wake"})
    # Read after the entry: the pairings its plan wrote are outcomes the replay must return.
    lines = await journal.export_lines(session)
    step = run.step
    if step is not None and step.is_open and not step.open_calls():
        # The crash fell after the unit's outcome and before its step's commit: commit it now, so
        # the next unit can save its own.
        await run.drive()
    state = _Session(journal=journal, session=session, run=run, recorded=_recorded(lines))
    _sessions[session] = state
    token = _current.set(state)
    try:
        with replay_scope():
            result = await agent.run(user_prompt, **kwargs)
    except BaseException as e:
        if run.status.get("state") == "open":
            await run.fail(f"the agent raised {type(e).__name__}: {e}")
        raise
    finally:
        _current.reset(token)
        _sessions.pop(session, None)
    await run.end("completed")
    return result
