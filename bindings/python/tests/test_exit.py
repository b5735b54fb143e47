"""A process using the package exits cleanly however it leaves the engine's work.

Regression: the recovering process of the crash demo (release build) aborted at exit with
"Fatal Python error: PyGILState_Release: thread state ... must be current when releasing": a
thread of the runtime that was settling the last awaited future inside Python when the
interpreter began to finalize was cut off when it next needed the GIL. The package's atexit hook
now stops the runtime's threads entering Python and waits for those inside."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    import stepjournal

    @stepjournal.tool(replay="safe")
    async def work(args, ctx):
        await ctx.output("x")
        return args

    async def one(journal, i):
        run = await journal.begin_run(f"s{i}", {"kind": "new_turn", "message": "go"})
        step = await run.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "work", "args": {"i": i}}]})
        await step.drive()
        await run.end()

    async def main(url, leave):
        journal = await stepjournal.open_journal(url, tools=[work])
        if leave == "closed":
            await asyncio.gather(*(one(journal, i) for i in range(64)))
            await journal.close()
        else:
            # Leaves with appends and bodies in flight: asyncio.run cancels the tasks, and the
            # engine's futures go on settling on a loop that is gone while the interpreter exits.
            for i in range(64):
                asyncio.ensure_future(one(journal, i))
            await asyncio.sleep(0.005)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_processes_exit_cleanly_after_their_last_await_and_with_work_in_flight(tmp_path: Path) -> None:
    script = tmp_path / "exit.py"
    script.write_text(SCRIPT)
    for i in range(12):
        leave = "closed" if i % 2 == 0 else "in-flight"
        done = subprocess.run(
            [sys.executable, str(script), f"file:{tmp_path / f'j{i}'}", leave],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{leave}: {done.returncode}\n{done.stderr[-2000:]}"
        assert "Fatal Python error" not in done.stderr, done.stderr[-2000:]


def test_a_body_whose_event_loop_closed_before_it_ran_lets_go_of_the_run(url: str) -> None:
    """The drive's bodies are handed to the loop that drove it; when that loop is closed before it
    starts them, nothing will: within a couple of seconds the run is let go as after a crash, and
    a wake in another loop decides the call by the rules."""
    import asyncio
    import json
    import time

    import stepjournal

    @stepjournal.tool(replay="unsafe")
    async def send(args: object, ctx: stepjournal.CallCtx) -> str:
        return "sent"

    first = asyncio.new_event_loop()

    async def start() -> "tuple[stepjournal.Journal, stepjournal.Run, object]":
        journal = await stepjournal.open_journal(url, tools=[send])
        run = await journal.begin_run("s", {"kind": "new_turn", "message": "go"})
        step = await run.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "send"}]})
        return journal, run, step._native.drive()  # the drive's future, never awaited

    journal, run, _pending = first.run_until_complete(start())
    first.close()
    deadline = time.monotonic() + 20
    while run.status["state"] == "open" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.status["state"] == "interrupted", run.status

    async def recover() -> None:
        woken = await journal.begin_run("s", "wake")
        events = [json.loads(line)["type"] for line in await journal.export_lines("s")]
        outcome = await woken.drive()
        assert outcome is not None
        # The body may or may not have been started before the loop closed: either way it was
        # never run, and the call is decided by the rules without running it twice.
        answer = outcome["answers"][0]
        if "attempt_started" in events:
            assert (answer["type"], answer["reason"]) == ("paired", "outcome_unknown")
        else:
            assert answer["type"] == "tool_result"
        await woken.end()
        await journal.close()

    asyncio.run(recover())
