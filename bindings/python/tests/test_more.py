"""The rest of the API: child-holding tools (remote_agent, companion), forks, tool timeouts with
drive_within, cut model answers and their continuation, snapshots, and retention."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List

import pytest

import stepjournal
from conftest import run, watchdog


@pytest.mark.parametrize("kind,action", [("remote_agent", "reattach"), ("companion", "reenter_child")])
def test_a_child_is_started_once_under_the_dispatch_id_and_a_new_run_goes_back_to_it(url: str, kind: str, action: str) -> None:
    started: List[Dict[str, Any]] = []
    waited: List[str] = []
    hold = asyncio.Event()

    async def start(args: Dict[str, Any], ctx: stepjournal.CallCtx) -> str:
        started.append({"topic": args["topic"], "dispatch": ctx.dispatch_id})
        return f"child-{ctx.dispatch_id}"

    async def wait(child: str, ctx: stepjournal.CallCtx) -> Dict[str, str]:
        waited.append(child)
        if len(waited) == 1:
            await hold.wait()  # the first run is cut off while its child works
        return {"report": f"done: {child}"}

    schema = {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}
    if kind == "companion":
        tool = stepjournal.define_tool("research", schema, kind="companion", replay="safe", start=start, reenter=wait)
    else:
        tool = stepjournal.define_tool("research", schema, kind="remote_agent", replay="safe", start=start, attach=wait)

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[tool])
        first = await journal.begin_run("s", {"kind": "new_turn", "message": "research it"})
        step = await first.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "research", "args": {"topic": "tides"}}]})
        cut_off = asyncio.ensure_future(step.drive())
        while not waited:
            await asyncio.sleep(0.005)
        types = [json.loads(line)["type"] for line in await journal.export_lines("s")]
        assert "child_attached" in types
        woken = await journal.begin_run("s", "wake")
        assert woken.plan["calls"][0]["action"] == action
        outcome = await watchdog(woken.drive(), 30, "the woken run")
        hold.set()
        with pytest.raises(stepjournal.FencedError):
            await cut_off
        assert outcome is not None and outcome["status"] == "committed"
        child = f"child-{started[0]['dispatch']}"
        assert outcome["answers"][0]["output"] == {"report": f"done: {child}"}
        assert [s["topic"] for s in started] == ["tides"], "started once"
        assert waited == [child, child]
        await journal.close()

    run(main())


def test_a_child_tool_needs_its_two_functions_and_no_execute() -> None:
    async def f(args: Any, ctx: stepjournal.CallCtx) -> str:
        return "c"

    with pytest.raises(TypeError, match="needs `start` and `attach`"):
        stepjournal.define_tool("r", kind="remote_agent", start=f)
    with pytest.raises(TypeError, match="needs `start` and `reenter`"):
        stepjournal.define_tool("c", kind="companion", start=f)
    with pytest.raises(TypeError, match="not `execute`"):
        stepjournal.define_tool("r", kind="remote_agent", execute=f, start=f, attach=f)


def test_a_fork_at_a_step_commit_goes_on_from_the_original_and_refusals_write_nothing(url: str) -> None:
    async def fetch(args: Dict[str, Any], ctx: stepjournal.CallCtx) -> Dict[str, Any]:
        return {"n": args.get("n")}

    tool = stepjournal.define_tool("fetch", replay="safe", execute=fetch)

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[tool])
        r = await journal.begin_run("s-1", {"kind": "new_turn", "message": "go"})
        for n in (1, 2):
            step = await r.commit_reply({"text": f"step {n}", "calls": [{"call": f"c{n}", "tool": "fetch", "args": {"n": n}}]})
            assert (await step.drive())["status"] == "committed"
        await r.commit_reply({"text": "step 3", "calls": [{"call": "c3", "tool": "fetch", "args": {"n": 3}}]})
        steps = await journal.steps("s-1")
        before = await journal.export_lines("s-1")
        written = await journal.fork("s-1", steps[0]["commit_checkpoint"], "s-2")
        assert [e["type"] for e in written] == ["forked_from", "snapshot"]
        assert await journal.export_lines("s-1") == before, "the original is untouched"
        forked = await journal.begin_run("s-2", {"kind": "new_turn", "message": "another way"})
        step = await forked.commit_reply({"text": "forked", "calls": [{"call": "c9", "tool": "fetch", "args": {}}]})
        assert (await step.drive())["status"] == "committed"
        shown = [t["text"] for t in await journal.transcript("s-2") if t["type"] in ("message", "reply")]
        assert shown == ["go", "step 1", "another way", "forked"]
        with pytest.raises(stepjournal.ValidationError, match="in flight in two sessions"):
            await journal.fork("s-1", steps[2]["checkpoint"], "s-3")
        with pytest.raises(stepjournal.ConflictError, match="already exists"):
            await journal.fork("s-1", steps[1]["commit_checkpoint"], "s-2")
        with pytest.raises(stepjournal.InvalidIdError):
            await journal.fork("s-1", steps[1]["commit_checkpoint"], "bad\nid")
        assert await journal.export_lines("s-3") == []
        await journal.close()

    run(main())


def test_a_timeout_bounds_a_hung_body_and_drive_within_goes_on_by_the_rules(url: str) -> None:
    bodies: List[int] = []

    async def hang(args: Any, ctx: stepjournal.CallCtx) -> Dict[str, bool]:
        bodies.append(ctx.attempt)
        await ctx.cancelled.wait()
        await asyncio.sleep(0.02)
        return {"late": True}

    async def flaky(args: Any, ctx: stepjournal.CallCtx) -> Dict[str, int]:
        if ctx.attempt == 1:
            await ctx.cancelled.wait()
        return {"attempt": ctx.attempt}

    tools = [
        stepjournal.define_tool("hang", replay="unsafe", timeout=0.05, execute=hang),
        stepjournal.define_tool("flaky", replay="safe", timeout=0.05, execute=flaky),
    ]
    with pytest.raises(TypeError):
        stepjournal.define_tool("x", timeout=0, execute=hang)

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=tools)
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "hang"}, {"call": "c2", "tool": "flaky"}]})
        finished, outcome = await watchdog(r.drive_within(), 60, "drive_within")
        assert finished.id != r.id, "a wake finished the step"
        assert r.status["state"] == "interrupted"
        assert outcome is not None
        by_call = {a["call"]: a for a in outcome["answers"]}
        assert (by_call["c1"]["type"], by_call["c1"]["reason"]) == ("paired", "outcome_unknown")
        assert by_call["c2"]["output"] == {"attempt": 2}
        assert bodies == [1], "the unsafe body ran once"
        await finished.end()
        await asyncio.sleep(0.05)
        events = [json.loads(line) for line in await journal.export_lines("s")]
        assert not [e for e in events if e["type"] == "tool_result" and isinstance(e["output"], dict) and e["output"].get("late")]
        await journal.close()

    run(main())


def test_a_cut_model_answer_keeps_its_partial_and_continuation_and_a_snapshot_lands_between_steps(url: str) -> None:
    async def fetch(args: Any, ctx: stepjournal.CallCtx) -> bool:
        return True

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[stepjournal.define_tool("fetch", replay="safe", execute=fetch)])
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        await r.model_aborted("I was saying", continuation="job-42")
        await r.model_aborted("no handle")
        aborted = [i for i in await r.transcript() if i["type"] == "aborted"]
        assert [(i["partial"], i.get("continuation")) for i in aborted] == [("I was saying", "job-42"), ("no handle", None)]
        with pytest.raises(stepjournal.InvalidIdError):
            await r.model_aborted("half", continuation="job\x1b[2J")
        step = await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "fetch"}]})
        with pytest.raises(stepjournal.RefusedError) as info:
            await r.snapshot()
        assert info.value.refusal == "step_open"
        with pytest.raises(stepjournal.RefusedError):
            await r.model_aborted("half")
        await step.drive()
        at = await r.snapshot()
        assert isinstance(at, int)
        events = [json.loads(line) for line in await journal.export_lines("s")]
        assert events[at]["type"] == "snapshot"
        await r.end()
        assert [i for i in await journal.transcript("s") if i["type"] == "aborted"][0]["continuation"] == "job-42"
        await journal.close()

    run(main())


def test_retain_deletes_the_sessions_that_ended_longer_ago_and_keeps_the_rest(url: str) -> None:
    ask = stepjournal.define_client_tool("ask", {"type": "object"})

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[ask])
        for session, outcome in (("done", "completed"), ("failed", "failed")):
            r = await journal.begin_run(session, {"kind": "new_turn", "message": "go"})
            await r.end(outcome)
        await journal.begin_run("open", {"kind": "new_turn", "message": "go"})
        waiting = await journal.begin_run("waiting", {"kind": "new_turn", "message": "go"})
        step = await waiting.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "ask"}]})
        assert (await step.drive())["status"] == "suspended"
        await asyncio.sleep(0.05)
        assert await journal.retain(3600) == {"deleted": [], "changed": []}
        done = await journal.retain(0.02)
        assert sorted(done["deleted"]) == ["done", "failed"]
        assert await journal.export_lines("done") == []
        assert await journal.export_lines("open") and await journal.export_lines("waiting")
        with pytest.raises(stepjournal.InvalidOptionsError):
            await journal.retain(0)
        await journal.close()

    run(main())


def test_trim_drops_a_long_session_s_history_before_a_kept_snapshot(url: str) -> None:
    async def fetch(args: Any, ctx: stepjournal.CallCtx) -> bool:
        return True

    async def main() -> None:
        tool = stepjournal.define_tool("fetch", replay="safe", execute=fetch)
        journal = await stepjournal.open_journal(url, tools=[tool], snapshot_every=2)
        for t in range(5):
            r = await journal.begin_run("s", {"kind": "new_turn", "message": f"turn {t}"})
            for n in range(3):
                step = await r.commit_reply({"text": "", "calls": [{"call": f"t{t}c{n}", "tool": "fetch"}]})
                assert (await step.drive())["status"] == "committed"
            await r.end()
        done = await journal.trim("s", keep_turns=2)
        assert done["trimmed"] and done["turns"] == 3, done
        events = [json.loads(line) for line in await journal.export_lines("s")]
        assert 0 < events[0]["seq"] <= done["before"]
        assert events[-1]["type"] == "trimmed"
        shown = await journal.transcript("s")
        assert shown[0] == {"type": "trimmed", "seq": done["at"], "turns": 3}
        assert (await journal.trim("s", keep_turns=2))["trimmed"] is False
        live = await journal.begin_run("s", {"kind": "new_turn", "message": "live"})
        with pytest.raises(stepjournal.LeaseHeldError):
            await journal.trim("s", keep_turns=0)
        with pytest.raises(TypeError):
            await journal.trim("s", keep_turns=-1)
        assert (await live.trim(keep_turns=0))["trimmed"] is True
        await live.end()
        await journal.close()

    run(main())
