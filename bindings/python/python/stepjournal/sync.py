"""The synchronous facade: the same journal for code that is not async.

    import stepjournal.sync

    with stepjournal.sync.open_journal("file:./data", tools=[set_preference]) as journal:
        run = journal.begin_run("user-42", {"kind": "new_turn", "message": "window seat please"})
        step = run.commit_reply({"text": "Saving it.", "calls": [...]})
        outcome = step.drive()
        run.end("completed")

Each journal runs its own event loop on a thread of its own; every method hands its work to that
loop and waits for it. Tool bodies (``async def`` or plain ``def``) run on that loop's thread.
Calling the facade from a body (on the loop's own thread) would wait for itself: it raises
RuntimeError instead; a body uses the async API.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Coroutine, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

from . import _journal
from ._journal import Entry, FailedSession
from ._tools import Tool

T = TypeVar("T")


class _LoopThread:
    """An event loop running on a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="stepjournal-sync", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("the synchronous facade was called from its own event loop (a tool body?): use the async API there")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        self.loop.close()


@dataclass
class Recovered:
    """A session recovered by :meth:`Journal.recover_all`: its run and what driving came to."""

    session: str
    run: "Run"
    outcome: Optional[Dict[str, Any]]


@dataclass
class RecoveryReport:
    """What :meth:`Journal.recover_all` did (see :class:`stepjournal.RecoveryReport`)."""

    recovered: List[Recovered] = field(default_factory=list)
    skipped: List[Dict[str, Any]] = field(default_factory=list)
    changed: List[str] = field(default_factory=list)
    waiting: List[Dict[str, Any]] = field(default_factory=list)
    failed: List[FailedSession] = field(default_factory=list)


class Step:
    """An open step (see :class:`stepjournal.Step`)."""

    def __init__(self, runner: _LoopThread, step: _journal.Step) -> None:
        self._runner, self._step = runner, step

    @property
    def number(self) -> int:
        return self._step.number

    @property
    def session_id(self) -> str:
        return self._step.session_id

    @property
    def checkpoint(self) -> str:
        return self._step.checkpoint

    @property
    def is_open(self) -> bool:
        return self._step.is_open

    def open_calls(self) -> List[str]:
        return self._step.open_calls()

    def drive(self) -> Dict[str, Any]:
        return self._runner.call(self._step.drive())

    def answer_client(self, call_id: str, output: Any) -> "Run":
        return Run(self._runner, self._runner.call(self._step.answer_client(call_id, output)))

    def decide_approval(self, call_id: str, approved: bool) -> "Run":
        return Run(self._runner, self._runner.call(self._step.decide_approval(call_id, approved)))


class Run:
    """A run (see :class:`stepjournal.Run`)."""

    def __init__(self, runner: _LoopThread, run: _journal.Run) -> None:
        self._runner, self._run = runner, run

    @property
    def id(self) -> str:
        return self._run.id

    @property
    def session_id(self) -> str:
        return self._run.session_id

    @property
    def plan(self) -> Dict[str, Any]:
        return self._run.plan

    @property
    def status(self) -> Dict[str, Any]:
        return self._run.status

    @property
    def step(self) -> Optional[Step]:
        step = self._run.step
        return None if step is None else Step(self._runner, step)

    def transcript(self, since: Optional[int] = None) -> List[Dict[str, Any]]:
        return self._runner.call(self._run.transcript(since))

    def commit_reply(
        self, reply: Optional[Mapping[str, Any]] = None, *, text: Optional[str] = None, calls: Optional[Sequence[Mapping[str, Any]]] = None
    ) -> Step:
        return Step(self._runner, self._runner.call(self._run.commit_reply(reply, text=text, calls=calls)))

    def drive(self) -> Optional[Dict[str, Any]]:
        return self._runner.call(self._run.drive())

    def end(self, outcome: str = "completed") -> None:
        self._runner.call(self._run.end(outcome))

    def fail(self, error: Optional[str] = None) -> None:
        self._runner.call(self._run.fail(error))


class Journal:
    """A journal (see :class:`stepjournal.Journal`); a context manager that closes it."""

    def __init__(self, runner: _LoopThread, journal: _journal.Journal) -> None:
        self._runner, self._journal = runner, journal

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def plan(self, scenario: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
        return _journal.plan(scenario)

    def begin_run(self, session: str, entry: Entry) -> Run:
        return Run(self._runner, self._runner.call(self._journal.begin_run(session, entry)))

    def stop(self, session: str) -> Dict[str, Any]:
        return self._runner.call(self._journal.stop(session))

    def sessions_to_recover(self) -> List[str]:
        return self._runner.call(self._journal.sessions_to_recover())

    def recover_all(self, *, concurrency: int = 8) -> "RecoveryReport":
        """As :meth:`stepjournal.Journal.recover_all`: each recovered session's run (this
        facade's) and outcome are in the report's ``recovered``, to go on with."""
        report = self._runner.call(self._journal.recover_all(concurrency=concurrency))
        return RecoveryReport(
            recovered=[Recovered(r.session, Run(self._runner, r.run), r.outcome) for r in report.recovered],
            skipped=report.skipped,
            changed=report.changed,
            waiting=report.waiting,
            failed=report.failed,
        )

    def answer_client(self, session: str, call_id: str, output: Any) -> Run:
        return Run(self._runner, self._runner.call(self._journal.answer_client(session, call_id, output)))

    def decide_approval(self, session: str, call_id: str, approved: bool) -> Run:
        return Run(self._runner, self._runner.call(self._journal.decide_approval(session, call_id, approved)))

    def transcript(self, session: str) -> List[Dict[str, Any]]:
        return self._runner.call(self._journal.transcript(session))

    def steps(self, session: str) -> List[Dict[str, Any]]:
        return self._runner.call(self._journal.steps(session))

    def export_lines(self, session: str) -> List[str]:
        return self._runner.call(self._journal.export_lines(session))

    def tools_json(self) -> Dict[str, Any]:
        return self._journal.tools_json()

    @property
    def owner(self) -> str:
        return self._journal.owner

    def metrics(self) -> Dict[str, int]:
        return self._journal.metrics()

    def close(self, deadline: float = 0) -> List[str]:
        """Closes the journal (see :meth:`stepjournal.Journal.close`) and stops its loop."""
        if not self._runner.thread.is_alive():
            return []
        try:
            return self._runner.call(self._journal.close(deadline))
        finally:
            self._runner.stop()


def open_journal(url: str, **options: Any) -> Journal:
    """Opens the journal at ``url`` with the options of :func:`stepjournal.open_journal`, on an
    event loop of its own."""
    runner = _LoopThread()
    try:
        journal = runner.call(_journal.open_journal(url, **options))
    except BaseException:
        runner.stop()
        raise
    return Journal(runner, journal)


__all__ = ["FailedSession", "Journal", "Recovered", "RecoveryReport", "Run", "Step", "Tool", "open_journal"]
