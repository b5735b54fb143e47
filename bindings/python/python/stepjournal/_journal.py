"""The journal, its runs and steps: the engine's API over the native module, asyncio first."""

from __future__ import annotations

from collections import abc

import json
import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import InvalidOptionsError, StepjournalError, from_native
from ._tools import Tool, _abort, check_reply, native_tools

Entry = Union[str, Mapping[str, Any]]
"""FORMAT.md's entry (``{"kind": "wake"}``, ``{"kind": "new_turn", "message": ...}``, ...) or
one of the words ``"wake"``, ``"resume"``, ``"continue"``, ``"retry"``, ``"stop"``."""

_WORDS: Dict[str, Dict[str, str]] = {
    "wake": {"kind": "wake"},
    "resume": {"kind": "resume", "mode": "continue"},
    "continue": {"kind": "resume", "mode": "continue"},
    "retry": {"kind": "retry"},
    "stop": {"kind": "stop"},
}


def _entry_json(entry: Entry) -> str:
    if isinstance(entry, str):
        return json.dumps(_WORDS.get(entry, {"kind": entry}))
    if not isinstance(entry, abc.Mapping):
        raise TypeError(f"an entry is a dict or a word (got {type(entry).__name__})")
    return json.dumps(dict(entry), ensure_ascii=False)


def _loads(text: Optional[str]) -> Any:
    return None if text is None else json.loads(text)


def _session(session: str) -> str:
    if not isinstance(session, str):
        raise TypeError(f"a session id is a str (got {type(session).__name__})")
    return session


