"""Checked by mypy --strict (tests/test_types.py), never run: the package's types as a runtime
uses them."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import stepjournal
from stepjournal import CallCtx, Journal, Run, Step


@stepjournal.tool(replay="safe", input_schema={"type": "object"})
async def set_preference(args: Dict[str, str], ctx: CallCtx) -> Dict[str, str]:
    await ctx.output("saving")
    key: str = ctx.idempotency_key
    attempt: int = ctx.attempt
    if ctx.cancelled.is_set():
        return {}
    return {"key": key, "attempt": str(attempt), "dispatch": ctx.dispatch_id, "session": ctx.session_id}


async def pay(args: Any, ctx: CallCtx) -> int:
    return 1


charge: stepjournal.Tool = stepjournal.define_tool("charge", {"type": "object"}, replay="unsafe", kind="approval", execute=pay, timeout=30)
ask: stepjournal.Tool = stepjournal.define_client_tool("ask")


async def main() -> None:
    journal: Journal = await stepjournal.open_journal("file:./data", tools=[set_preference, charge, ask], lease_ttl=30.0, max_bodies=3)
    run: Run = await journal.begin_run("s", {"kind": "new_turn", "message": "hi"})
    plan: Dict[str, Any] = run.plan
    step: Step = await run.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "set_preference", "args": {}}]})
    outcome: Dict[str, Any] = await step.drive()
    again: Run = await step.answer_client("c2", {"ok": True})
    driven: Optional[Dict[str, Any]] = await again.drive()
    await run.end("completed")
    sessions: List[str] = await journal.sessions_to_recover()

    async def on_recovered(r: Run, o: Optional[Dict[str, Any]]) -> None:
        await r.end()

    report: stepjournal.RecoveryReport = await journal.recover_all(concurrency=4, on_recovered=on_recovered)
    for failed in report.failed:
        if isinstance(failed.error, stepjournal.StepjournalError):
            code: str = failed.error.code
            refusal: Optional[str] = failed.error.refusal
            print(code, refusal)
    transcript: List[Dict[str, Any]] = await journal.transcript("s")
    lines: List[str] = await journal.export_lines("s")
    planned: Dict[str, Any] = stepjournal.plan({"log": [], "tools": {}, "entry": {"kind": "wake"}})
    try:
        await journal.begin_run("s", "retry")
    except stepjournal.ValidationError as e:
        print(e.code, e.message)
    print(plan, outcome, driven, sessions, transcript, lines, planned, journal.metrics()["appends"])
    abandoned: List[str] = await journal.close(deadline=1.5)
    print(abandoned)


def sync_main() -> None:
    import stepjournal.sync

    with stepjournal.sync.open_journal("file:./data", tools=[set_preference]) as journal:
        run: stepjournal.sync.Run = journal.begin_run("s", "wake")
        step: Optional[stepjournal.sync.Step] = run.step
        outcome: Optional[Dict[str, Any]] = run.drive()
        report: stepjournal.sync.RecoveryReport = journal.recover_all()
        print(step, outcome, [r.run.id for r in report.recovered])
