"""Fencing from Python: a body of a run that a later wake overtook finishes, its result is
refused, its ctx.cancelled event is set, and the new run runs attempt 2 under the same dispatch
id."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List

import pytest

import stepjournal
from conftest import run, watchdog


def test_a_late_body_of_a_fenced_run_is_cancelled_its_result_refused_the_new_run_runs_attempt_2(url: str) -> None:
    async def main() -> None:
        started = asyncio.Event()
        release = asyncio.Event()
        seen: List[Dict[str, Any]] = []

        @stepjournal.tool(replay="safe")
        async def slow(args: Any, ctx: stepjournal.CallCtx) -> Dict[str, int]:
            seen.append({"attempt": ctx.attempt, "dispatch_id": ctx.dispatch_id, "cancelled": ctx.cancelled})
            if ctx.attempt == 1:
                started.set()
                await release.wait()
            return {"attempt": ctx.attempt}

        journal = await stepjournal.open_journal(url, tools=[slow])
        first = await journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        step = await first.commit_reply({"text": "working", "calls": [{"call": "c1", "tool": "slow", "args": {}}]})
        driving = asyncio.ensure_future(step.drive())
        await watchdog(started.wait(), 30, "the first body")

        second = await journal.begin_run("s", {"kind": "wake"})
        await watchdog(seen[0]["cancelled"].wait(), 30, "the cancellation of the fenced body")
        release.set()
        with pytest.raises(stepjournal.FencedError):
            await watchdog(driving, 30, "the fenced drive")
        events = [json.loads(line) for line in await journal.export_lines("s")]
        assert [e for e in events if e["type"] == "tool_result"] == [], "the late result never landed"

        assert second.plan["calls"][0]["action"] == "run"
        assert second.plan["calls"][0]["attempt"] == 2
        outcome = await second.drive()
        assert outcome is not None
        assert [a["output"] for a in outcome["answers"]] == [{"attempt": 2}]
        assert seen[1]["dispatch_id"] == seen[0]["dispatch_id"]
        assert not seen[1]["cancelled"].is_set()
        await second.end("completed")
        with pytest.raises(stepjournal.FencedError):
            await first.end("completed")
        await journal.close()

    run(main())