def plan(scenario: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """Plans a conformance scenario (FORMAT.md: ``log``, ``tools``, ``max_bodies``, ``entry``) as
    ``stepjournal plan --scenario`` does. Takes the scenario (a dict) or its JSON text."""
    text = scenario if isinstance(scenario, str) else json.dumps(scenario, ensure_ascii=False)
    result: Dict[str, Any] = json.loads(_native.plan_scenario(text))
    return result


class Step:
    """An open step: the model's reply is durable; drive it to run its calls by the rules."""

    def __init__(self, journal: "Journal", native: _native.NativeStep) -> None:
        self._journal = journal
        self._native = native

    @property
    def number(self) -> int:
        return self._native.number

    @property
    def session_id(self) -> str:
        return self._native.session_id

    @property
    def checkpoint(self) -> str:
        """The step's append checkpoint (what ``resume``/``from_checkpoint`` and ``retry`` take)."""
        return self._native.checkpoint

    @property
    def is_open(self) -> bool:
        return self._native.is_open

    def open_calls(self) -> List[str]:
        """The calls not answered yet."""
        return self._native.open_calls()

    async def drive(self) -> Dict[str, Any]:
        """Runs the step by the rules and commits it: ``{"status": "committed", "checkpoint",
        "answers"}``, or ``{"status": "suspended", "awaiting"}`` while client answers or
        approvals are waited for."""
        result: Dict[str, Any] = json.loads(await self._native.drive())
        return result

    async def answer_client(self, call_id: str, output: Any) -> "Run":
        """Writes the client's answer to ``call_id``; the run it went through (drive it on)."""
        return await self._journal.answer_client(self.session_id, call_id, output)

    async def decide_approval(self, call_id: str, approved: bool) -> "Run":
        """Decides approval-gated ``call_id``; the run it went through (drive it on)."""
        return await self._journal.decide_approval(self.session_id, call_id, approved)

    def __repr__(self) -> str:
        return f"Step(session_id={self.session_id!r}, number={self.number}, open={self.is_open})"


class Run:
    """One pass of the runtime over a session, begun through an entry, with the entry's plan."""

    def __init__(self, journal: "Journal", native: _native.NativeRun) -> None:
        self._journal = journal
        self._native = native
        self._plan: Optional[Dict[str, Any]] = None

    @property
    def id(self) -> str:
        return self._native.id

    @property
    def session_id(self) -> str:
        return self._native.session_id

    @property
    def plan(self) -> Dict[str, Any]:
        """The entry's plan: ``{"error", "step", "calls": [{"call", "action", "rule", ...}],
        "appends"}``."""
        if self._plan is None:
            self._plan = json.loads(self._native.plan)
        return self._plan

    @property
    def status(self) -> Dict[str, Any]:
        """``{"state": "open" | "ended" | "fenced" | "broken" | ..., ...}``."""
        result: Dict[str, Any] = json.loads(self._native.status)
        return result

    @property
    def step(self) -> Optional[Step]:
        """The step the run has open (a recovered step), or None."""
        native = self._native.step()
        return None if native is None else Step(self._journal, native)

    async def transcript(self, since: Optional[int] = None) -> List[Dict[str, Any]]:
        """What the model is shown up to the run's tail; with ``since``, the items at or after
        that seq."""
        if since is not None and (not isinstance(since, int) or since < 0):
            raise TypeError("since must be a seq, a whole number 0 or more")
        result: List[Dict[str, Any]] = json.loads(await self._native.transcript(since))
        return result

    async def snapshot(self) -> Optional[int]:
        """Writes a ``snapshot`` of the session: the seq where it landed, or None."""
        return await self._native.snapshot()

    async def trim(self, keep_turns: int = 1) -> Dict[str, Any]:
        """Trims the session through this run, keeping its last ``keep_turns`` turns whole (a
        run that is one long turn passes 0); never fences the run. As :meth:`Journal.trim`."""
        result: Dict[str, Any] = json.loads(await self._native.trim(_keep_turns(keep_turns)))
        return result

    async def commit_reply(
        self, reply: Optional[Mapping[str, Any]] = None, *, text: Optional[str] = None, calls: Optional[Sequence[Mapping[str, Any]]] = None
    ) -> Step:
        """Commits the model's reply ``{"text", "calls": [{"call", "tool", "args", "group"?,
        "sequential"?}]}`` (or ``text=``, ``calls=``): the step, its reply and every call's
        dispatch id durable before any body starts."""
        if reply is None:
            reply = {"text": text or "", "calls": list(calls or [])}
        elif text is not None or calls is not None:
            raise TypeError("commit_reply takes a reply dict or text=/calls=, not both")
        if not isinstance(reply, abc.Mapping):
            raise TypeError(f"a reply is a dict {{text, calls}} (got {type(reply).__name__})")
        if self._journal._models:
            check_reply(self._journal._models, reply)
        body = json.dumps(dict(reply), ensure_ascii=False, allow_nan=False)
        return Step(self._journal, await self._native.commit_reply(body))

    async def drive(self) -> Optional[Dict[str, Any]]:
        """Drives the step the run has open (a recovered step); None when it has none."""
        result: Optional[Dict[str, Any]] = _loads(await self._native.drive())
        return result

    async def drive_within(self) -> Tuple["Run", Optional[Dict[str, Any]]]:
        """Drives the open step with its tools' timeouts: a body past its deadline lets go of the
        run and a ``wake`` begun in the same call decides that call by the rules and drives on.
        ``(run, outcome)``: the run that finished the step and its outcome."""
        driven = await self._native.drive_within()
        return Run(self._journal, driven.run), _loads(driven.outcome)

    async def model_aborted(self, partial: str, *, continuation: Optional[str] = None) -> None:
        """Records that a model request was cut off (``model_aborted``), with its partial answer
        and the provider's handle to go on with it."""
        if not isinstance(partial, str):
            raise TypeError("partial must be a str")
        await self._native.model_aborted(partial, continuation)

    async def end(self, outcome: str = "completed") -> None:
        """Ends the run: ``completed`` (default), ``failed`` or ``stopped``."""
        await self._native.end(outcome)

    async def fail(self, error: Optional[str] = None) -> None:
        """Ends the run failed, pairing each open call."""
        await self._native.fail(None if error is None else str(error))

    def __repr__(self) -> str:
        return f"Run(session_id={self.session_id!r}, id={self.id!r})"


@dataclass
class RecoveredSession:
    """A session recovered by :meth:`Journal.recover_all`: its run and what driving came to."""

    session: str
    run: Run
    outcome: Optional[Dict[str, Any]]


@dataclass
class FailedSession:
    """A session whose recovery failed (its wake, its drive, or the ``on_recovered`` callback)."""

    session: str
    error: BaseException
    run: Optional[Run] = None
    outcome: Optional[Dict[str, Any]] = None


@dataclass
class RecoveryReport:
    """What :meth:`Journal.recover_all` did."""

    recovered: List[RecoveredSession] = field(default_factory=list)
    skipped: List[Dict[str, Any]] = field(default_factory=list)
    """Sessions another owner's run holds a live lease on: ``{session, owner, run, expires_at_ms}``."""
    changed: List[str] = field(default_factory=list)
    """Sessions another actor wrote to since they were listed: not written to."""
    waiting: List[Dict[str, Any]] = field(default_factory=list)
    """Sessions suspended on client answers or approvals: ``{session, calls}``."""
    failed: List[FailedSession] = field(default_factory=list)


OnRecovered = Callable[[Run, Optional[Dict[str, Any]]], Awaitable[None]]


class Journal:
    """A journal over one store, with its tools. Made by :func:`open_journal`; an async context
    manager that closes it."""

    def __init__(self, native: _native.NativeJournal, tools: Sequence[Tool]) -> None:
        self._native = native
        self._tools: Dict[str, Tool] = {t.name: t for t in tools}
        # The tools whose arguments a pydantic model validates (checked before a reply is saved).
        self._models: Dict[str, Tool] = {t.name: t for t in tools if t.model is not None}

    async def __aenter__(self) -> "Journal":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def plan(self, scenario: Union[str, Mapping[str, Any]]) -> Dict[str, Any]:
        """The plan of a conformance scenario (see :func:`plan`)."""
        return plan(scenario)

    async def begin_run(self, session: str, entry: Entry) -> Run:
        """Begins a run of ``session`` through ``entry``: the fence and the entry's plan appended
        in one compare-and-set. ``run.plan`` says what recovery decided for each call."""
        native = await self._native.begin_run(_session(session), _entry_json(entry))
        return Run(self, native)

    async def stop(self, session: str) -> Dict[str, Any]:
        """Stops the session's work; the stop's plan."""
        result: Dict[str, Any] = json.loads(await self._native.stop(_session(session)))
        return result

    async def sessions_to_recover(self) -> List[str]:
        """The sessions a start-up recovers."""
        return await self._native.sessions_to_recover()

    async def recover_all(self, *, concurrency: int = 8, on_recovered: Optional[OnRecovered] = None) -> RecoveryReport:
        """The engine's start-up recovery: each session to recover is woken at the tail it was
        listed at without forcing a lease, its recovered step driven, and ``await
        on_recovered(run, outcome)`` called to go on with it (on this event loop)."""
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise TypeError(f"recover_all: concurrency must be a whole number, at least 1 (got {concurrency!r})")
        if on_recovered is not None and not callable(on_recovered):
            raise TypeError("recover_all: on_recovered must be a coroutine function")
        handed: Dict[str, Tuple[Run, Optional[Dict[str, Any]]]] = {}
        raised: Dict[str, BaseException] = {}

        async def hand(native: _native.NativeRun, outcome_json: Optional[str]) -> None:
            run = Run(self, native)
            try:
                outcome = _loads(outcome_json)
            except Exception as e:
                raised[run.session_id] = e
                return
            handed[run.session_id] = (run, outcome)
            if on_recovered is not None:
                try:
                    await on_recovered(run, outcome)
                except Exception as e:
                    raised[run.session_id] = e

        report = json.loads(await self._native.recover_all(concurrency, hand))
        out = RecoveryReport(skipped=report["skipped"], changed=report["changed"], waiting=report["waiting"])
        for f in report["failed"]:
            out.failed.append(FailedSession(f["session"], from_native(f["code"], f["refusal"], f["message"])))
        for session in report["recovered"]:
            got = handed.get(session)
            if got is None:
                error = raised.get(session) or StepjournalError(f"session {session!r} was recovered but its run was not handed over")
                out.failed.append(FailedSession(session, error))
                continue
            run, outcome = got
            if session in raised:
                out.failed.append(FailedSession(session, raised[session], run, outcome))
            else:
                out.recovered.append(RecoveredSession(session, run, outcome))
        return out

    async def answer_client(self, session: str, call_id: str, output: Any) -> Run:
        """Writes the client's answer to client call ``call_id``; the run it went through."""
        text = json.dumps(output, ensure_ascii=False, allow_nan=False)
        return Run(self, await self._native.answer_client(_session(session), str(call_id), text))

    async def decide_approval(self, session: str, call_id: str, approved: bool) -> Run:
        """Records the decision on approval-gated ``call_id``; the run it went through."""
        return Run(self, await self._native.decide_approval(_session(session), str(call_id), bool(approved)))

    async def fork(self, session: str, checkpoint: str, new_session: str) -> List[Dict[str, Any]]:
        """Forks ``session`` at a step commit's ``checkpoint`` into ``new_session`` (which must
        not exist): the new session's events as written."""
        lines = await self._native.fork(_session(session), str(checkpoint), _session(new_session))
        return [json.loads(line) for line in lines]

    async def transcript(self, session: str) -> List[Dict[str, Any]]:
        """What the model is shown for the session now."""
        result: List[Dict[str, Any]] = json.loads(await self._native.transcript(_session(session)))
        return result

    async def steps(self, session: str) -> List[Dict[str, Any]]:
        """The session's steps: ``{"step", "checkpoint", "committed", "commit_checkpoint"}``."""
        result: List[Dict[str, Any]] = json.loads(await self._native.steps(_session(session)))
        return result

    async def export_lines(self, session: str) -> List[str]:
        """The session's log as ``stepjournal export`` writes it, one line per record."""
        return await self._native.export_lines(_session(session))

    def tools_json(self) -> Dict[str, Any]:
        """FORMAT.md's ``tools`` object for the journal's tools."""
        result: Dict[str, Any] = json.loads(self._native.tools_json())
        return result

    @property
    def owner(self) -> str:
        """Who owns the runs this journal begins: the holder of their leases."""
        return self._native.owner

    async def retain(self, age: Union[float, timedelta]) -> Dict[str, List[str]]:
        """One retention pass: deletes the sessions whose last run ended (completed, failed,
        stopped) more than ``age`` (seconds) ago. ``{"deleted", "changed"}``."""
        deleted, changed = await self._native.retain(_ms(age, "age"))
        return {"deleted": deleted, "changed": changed}

    async def trim(self, session: str, keep_turns: int = 1) -> Dict[str, Any]:
        """Drops the session's events before a kept snapshot, keeping the last ``keep_turns``
        turns whole: never the newest snapshot alone, never what an open call, a pending
        approval or a client call needs. ``{"trimmed": True, "before", "from", "at", "turns"}``
        (the log now starts at ``before``; ``turns`` dropped in all) or ``{"trimmed": False,
        "why"}``. Raises ``LeaseHeldError`` while a run of the session is live,
        ``ConflictError`` when another actor wrote to it meanwhile (nothing written)."""
        result: Dict[str, Any] = json.loads(
            await self._native.trim(_session(session), _keep_turns(keep_turns))
        )
        return result

    def metrics(self) -> Dict[str, int]:
        """The store's and the writer's counters."""
        result: Dict[str, int] = json.loads(self._native.metrics())
        return result

    async def close(self, deadline: Union[float, timedelta] = 0) -> List[str]:
        """Refuses new runs; open runs get ``deadline`` (seconds) to end; then closes the store
        (a file journal's lock is released), so it can be opened again at once. The sessions
        left for recovery."""
        ms = 0 if deadline == 0 else _ms(deadline, "deadline")
        return await self._native.close(ms)


def _ms(value: Union[float, timedelta, None], what: str) -> int:
    """``value`` (seconds, or a timedelta) in whole milliseconds, at least 1."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"{what} must be a number of seconds or a timedelta (got {type(value).__name__})")
    if not math.isfinite(seconds) or seconds <= 0 or seconds > 2**53 / 1000:
        raise InvalidOptionsError(f"{what} must be a positive duration (got {value!r})")
    return max(1, round(seconds * 1000))


def _whole(value: Optional[int], what: str, minimum: int) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be a whole number (got {type(value).__name__})")
    if value < minimum:
        raise InvalidOptionsError(f"{what} must be at least {minimum} (got {value})")
    return value


async def open_journal(
    url: str,
    *,
    tools: Sequence[Tool] = (),
    durability: str = "synced",
    max_bodies: Optional[int] = None,
    create: bool = True,
    lease_ttl: Union[float, timedelta, None] = None,
    owner: Optional[str] = None,
    snapshot_every: Optional[int] = None,
    snapshot_after_bytes: Optional[int] = None,
    retain_ended_for: Union[float, timedelta, None] = None,
    operator: Optional[Tuple[Optional[str], Optional[str]]] = None,
) -> Journal:
    """Opens the journal at ``url`` (``file:PATH``, ``sqlite:PATH``, ``postgres://...``) with its
    tools.

    ``durability``: ``"synced"`` (default: an append is on stable storage when it returns) or
    ``"buffered"``. ``max_bodies``: how many bodies one call may start in all (default 3).
    ``create``: create the store when absent (default True). ``lease_ttl`` (seconds, default 30):
    how long a run's lease lasts unless renewed. ``owner``: the holder of the runs' leases
    (default ``host:pid:random``). ``snapshot_every`` (default 32 steps), ``snapshot_after_bytes``
    (default 1 MiB), ``retain_ended_for`` (seconds; default: kept), ``operator``: ``(name,
    reason)`` recorded on each run.
    """
    if not isinstance(url, str):
        raise TypeError(f"open_journal: url must be a str (got {type(url).__name__})")
    if isinstance(tools, Tool):
        raise TypeError("open_journal: tools is a list of tools")
    tools = list(tools)
    if owner is not None and (not isinstance(owner, str) or owner.strip() == ""):
        raise InvalidOptionsError("open_journal: owner must be a non-empty str")
    if operator is not None and (not isinstance(operator, tuple) or len(operator) != 2):
        raise TypeError("open_journal: operator is a tuple (name, reason)")
    native = await _native.open(
        url,
        native_tools(tools),
        _abort,
        durability=durability,
        max_bodies=_whole(max_bodies, "max_bodies", 1),
        create=bool(create),
        lease_ttl_ms=None if lease_ttl is None else _ms(lease_ttl, "lease_ttl"),
        owner=owner,
        snapshot_every=_whole(snapshot_every, "snapshot_every", 0),
        snapshot_after_bytes=_whole(snapshot_after_bytes, "snapshot_after_bytes", 0),
        retain_ended_for_ms=None if retain_ended_for is None else _ms(retain_ended_for, "retain_ended_for"),
        operator=operator,
    )
    return Journal(native, tools)


def _keep_turns(keep_turns: int) -> int:
    if isinstance(keep_turns, bool) or not isinstance(keep_turns, int) or keep_turns < 0:
        raise TypeError(f"keep_turns must be a whole number, 0 or more (got {keep_turns!r})")
    return keep_turns
