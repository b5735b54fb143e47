"""One journal, three languages: a journal Python wrote is read by the Rust CLI (show, verify,
plan) line for line; a session the Rust CLI's demo left crashed is recovered from Python, its
events unchanged; and a session written by one of Python and Node is recovered by the other,
the export lines byte-identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List

import pytest

import stepjournal
from conftest import WORKSPACE, lines, run, run_cli

NODE_PACKAGE = WORKSPACE / "bindings" / "node"


def test_the_rust_cli_reads_a_journal_written_from_python_show_verify_plan(tmp_path: Path) -> None:
    url = f"file:{tmp_path / 'j'}"

    @stepjournal.tool(replay="safe", input_schema={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]})
    async def set_preference(args: Dict[str, str], ctx: stepjournal.CallCtx) -> Dict[str, str]:
        return {"saved": args["key"], "note": "naïve ✓"}

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[set_preference])
        r = await journal.begin_run("done", {"kind": "new_turn", "message": "aisle please ✈"})
        step = await r.commit_reply({"text": "Saving.", "calls": [{"call": "c1", "tool": "set_preference", "args": {"key": "seat"}}]})
        await step.drive()
        await r.end("completed")
        o = await journal.begin_run("open", {"kind": "new_turn", "message": "again"})
        await o.commit_reply({"text": "Saving.", "calls": [{"call": "c1", "tool": "set_preference", "args": {"key": "tz"}}]})

        verify = run_cli("verify", url)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        show = run_cli("show", url, "done")
        assert show.returncode == 0, show.stderr
        assert "set_preference" in show.stdout
        for session in ["done", "open"]:
            shown = run_cli("show", url, session, "--json")
            assert shown.returncode == 0, shown.stderr
            assert lines(shown.stdout) == await journal.export_lines(session), f"{session}: the same lines"
        tools = tmp_path / "tools.json"
        tools.write_text(json.dumps(journal.tools_json()))
        planned = run_cli("plan", url, "open", "--entry", "wake", "--tools", str(tools), "--json")
        assert planned.returncode == 0, planned.stderr
        from_cli = json.loads(lines(planned.stdout)[-1])
        woken = await journal.begin_run("open", "wake")

        def strip(calls: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
            return [{k: c.get(k) for k in ("call", "action", "rule", "attempt", "dispatch")} for c in calls]

        assert strip(from_cli["calls"]) == strip(woken.plan["calls"])
        assert woken.plan["calls"][0]["action"] == "run"
        await journal.close()

    run(main())


def test_a_session_the_rust_demo_left_crashed_recovers_from_python_byte_for_byte_the_same_events(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    url = f"file:{directory}"
    demo = run_cli("demo", "--dir", str(directory), "--no-recover")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    ran: List[Dict[str, Any]] = []

    def tool(name: str, replay: stepjournal.Replay) -> stepjournal.Tool:
        async def body(args: Any, ctx: stepjournal.CallCtx) -> Dict[str, str]:
            ran.append({"name": name, "attempt": ctx.attempt, "dispatch_id": ctx.dispatch_id})
            return {"done": name}

        return stepjournal.define_tool(name, {"type": "object"}, replay=replay, execute=body)

    async def main() -> None:
        journal = await stepjournal.open_journal(
            url,
            tools=[tool("search_flights", "safe"), tool("set_preference", "safe"), tool("send_email", "unsafe"), tool("archive_email", "safe")],
        )
        sessions = await journal.sessions_to_recover()
        assert len(sessions) == 1, sessions
        session = sessions[0]
        before = lines(run_cli("show", url, session, "--json").stdout)
        assert await journal.export_lines(session) == before, "Python reads the bytes Rust wrote"
        r = await journal.begin_run(session, {"kind": "wake"})
        action = {c["call"]: c for c in r.plan["calls"]}
        assert action["c1"]["action"] == "keep"
        assert (action["c2"]["action"], action["c2"]["attempt"]) == ("run", 2)
        assert (action["c3"]["action"], action["c3"]["reason"]) == ("pair", "outcome_unknown")
        outcome = await r.drive()
        await r.end("completed")
        assert outcome is not None and outcome["status"] == "committed"
        assert [(x["name"], x["attempt"]) for x in ran] == [("set_preference", 2)]
        c2 = next(json.loads(line) for line in before if '"dispatch_minted"' in line and json.loads(line)["call"] == "c2")
        assert ran[0]["dispatch_id"] == c2["dispatch"]
        after = await journal.export_lines(session)
        assert after[: len(before)] == before, "the Rust-written events are unchanged"
        assert len(after) > len(before)
        await journal.close()
        verify = run_cli("verify", url)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert lines(run_cli("show", url, session, "--json").stdout) == after

    run(main())


def node_module_built() -> bool:
    return any(p.suffix == ".node" for p in NODE_PACKAGE.glob("*.node"))


# The Node side: writes a crashed session (`write`), or recovers every session with a wake and
# prints what it ran (`recover`); both print the session's export lines as JSON at the end.
NODE_SCRIPT = textwrap.dedent(
    """
    import { defineTool, openJournal } from %(index)s;
    const [mode, url] = process.argv.slice(2);
    const ran = [];
    const tool = (name, replay) => defineTool({ name, replay, inputSchema: { type: 'object' },
      execute: async (args, ctx) => { ran.push({ name, attempt: ctx.attempt, dispatchId: ctx.dispatchId }); return { by: 'node', name }; } });
    const journal = await openJournal(url, { tools: [tool('reserve', 'safe'), tool('charge', 'unsafe')] });
    let session = 'from-node';
    if (mode === 'write') {
      const run = await journal.beginRun(session, { kind: 'new_turn', message: 'héllo from node' });
      await run.commitReply({ text: 'two calls', calls: [{ call: 'c1', tool: 'reserve', args: { seat: '14C' } }, { call: 'c2', tool: 'charge', args: { amount: 1.5 } }] });
    } else {
      [session] = await journal.sessionsToRecover();
      const run = await journal.beginRun(session, { kind: 'wake' });
      await run.drive();
      await run.end('completed');
    }
    const lines = await journal.exportLines(session);
    await journal.close();
    console.log(JSON.stringify({ session, ran, lines }));
    """
)


def node(mode: str, url: str, tmp_path: Path) -> Dict[str, Any]:
    script = tmp_path / f"node-{mode}.mjs"
    script.write_text(NODE_SCRIPT % {"index": json.dumps((NODE_PACKAGE / "index.js").as_uri())})
    done = subprocess.run(["node", str(script), mode, url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    result: Dict[str, Any] = json.loads(done.stdout.strip().split("\n")[-1])
    return result


needs_node = pytest.mark.skipif(
    not node_module_built() and os.environ.get("CI") != "true",
    reason="the Node package's native module is not built (cd bindings/node && npm ci && npm run build)",
)


def py_tools(ran: List[Dict[str, Any]]) -> List[stepjournal.Tool]:
    def tool(name: str, replay: stepjournal.Replay) -> stepjournal.Tool:
        async def body(args: Any, ctx: stepjournal.CallCtx) -> Dict[str, str]:
            ran.append({"name": name, "attempt": ctx.attempt, "dispatch_id": ctx.dispatch_id})
            return {"by": "python", "name": name}

        return stepjournal.define_tool(name, {"type": "object"}, replay=replay, execute=body)

    return [tool("reserve", "safe"), tool("charge", "unsafe")]


@needs_node
def test_a_session_python_wrote_is_recovered_by_node_and_read_back_byte_identical(tmp_path: Path) -> None:
    url = f"file:{tmp_path / 'j'}"

    async def write() -> None:
        journal = await stepjournal.open_journal(url, tools=py_tools([]))
        r = await journal.begin_run("from-python", {"kind": "new_turn", "message": "héllo from python"})
        await r.commit_reply({"text": "two calls", "calls": [{"call": "c1", "tool": "reserve", "args": {"seat": "14C"}}, {"call": "c2", "tool": "charge", "args": {"amount": 1.5}}]})
        await journal.close()

    run(write())
    # A crash mid-body: the bodies were started and never finished (the crash demo's shape).
    crash = subprocess.run(
        [sys.executable, "-c", CRASHER, url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crash.returncode == -9, crash.stdout + crash.stderr

    async def python_lines() -> List[str]:
        journal = await stepjournal.open_journal(url)
        got = await journal.export_lines("from-python")
        await journal.close()
        return got

    before = run(python_lines())
    recovered = node("recover", url, tmp_path)
    assert recovered["session"] == "from-python"
    assert recovered["lines"][: len(before)] == before, "Node reads the bytes Python wrote"
    assert [(x["name"], x["attempt"]) for x in recovered["ran"]] == [("reserve", 2)]
    events = [json.loads(line) for line in recovered["lines"]]
    paired = [e for e in events if e["type"] == "paired"]
    assert [(e["call"], e["reason"]) for e in paired] == [("c2", "outcome_unknown")]
    after = run(python_lines())
    assert after == recovered["lines"], "Python reads back what Node wrote, byte for byte"
    assert lines(run_cli("show", url, "from-python", "--json").stdout) == after


# Wakes session `from-python` and drives it with bodies that hang until SIGKILL kills the process.
CRASHER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    import stepjournal

    async def hang(args, ctx):
        hang.started += 1
        if hang.started == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        await asyncio.Event().wait()
    hang.started = 0

    async def main():
        tools = [stepjournal.define_tool("reserve", {"type": "object"}, replay="safe", execute=hang),
                 stepjournal.define_tool("charge", {"type": "object"}, replay="unsafe", execute=hang)]
        journal = await stepjournal.open_journal(sys.argv[1], tools=tools)
        run = await journal.begin_run("from-python", "wake")
        await run.drive()

    asyncio.run(main())
    """
)


@needs_node
def test_a_session_node_wrote_is_recovered_by_python_and_read_back_byte_identical(tmp_path: Path) -> None:
    url = f"file:{tmp_path / 'j'}"
    written = node("write", url, tmp_path)
    assert written["session"] == "from-node"
    ran: List[Dict[str, Any]] = []

    async def main() -> List[str]:
        journal = await stepjournal.open_journal(url, tools=py_tools(ran))
        assert await journal.export_lines("from-node") == written["lines"], "Python reads the bytes Node wrote"
        assert await journal.sessions_to_recover() == ["from-node"]
        r = await journal.begin_run("from-node", "wake")
        assert [c["action"] for c in r.plan["calls"]] == ["run", "run"]
        outcome = await r.drive()
        assert outcome is not None and outcome["status"] == "committed"
        await r.end()
        got = await journal.export_lines("from-node")
        await journal.close()
        return got

    after = run(main())
    assert after[: len(written["lines"])] == written["lines"]
    assert sorted((x["name"], x["attempt"]) for x in ran) == [("charge", 1), ("reserve", 1)]
    assert lines(run_cli("show", url, "from-node", "--json").stdout) == after
