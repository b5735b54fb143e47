"""The crash demo: a child Python process runs a session with a safe and an unsafe tool and is
killed with SIGKILL while both bodies run; a new process recovers the session by the rules. The
safe call runs again as attempt 2 under the same dispatch id; the unsafe one is answered
``outcome_unknown``.

    python examples/crash_demo.py [DIR]     runs the demo (a fresh scratch directory by default)

It prints each step and, last, one JSON line with what it found; it exits non-zero if recovery
did not go by the rules.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, Dict, List, Optional

import stepjournal

SESSION = "user-42"


def report(what: Dict[str, Any]) -> None:
    """One JSON line on stdout: the parent learns the dispatch id and attempt of each body that
    ran, in whichever process ran it."""
    print(json.dumps(what), flush=True)


def tools(wait: bool) -> List[stepjournal.Tool]:
    """The tools. In the crashing child the bodies wait (for the SIGKILL); after it they finish."""

    async def hold(ctx: stepjournal.CallCtx) -> None:
        if wait:
            await ctx.cancelled.wait()

    @stepjournal.tool(
        replay="safe",
        input_schema={"type": "object", "properties": {"seat": {"type": "string"}}, "required": ["seat"]},
    )
    async def reserve_seat(args: Dict[str, Any], ctx: stepjournal.CallCtx) -> Dict[str, Any]:
        report({"started": "reserve_seat", "call": ctx.call_id, "dispatch_id": ctx.dispatch_id, "attempt": ctx.attempt})
        await ctx.output(f"holding seat {args['seat']}")
        await hold(ctx)
        return {"seat": args["seat"], "held": True, "key": ctx.idempotency_key}

    @stepjournal.tool(
        replay="unsafe",
        input_schema={"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
    )
    async def charge_card(args: Dict[str, Any], ctx: stepjournal.CallCtx) -> Dict[str, Any]:
        report({"started": "charge_card", "call": ctx.call_id, "dispatch_id": ctx.dispatch_id, "attempt": ctx.attempt})
        await hold(ctx)
        return {"charged": args["amount"]}

    return [reserve_seat, charge_card]


async def child(directory: str) -> None:
    """The crashing child: begins the turn, commits the reply, drives the step; the bodies wait."""
    journal = await stepjournal.open_journal(f"file:{directory}", tools=tools(True))
    run = await journal.begin_run(SESSION, {"kind": "new_turn", "message": "book 14C and pay"})
    step = await run.commit_reply(
        {
            "text": "Reserving the seat and paying.",
            "calls": [
                {"call": "c1", "tool": "reserve_seat", "args": {"seat": "14C"}},
                {"call": "c2", "tool": "charge_card", "args": {"amount": 120}},
            ],
        }
    )
    await step.drive()


async def recover(directory: str) -> None:
    """The new process: recovers every session left open."""
    journal = await stepjournal.open_journal(f"file:{directory}", tools=tools(False))
    for session in await journal.sessions_to_recover():
        run = await journal.begin_run(session, {"kind": "wake"})
        plan = [{k: c.get(k) for k in ("call", "action", "rule", "reason")} for c in run.plan["calls"]]
        report({"session": session, "plan": plan})
        outcome = await run.drive()
        report({"session": session, "outcome": outcome})
        await run.end("completed")
    await journal.close()


def start(mode: str, directory: str) -> "subprocess.Popen[str]":
    return subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), mode, directory],
        stdout=subprocess.PIPE,
        text=True,
    )


def demo(directory: str) -> bool:
    print(f"1. A child process runs session {SESSION} on file:{directory}: reserve_seat (safe) and charge_card (unsafe).")
    started: Dict[str, Dict[str, Any]] = {}
    crashing = start("child", directory)
    timer = threading.Timer(60, crashing.kill)
    timer.start()
    assert crashing.stdout is not None
    for line in crashing.stdout:
        value = json.loads(line)
        if "started" in value:
            started[value["call"]] = value
        if len(started) == 2:
            crashing.send_signal(signal.SIGKILL)
            break
    crashing.wait()
    timer.cancel()
    killed = -crashing.returncode == signal.SIGKILL
    print(f"2. With both bodies running, the child was killed by {'SIGKILL' if killed else crashing.returncode}.")
    for s in started.values():
        print(f"   {s['call']} {s['started']}: dispatch {s['dispatch_id']}, attempt {s['attempt']}")

    print("3. A new process recovers the session with a wake:")
    recovering = start("recover", directory)
    out, _ = recovering.communicate(timeout=120)
    recovered = [json.loads(line) for line in out.splitlines() if line.strip()]
    plan = next((line["plan"] for line in recovered if "plan" in line), [])
    for c in plan:
        reason = f" ({c['reason']})" if c.get("reason") else ""
        print(f"   {c['call']}: {c['action']}{reason} by rule {c['rule']}")
    rerun: Optional[Dict[str, Any]] = next((line for line in recovered if line.get("started") == "reserve_seat"), None)
    unsafe_ran = any(line.get("started") == "charge_card" for line in recovered)
    outcome = next((line["outcome"] for line in recovered if "outcome" in line), None) or {}

    def answer(call: str) -> Optional[Dict[str, Any]]:
        return next((a for a in outcome.get("answers", []) if a.get("call") == call), None)

    before = started.get("c1")
    found = {
        "killed": "SIGKILL" if killed else crashing.returncode,
        "safe": {
            "before": before and {"dispatch_id": before["dispatch_id"], "attempt": before["attempt"]},
            "after": rerun and {"dispatch_id": rerun["dispatch_id"], "attempt": rerun["attempt"]},
        },
        "unsafe": {"ran_again": unsafe_ran, "answer": answer("c2")},
        "recovery_exit": recovering.returncode,
    }
    c1, c2 = answer("c1"), answer("c2")
    ok = (
        killed
        and recovering.returncode == 0
        and before is not None
        and before["attempt"] == 1
        and rerun is not None
        and rerun["attempt"] == 2
        and rerun["dispatch_id"] == before["dispatch_id"]
        and not unsafe_ran
        and c2 is not None
        and c2.get("type") == "paired"
        and c2.get("reason") == "outcome_unknown"
        and c1 is not None
        and c1.get("type") == "tool_result"
    )
    if rerun:
        print(f"   c1 ran again: attempt {rerun['attempt']}, same dispatch {rerun['dispatch_id']}")
    if c2:
        print(f"   c2 was answered {c2.get('reason')}: \"{c2.get('message')}\"")
    print(json.dumps({"ok": ok, **found}))
    return bool(ok)


def main(argv: List[str]) -> int:
    mode = argv[1] if len(argv) > 1 else None
    if mode == "child":
        asyncio.run(child(argv[2]))
        return 0
    if mode == "recover":
        asyncio.run(recover(argv[2]))
        return 0
    if mode is not None:
        return 0 if demo(mode) else 1
    scratch = tempfile.mkdtemp(prefix="stepjournal-crash-demo-")
    try:
        return 0 if demo(os.path.join(scratch, "journal")) else 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
