"""The package's API end to end: tools (dict schemas, pydantic models, the decorator), the
context, results, client calls and approvals, entries, recovery, transcripts, and the stores."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, Dict, List

import pytest

import stepjournal
from conftest import run

pydantic = pytest.importorskip("pydantic") if os.environ.get("CI") != "true" else __import__("pydantic")


async def echo_body(args: Any, ctx: stepjournal.CallCtx) -> Any:
    return args


echo = stepjournal.define_tool("echo", {"type": "object"}, replay="safe", execute=echo_body)


def test_the_readme_flow_commits_the_reply_drives_the_step_and_records_each_event(url: str) -> None:
    @stepjournal.tool(
        replay="safe",
        input_schema={"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}}, "required": ["key", "value"]},
    )
    async def set_preference(args: Dict[str, str], ctx: stepjournal.CallCtx) -> Dict[str, Any]:
        await ctx.output("saving")
        return {"saved": f"{ctx.session_id}/{args['key']}={args['value']}", "key": ctx.idempotency_key}

    async def main() -> None:
        async with await stepjournal.open_journal(url, tools=[set_preference]) as journal:
            report = await journal.recover_all()
            assert report.recovered == [] and report.failed == []
            r = await journal.begin_run("user-42", {"kind": "new_turn", "message": "window seat please"})
            step = await r.commit_reply(
                {"text": "Saving it.", "calls": [{"call": "c1", "tool": "set_preference", "args": {"key": "seat", "value": "window"}}]}
            )
            assert step.open_calls() == ["c1"] and step.is_open
            outcome = await step.drive()
            await r.end("completed")
            assert outcome["status"] == "committed"
            answer = outcome["answers"][0]
            assert answer["output"]["saved"] == "user-42/seat=window"
            dispatch = [json.loads(line) for line in await journal.export_lines("user-42") if '"dispatch_minted"' in line][0]["dispatch"]
            assert answer["output"]["key"] == f"user-42:{dispatch}"
            types = [json.loads(line)["type"] for line in await journal.export_lines("user-42")]
            assert types == [
                "run_started", "message", "reply_committed", "dispatch_minted", "attempt_started",
                "output_chunk", "tool_result", "step_commit", "run_ended",
            ]
            assert r.status["state"] == "ended"
            assert journal.metrics()["appends"] > 0

    run(main())


def test_a_pydantic_model_is_the_schema_the_body_gets_the_model_and_a_returned_model_is_recorded(url: str) -> None:
    class Seat(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        row: int
        letter: str

        @pydantic.field_validator("letter")  # type: ignore[misc]
        @classmethod
        def one_letter(cls, v: str) -> str:
            if len(v) != 1:
                raise ValueError("one letter")
            return v

    got: List[Any] = []

    @stepjournal.tool(replay="safe")
    async def reserve(args: Seat, ctx: stepjournal.CallCtx) -> Seat:
        got.append(args)
        return Seat(row=args.row + 1, letter=args.letter)

    async def main() -> None:
        assert reserve.model is Seat and reserve.input_schema["required"] == ["row", "letter"]
        journal = await stepjournal.open_journal(url, tools=[reserve])
        assert journal.tools_json()["reserve"]["input_schema"]["properties"]["row"]["type"] == "integer"
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "14C"})
        # The JSON Schema refuses a row that is not an integer (the engine's check) ...
        with pytest.raises(stepjournal.RefusedError) as info:
            await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "reserve", "args": {"row": "x", "letter": "C"}}]})
        assert info.value.refusal == "invalid_arguments"
        # ... and the model's validator what JSON Schema cannot say, before the reply is saved.
        with pytest.raises(stepjournal.RefusedError, match="one letter") as info:
            await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "reserve", "args": {"row": 14, "letter": "CC"}}]})
        assert info.value.refusal == "invalid_arguments"
        assert not any('"reply_committed"' in line for line in await journal.export_lines("s"))
        step = await r.commit_reply(text="", calls=[{"call": "c1", "tool": "reserve", "args": {"row": 14, "letter": "C"}}])
        outcome = await step.drive()
        assert isinstance(got[0], Seat) and got[0].row == 14
        assert outcome["answers"][0]["output"] == {"row": 15, "letter": "C"}
        await journal.close()

    run(main())


def test_a_body_that_raises_is_an_error_result_and_one_that_returns_none_records_null(url: str) -> None:
    async def broken(args: Any, ctx: stepjournal.CallCtx) -> None:
        raise RuntimeError("the printer is on fire")

    async def quiet(args: Any, ctx: stepjournal.CallCtx) -> None:
        return None

    tools = [
        stepjournal.define_tool("broken", execute=broken),
        stepjournal.define_tool("quiet", replay="safe", execute=quiet),
    ]

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=tools)
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        step = await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "broken"}, {"call": "c2", "tool": "quiet"}]})
        outcome = await step.drive()
        by_call = {a["call"]: a for a in outcome["answers"]}
        assert by_call["c1"]["isError"] is True
        assert by_call["c1"]["output"] == {"error": "the printer is on fire"}
        assert (by_call["c2"]["output"], by_call["c2"]["isError"]) == (None, False)
        await journal.close()

    run(main())


@pytest.mark.parametrize(
    "value,why",
    [
        ({"ratio": float("nan")}, r"\$\.ratio is nan"),
        ({"a": {1, 2}}, r"\$\.a is a set"),
        ({"text": "ok \ud800"}, r"lone surrogate"),
        ({1: "a"}, r"key that is not a str"),
        ([1, object()], r"\$\[1\] is a object"),
    ],
)
def test_a_result_that_is_not_json_lets_go_of_the_run_and_the_wake_answers_outcome_unknown(url: str, value: Any, why: str) -> None:
    async def send(args: Any, ctx: stepjournal.CallCtx) -> Any:
        return value

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[stepjournal.define_tool("send", execute=send)])
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "send it"})
        step = await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "send"}]})
        with pytest.raises(stepjournal.InterruptedError):
            await step.drive()
        status = r.status
        assert status["state"] == "interrupted"
        import re

        assert re.search(why, status["why"]), status["why"]
        types = [json.loads(line)["type"] for line in await journal.export_lines("s")]
        assert "tool_result" not in types
        woken = await journal.begin_run("s", "wake")
        outcome = await woken.drive()
        assert outcome is not None
        assert (outcome["answers"][0]["type"], outcome["answers"][0]["reason"]) == ("paired", "outcome_unknown")
        await woken.end()
        await journal.close()

    run(main())


def test_a_client_call_suspends_the_step_until_the_client_answers(url: str) -> None:
    ask = stepjournal.define_client_tool("ask_user", {"type": "object"})

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[ask, echo])
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "book it"})
        step = await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "ask_user", "args": {"q": "which?"}}, {"call": "c2", "tool": "echo", "args": {"x": 1}}]})
        outcome = await step.drive()
        assert outcome["status"] == "suspended"
        report = await journal.recover_all()
        assert [w["session"] for w in report.waiting] == ["s"] and report.waiting[0]["calls"] == ["c1"]
        answered = await step.answer_client("c1", {"choice": "14C"})
        done = await answered.drive()
        assert done is not None and done["status"] == "committed"
        outputs = {a["call"]: a["output"] for a in done["answers"]}
        assert outputs == {"c1": {"choice": "14C"}, "c2": {"x": 1}}
        await answered.end()
        with pytest.raises(ValueError):
            await journal.answer_client("s", "c1", float("nan"))  # not JSON: refused before the engine
        await journal.close()

    run(main())


def test_an_approval_call_runs_once_approved_and_a_denied_one_never_runs(url: str) -> None:
    ran: List[str] = []

    async def pay(args: Any, ctx: stepjournal.CallCtx) -> str:
        ran.append(ctx.call_id)
        return "paid"

    tool = stepjournal.define_tool("pay", kind="approval", execute=pay)

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[tool])
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "pay both"})
        step = await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "pay"}, {"call": "c2", "tool": "pay"}]})
        assert (await step.drive())["status"] == "suspended"
        await step.decide_approval("c1", True)
        r2 = await journal.decide_approval("s", "c2", False)
        done = await r2.drive()
        assert done is not None and done["status"] == "committed"
        assert ran == ["c1"]
        by_call = {a["call"]: a for a in done["answers"]}
        assert by_call["c1"]["output"] == "paid"
        assert by_call["c2"]["type"] == "approval_denied"
        await journal.close()

    run(main())


def test_recover_all_wakes_a_crashed_session_and_hands_its_run_to_on_recovered(url: str) -> None:
    attempts: List[int] = []

    @stepjournal.tool(replay="safe")
    async def work(args: Any, ctx: stepjournal.CallCtx) -> int:
        attempts.append(ctx.attempt)
        return ctx.attempt

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[work])
        r = await journal.begin_run("crashed", {"kind": "new_turn", "message": "go"})
        await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "work"}]})
        # The process "dies" here: the journal is closed with the step open and no body run.
        assert await journal.close() == ["crashed"]
        journal = await stepjournal.open_journal(url, tools=[work])
        assert await journal.sessions_to_recover() == ["crashed"]
        handed: List[Any] = []

        async def on_recovered(run: stepjournal.Run, outcome: Any) -> None:
            handed.append((run.session_id, outcome["status"]))
            await run.end("completed")

        report = await journal.recover_all(on_recovered=on_recovered)
        assert handed == [("crashed", "committed")]
        assert [s.session for s in report.recovered] == ["crashed"] and report.failed == []
        assert attempts == [1]
        assert await journal.sessions_to_recover() == []

        async def raises(run: stepjournal.Run, outcome: Any) -> None:
            raise ValueError("the runtime's callback failed")

        r = await journal.begin_run("again", {"kind": "new_turn", "message": "go"})
        await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "work"}]})
        await journal.close()
        journal = await stepjournal.open_journal(url, tools=[work])
        report = await journal.recover_all(on_recovered=raises)
        assert [(f.session, type(f.error)) for f in report.failed] == [("again", ValueError)]
        assert report.failed[0].run is not None
        await journal.close()

    run(main())


def test_entries_transcripts_steps_stop_and_retry(url: str) -> None:
    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[echo])
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        first = await r.commit_reply({"text": "one", "calls": [{"call": "c1", "tool": "echo", "args": {"a": 1}}]})
        done = await first.drive()
        second = await r.commit_reply({"text": "two", "calls": [{"call": "c2", "tool": "echo", "args": {}}]})
        await r.fail("the model timed out")
        steps = await journal.steps("s")
        assert steps == [
            {"step": first.number, "checkpoint": first.checkpoint, "committed": True, "commit_checkpoint": done["checkpoint"]},
            {"step": second.number, "checkpoint": second.checkpoint, "committed": False, "commit_checkpoint": None},
        ]
        retried = await journal.begin_run("s", "retry")
        assert retried.plan["error"] is None
        assert [(c["call"], c["action"]) for c in retried.plan["calls"]] == [("c2", "run")]
        await retried.drive()
        transcript = await journal.transcript("s")
        assert transcript[0] == {**transcript[0], "type": "message", "text": "go"}
        assert any(item.get("output") == {"a": 1} for item in transcript)
        assert await retried.transcript(since=10**9) == []
        stopped = await journal.stop("s")
        assert stopped["error"] is None
        with pytest.raises(stepjournal.FencedError):
            await retried.end()
        assert await journal.steps("nobody") == []
        await journal.close()

    run(main())


def test_bodies_run_on_the_callers_loop_and_appends_leave_it_free(url: str) -> None:
    """200 sessions driven at once: every body runs on the loop's thread, and a ticker on the same
    loop keeps ticking while the engine appends (no append holds the GIL or the loop)."""
    import threading

    threads: List[int] = []

    @stepjournal.tool(replay="safe")
    async def note(args: Any, ctx: stepjournal.CallCtx) -> int:
        threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return int(args["n"])

    async def one(journal: stepjournal.Journal, n: int) -> int:
        r = await journal.begin_run(f"s{n}", {"kind": "new_turn", "message": "go"})
        step = await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "note", "args": {"n": n}}]})
        outcome = await step.drive()
        await r.end()
        return int(outcome["answers"][0]["output"])

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[note])
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        ticking = asyncio.ensure_future(ticker())
        started = time.monotonic()
        results = await asyncio.gather(*(one(journal, n) for n in range(200)))
        elapsed = time.monotonic() - started
        stop.set()
        await ticking
        assert results == list(range(200))
        assert set(threads) == {threading.get_ident()}
        # The loop ran the ticker throughout: at least one tick per 20 ms of the run.
        assert ticks >= max(1, int(elapsed / 0.02)), (ticks, elapsed)
        assert journal.metrics()["groups"] < journal.metrics()["appends"], "concurrent appends shared syncs"
        await journal.close()

    run(main())


def test_a_sqlite_journal_works_the_same(tmp_path: Any) -> None:
    async def main() -> None:
        journal = await stepjournal.open_journal(f"sqlite:{tmp_path / 'j.db'}", tools=[echo])
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        step = await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "echo", "args": {"a": 1}}]})
        assert (await step.drive())["answers"][0]["output"] == {"a": 1}
        await r.end()
        await journal.close()

    run(main())


@pytest.mark.skipif(not os.environ.get("STEPJOURNAL_PG_URL"), reason="STEPJOURNAL_PG_URL is not set (a PostgreSQL to write to)")
def test_a_postgres_journal_works_the_same_and_recovers_across_owners() -> None:
    pg = os.environ["STEPJOURNAL_PG_URL"]
    session = f"py-{os.getpid()}-{time.time_ns()}"
    attempts: List[int] = []

    @stepjournal.tool(replay="safe")
    async def work(args: Any, ctx: stepjournal.CallCtx) -> int:
        attempts.append(ctx.attempt)
        return ctx.attempt

    async def main() -> None:
        journal = await stepjournal.open_journal(pg, tools=[work], owner="py-a", lease_ttl=0.2)
        r = await journal.begin_run(session, {"kind": "new_turn", "message": "go"})
        await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "work"}]})
        await journal.close()
        await asyncio.sleep(0.3)
        other = await stepjournal.open_journal(pg, tools=[work], owner="py-b")
        woken = await other.begin_run(session, "wake")
        assert woken.plan["calls"][0]["action"] == "run"
        outcome = await woken.drive()
        assert outcome is not None and outcome["answers"][0]["output"] == 1
        await woken.end()
        types = [json.loads(line)["type"] for line in await other.export_lines(session)]
        assert types.count("run_started") == 2 and types[-1] == "run_ended"
        await other.close()

    run(main())
