"""The Python API beside what a Python runtime uses today for the same durability, in turns:
appends/s and steps/s from 1, 64 and 1,000 concurrent sessions (asyncio).

    python bindings/python/bench.py [--budget 2.0] [--rounds 2] [--sessions 1,64,1000] [--rust]

The workload is the Rust bench's `drive` row (and the Node bench's): a step of 4 calls of a safe
tool answered at once, through commit_reply and drive (10 appends per step: the reply with its
dispatch ids, 4 attempt_started, 4 tool_result, step_commit), each session stepping until the
budget has passed. The baselines append the same 10 events per step, each durable before the
next:
  - the standard library's sqlite3 (WAL, synchronous=FULL), one transaction per append, on the
    event loop (as a runtime calling sqlite3 from async code does);
  - a JSONL file per session with an fsync per line, the write and fsync in the loop's default
    thread pool (so sessions' fsyncs overlap).
Install the package first (pip install ./bindings/python: the release build); --rust runs
target/release/stepjournal-bench --quick --only drive after, for the same workload in Rust
(cargo build --release -p stepjournal-bench first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional

import stepjournal

CALLS = 4
APPENDS_PER_STEP = 10
ARGS = {"query": "restaurants near the station", "limit": 5}
OUTPUT = {"results": ["Chez Nous", "La Table", "Bistro 9"], "took_ms": 41}
REPLY = {"text": "looking", "calls": [{"call": f"c{i}", "tool": "lookup", "args": ARGS} for i in range(CALLS)]}


@stepjournal.tool(replay="safe")
async def lookup(args: Any, ctx: stepjournal.CallCtx) -> Dict[str, Any]:
    return OUTPUT


async def timed_slice(n: int, budget: float, step: Callable[[int], Awaitable[None]]) -> Dict[str, float]:
    """Runs `step(i)` for every session until the budget has passed: steps and elapsed s."""
    start = time.perf_counter()
    until = start + budget
    steps = 0

    async def session(i: int) -> None:
        nonlocal steps
        while time.perf_counter() < until:
            await step(i)
            steps += 1

    await asyncio.gather(*(session(i) for i in range(n)))
    return {"steps": steps, "s": time.perf_counter() - start}


def step_events(session: str, step: int) -> List[str]:
    """The events of one step as JSON lines a runtime would store (the journal's sizes)."""
    now = int(time.time() * 1000)
    events: List[Dict[str, Any]] = [{"type": "reply_committed", "session": session, "step": step, "text": REPLY["text"], "calls": REPLY["calls"]}]
    for c in REPLY["calls"]:
        events.append({"type": "attempt_started", "session": session, "call": c["call"], "dispatch": f"d-{step}-{c['call']}", "attempt": 1})
    for c in REPLY["calls"]:
        events.append({"type": "tool_result", "session": session, "call": c["call"], "output": OUTPUT, "is_error": False})
    events.append({"type": "step_commit", "session": session, "step": step, "checkpoint": f"cp-{step}"})
    return [json.dumps({**e, "at": now}) for e in events]


class Contender:
    name = ""

    async def round(self, budget: float) -> Dict[str, float]:
        raise NotImplementedError

    async def close(self) -> None:
        pass


class PythonApi(Contender):
    name = "stepjournal (Python API, file, Synced)"

    def __init__(self, journal: stepjournal.Journal, runs: List[stepjournal.Run]) -> None:
        self.journal, self.runs = journal, runs

    @classmethod
    async def make(cls, directory: Path, n: int) -> "PythonApi":
        journal = await stepjournal.open_journal(f"file:{directory}", tools=[lookup])
        runs = await asyncio.gather(*(journal.begin_run(f"s-{i}", {"kind": "new_turn", "message": "bench"}) for i in range(n)))
        return cls(journal, list(runs))

    async def round(self, budget: float) -> Dict[str, float]:
        before = self.journal.metrics()

        async def step(i: int) -> None:
            s = await self.runs[i].commit_reply(REPLY)
            outcome = await s.drive()
            if outcome["status"] != "committed":
                raise RuntimeError(f"step not committed: {outcome}")

        m = await timed_slice(len(self.runs), budget, step)
        after = self.journal.metrics()
        m["appends"] = after["appends"] - before["appends"]
        m["groups"] = after["groups"] - before["groups"]
        return m

    async def close(self) -> None:
        await self.journal.close()


class Sqlite(Contender):
    name = "sqlite3 (WAL, synchronous=FULL, txn per append)"

    def __init__(self, path: Path, n: int) -> None:
        self.db = sqlite3.connect(str(path), isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS events (session TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session, seq))")
        self.seqs = [0] * n
        self.steps = [0] * n

    async def round(self, budget: float) -> Dict[str, float]:
        async def step(i: int) -> None:
            session = f"s-{i}"
            self.steps[i] += 1
            for line in step_events(session, self.steps[i]):
                self.db.execute("BEGIN")
                self.db.execute("INSERT INTO events (session, seq, body) VALUES (?, ?, ?)", (session, self.seqs[i], line))
                self.db.execute("COMMIT")
                self.seqs[i] += 1
                await asyncio.sleep(0)  # the event loop may run other sessions between appends

        m = await timed_slice(len(self.seqs), budget, step)
        m["appends"] = m["steps"] * APPENDS_PER_STEP
        return m

    async def close(self) -> None:
        self.db.close()


class Jsonl(Contender):
    name = "JSONL file per session, fsync per line"

    def __init__(self, directory: Path, n: int) -> None:
        self.fds = [os.open(str(directory / f"jsonl-{i}.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) for i in range(n)]
        self.steps = [0] * n

    async def round(self, budget: float) -> Dict[str, float]:
        loop = asyncio.get_running_loop()

        def append(fd: int, data: bytes) -> None:
            os.write(fd, data)
            os.fsync(fd)

        async def step(i: int) -> None:
            self.steps[i] += 1
            for line in step_events(f"s-{i}", self.steps[i]):
                await loop.run_in_executor(None, append, self.fds[i], (line + "\n").encode())

        m = await timed_slice(len(self.fds), budget, step)
        m["appends"] = m["steps"] * APPENDS_PER_STEP
        return m

    async def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


def fmt(x: float) -> str:
    return f"{round(x):,}" if x >= 100 else f"{x:.1f}"


async def main(args: argparse.Namespace) -> List[Dict[str, Any]]:
    scratch = Path(tempfile.mkdtemp(prefix="stepjournal-python-bench-"))
    results: List[Dict[str, Any]] = []
    try:
        print(f"stepjournal Python bench: {args.budget} s per slice, {args.rounds} rounds in turns")
        print(f"workload: steps of {CALLS} calls, {APPENDS_PER_STEP} appends per step, every append durable (fsync) before it returns\n")
        header = f"{'sessions':<8} {'system':<50} {'appends/s':>11} {'steps/s':>9} {'appends/group':>13} {'vs sqlite3':>10} {'vs jsonl':>9}"
        print(header)
        print("-" * len(header))
        for n in args.sessions:
            (scratch / f"j-{n}").mkdir()
            contenders: List[Contender] = [
                await PythonApi.make(scratch / f"api-{n}", n),
                Sqlite(scratch / f"sqlite-{n}.db", n),
                Jsonl(scratch / f"j-{n}", n),
            ]
            best: List[Optional[Dict[str, float]]] = [None] * len(contenders)
            for _ in range(args.rounds):
                for k, c in enumerate(contenders):
                    m = await c.round(args.budget)
                    rate = m["appends"] / m["s"]
                    current = best[k]
                    if current is None or rate > current["appends_per_s"]:
                        group = m["appends"] / m["groups"] if m.get("groups") else 0.0
                        best[k] = {"appends_per_s": rate, "steps_per_s": m["steps"] / m["s"], "group": group}
            api, sql, file = (b for b in best if b is not None)
            for k, c in enumerate(contenders):
                b = best[k]
                assert b is not None
                vs = (lambda other: f"{b['appends_per_s'] / other['appends_per_s']:.1f}x") if k == 0 else (lambda other: "")
                group = f"{b['group']:.1f}" if b["group"] else ""
                print(f"{n:<8} {c.name:<50} {fmt(b['appends_per_s']):>11} {fmt(b['steps_per_s']):>9} {group:>13} {vs(sql):>10} {vs(file):>9}")
            results.append({"sessions": n, "python": api, "sqlite3": sql, "jsonl": file})
            for c in contenders:
                await c.close()
        print(f"\nJSON: {json.dumps(results)}")
        if args.rust:
            workspace = Path(__file__).resolve().parent.parent.parent
            target = Path(os.environ.get("CARGO_TARGET_DIR", workspace / "target"))
            binary = target / "release" / "stepjournal-bench"
            print(f"\nthe same workload in Rust: {binary} --quick --only drive")
            if not binary.exists():
                print("(not built: cargo build --release -p stepjournal-bench)")
            else:
                done = subprocess.run(
                    [str(binary), "--quick", "--only", "drive", "--dir", str(scratch / "rust"), "--json", str(scratch / "rust.json")],
                    capture_output=True,
                    text=True,
                )
                print(done.stdout if done.returncode == 0 else f"(the Rust bench failed: {done.stderr})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per slice (default 2)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds in turns; the best of each is kept (default 2)")
    parser.add_argument("--sessions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 64, 1000])
    parser.add_argument("--rust", action="store_true", help="run the Rust bench's drive row after")
    asyncio.run(main(parser.parse_args()))
