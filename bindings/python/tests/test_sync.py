"""The synchronous facade: the same journal from code that is not async, with plain and async
tool bodies, recovery, and errors."""

from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest

import stepjournal
import stepjournal.sync


def test_the_sync_facade_commits_drives_and_recovers(url: str) -> None:
    threads: List[Any] = []

    @stepjournal.tool(replay="safe")
    def plain(args: Dict[str, Any], ctx: stepjournal.CallCtx) -> Dict[str, Any]:
        threads.append(threading.current_thread().name)
        return {"plain": args["x"], "attempt": ctx.attempt}

    @stepjournal.tool(replay="safe")
    async def coro(args: Dict[str, Any], ctx: stepjournal.CallCtx) -> int:
        await ctx.output("working")
        return 2

    with stepjournal.sync.open_journal(url, tools=[plain, coro]) as journal:
        assert journal.recover_all().recovered == []
        run = journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        step = run.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "plain", "args": {"x": 1}}, {"call": "c2", "tool": "coro"}]})
        outcome = step.drive()
        assert {a["call"]: a["output"] for a in outcome["answers"]} == {"c1": {"plain": 1, "attempt": 1}, "c2": 2}
        assert threads == ["stepjournal-sync"]
        run.end()
        assert run.status["state"] == "ended"
        with pytest.raises(stepjournal.ValidationError):
            journal.begin_run("s2", "retry")
        crashed = journal.begin_run("crashed", {"kind": "new_turn", "message": "go"})
        crashed.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "plain", "args": {"x": 3}}]})
        assert journal.close() == ["crashed"]

    with stepjournal.sync.open_journal(url, tools=[plain, coro]) as journal:
        report = journal.recover_all()
        assert [r.session for r in report.recovered] == ["crashed"]
        recovered = report.recovered[0]
        assert recovered.outcome is not None and recovered.outcome["answers"][0]["output"] == {"plain": 3, "attempt": 1}
        recovered.run.end()
        assert [json_type(line) for line in journal.export_lines("crashed")][-1] == "run_ended"


def json_type(line: str) -> str:
    import json

    return str(json.loads(line)["type"])


def test_a_body_calling_the_sync_facade_is_refused_not_deadlocked(url: str) -> None:
    holder: List[stepjournal.sync.Journal] = []

    @stepjournal.tool(replay="safe")
    def reentrant(args: Any, ctx: stepjournal.CallCtx) -> Any:
        return holder[0].sessions_to_recover()

    with stepjournal.sync.open_journal(url, tools=[reentrant]) as journal:
        holder.append(journal)
        run = journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        outcome = run.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "reentrant"}]}).drive()
        answer = outcome["answers"][0]
        assert answer["isError"] is True and "use the async API" in answer["output"]["error"]


def test_opening_a_bad_url_raises_and_leaves_no_thread_behind() -> None:
    before = threading.active_count()
    with pytest.raises(stepjournal.InvalidUrlError):
        stepjournal.sync.open_journal("mysql://x")
    assert threading.active_count() == before
