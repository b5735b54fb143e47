"""Tools: defined once (name, input schema, replay policy, kind, body), and the bridge from a
tool's Python body to the engine, which schedules it on the caller's event loop."""

from __future__ import annotations

from collections import abc

import asyncio
import inspect
import json
import math
import typing
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Set, Union

from . import _native
from ._errors import InvalidToolError, RefusedError

Replay = typing.Literal["safe", "unsafe"]
"""A tool's replay policy: ``"safe"`` only if two runs of its body, even overlapping, leave what
one leaves."""

Kind = typing.Literal["tool", "client", "approval", "local_agent", "remote_agent", "companion"]
"""Who answers a call: a body (``tool``, ``approval`` once approved, ``local_agent``), the
client, or a child session (``remote_agent``, ``companion``)."""

JsonSchema = Mapping[str, Any]


class CallCtx:
    """A running call's context: who it is, and where its effects are keyed."""

    __slots__ = ("_native", "cancelled")

    def __init__(self, native: _native.NativeCallCtx, cancelled: asyncio.Event) -> None:
        self._native = native
        self.cancelled: asyncio.Event = cancelled
        """Set when the run can no longer write (a newer run or a stop fenced it, the journal
        shut down): stop the work, nothing more of this call will be recorded."""

    @property
    def session_id(self) -> str:
        """The session."""
        return self._native.session_id

    @property
    def call_id(self) -> str:
        """The call's id in the reply."""
        return self._native.call_id

    @property
    def tool(self) -> str:
        """The tool called."""
        return self._native.tool

    @property
    def dispatch_id(self) -> str:
        """The call's dispatch id: the same on every attempt, in every run. Key effects on it."""
        return self._native.dispatch_id

    @property
    def attempt(self) -> int:
        """This body's attempt: 1, 2, ..."""
        return self._native.attempt

    @property
    def idempotency_key(self) -> str:
        """``session:dispatch``: the key to hand an external service."""
        return self._native.idempotency_key

    async def output(self, text: str) -> None:
        """Gives output the tool produced while running: committed (``output_chunk``) at most once
        per 100 ms, what is pending before the result. After a crash the model is shown it as
        the call's partial output. Raises the run's error once it can no longer write."""
        if not isinstance(text, str):
            raise TypeError(f"ctx.output takes a str (got {type(text).__name__})")
        await self._native.output(text)

    def __repr__(self) -> str:
        return (
            f"CallCtx(session_id={self.session_id!r}, call_id={self.call_id!r}, "
            f"dispatch_id={self.dispatch_id!r}, attempt={self.attempt})"
        )


Body = Callable[[Any, CallCtx], Union[Awaitable[Any], Any]]
"""A tool's body: ``async def body(args, ctx)`` (a plain function is called on the loop too)."""


@dataclass(frozen=True)
class Tool:
    """A tool, as :func:`define_tool` or :func:`tool` made it."""

    name: str
    kind: str
    replay: str
    input_schema: Dict[str, Any]
    execute: Optional[Body] = None
    start: Optional[Body] = None
    attach: Optional[Body] = None
    timeout: Optional[float] = None
    model: Optional[type] = field(default=None, compare=False)
    """The pydantic model the arguments are validated into, when the schema came from one."""

    async def __call__(self, args: Any, ctx: CallCtx) -> Any:
        """Runs the body directly (as a plain function, outside any journal)."""
        if self.execute is None:
            raise TypeError(f"tool `{self.name}` has no body to call")
        result = self.execute(args, ctx)
        if inspect.isawaitable(result):
            result = await result
        return result


_CHILD = {"remote_agent": "attach", "companion": "reenter"}


def _is_model(value: object) -> bool:
    return isinstance(value, type) and callable(getattr(value, "model_json_schema", None))


def _schema(name: str, input_schema: object) -> "tuple[Dict[str, Any], Optional[type]]":
    if input_schema is None:
        return {}, None
    if _is_model(input_schema):
        model = typing.cast(Any, input_schema)
        try:
            schema = model.model_json_schema()
        except Exception as e:  # pydantic's PydanticInvalidForJsonSchema and the like
            raise InvalidToolError(
                f"tool `{name}`: its pydantic model cannot be written as JSON Schema ({e}); "
                "arguments arrive as JSON: use fields of JSON values"
            ) from e
        return dict(schema), typing.cast(type, input_schema)
    if isinstance(input_schema, abc.Mapping):
        return dict(input_schema), None
    raise InvalidToolError(
        f"tool `{name}`: input_schema must be a JSON Schema dict or a pydantic model class "
        f"(got {type(input_schema).__name__})"
    )


def define_tool(
    name: str,
    input_schema: Union[JsonSchema, type, None] = None,
    *,
    replay: Replay = "unsafe",
    kind: Kind = "tool",
    execute: Optional[Body] = None,
    start: Optional[Body] = None,
    attach: Optional[Body] = None,
    reenter: Optional[Body] = None,
    timeout: Optional[float] = None,
) -> Tool:
    """Defines a tool once.

    ``input_schema`` is a JSON Schema (a dict) or a pydantic model class (its
    ``model_json_schema()``; the body then gets the validated model). ``replay`` is ``"safe"``
    only if two runs of the body, even overlapping, leave what one leaves (default
    ``"unsafe"``). ``kind`` is ``tool`` (default), ``client`` (no body: the client answers),
    ``approval`` (runs once approved), ``local_agent``, ``remote_agent`` (``start(args, ctx)``
    returns the child's session id, keyed on ``ctx.dispatch_id``; ``attach(child, ctx)`` returns
    the call's output) or ``companion`` (``start`` and ``reenter``). ``timeout`` (seconds): how
    long one body may run before its run is let go as after a crash.
    """
    if not isinstance(name, str) or name == "":
        raise TypeError("a tool needs a non-empty str `name`")
    if not isinstance(kind, str):
        raise TypeError(f"tool `{name}`: kind must be a str")
    if not isinstance(replay, str):
        raise TypeError(f"tool `{name}`: replay must be 'safe' or 'unsafe'")
    if kind == "companion" and reenter is not None:
        attach = reenter
    if kind == "client":
        if execute is not None:
            raise TypeError(f"tool `{name}`: a client tool has no `execute` (the client answers)")
    elif kind in _CHILD:
        wait = _CHILD[kind]
        if execute is not None:
            raise TypeError(f"tool `{name}`: a {kind} has `start` and `{wait}`, not `execute`")
        if not callable(start) or not callable(attach):
            raise TypeError(f"tool `{name}`: a {kind} needs `start` and `{wait}` functions")
    elif not callable(execute):
        raise TypeError(f"tool `{name}` needs an `execute` function")
    if timeout is not None:
        if kind == "client":
            raise TypeError(f"tool `{name}`: a client tool has no body to time out")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < 2**32 / 1000):
            raise TypeError(f"tool `{name}`: timeout must be a positive number of seconds")
    schema, model = _schema(name, input_schema)
    return Tool(
        name=name,
        kind=kind,
        replay=replay,
        input_schema=schema,
        execute=execute,
        start=start,
        attach=attach,
        timeout=timeout,
        model=model,
    )


def define_client_tool(name: str, input_schema: Union[JsonSchema, type, None] = None) -> Tool:
    """A tool the client executes: the run suspends until ``step.answer_client``."""
    return define_tool(name, input_schema, kind="client")


def _first_parameter_model(fn: Callable[..., Any]) -> Optional[type]:
    try:
        # A string annotation (`from __future__ import annotations`) naming a class local to the
        # enclosing function resolves through the body's closure.
        local = dict(inspect.getclosurevars(fn).nonlocals) if inspect.isfunction(fn) else {}
        hints = typing.get_type_hints(fn, localns=local)
        first = next(iter(inspect.signature(fn).parameters), None)
    except Exception:
        return None
    hint = hints.get(first) if first is not None else None
    return hint if _is_model(hint) else None


@typing.overload
def tool(
    fn: Body,
    *,
    name: Optional[str] = None,
    input_schema: Union[JsonSchema, type, None] = None,
    replay: Replay = "unsafe",
    kind: Kind = "tool",
    timeout: Optional[float] = None,
) -> Tool: ...


@typing.overload
def tool(
    fn: None = None,
    *,
    name: Optional[str] = None,
    input_schema: Union[JsonSchema, type, None] = None,
    replay: Replay = "unsafe",
    kind: Kind = "tool",
    timeout: Optional[float] = None,
) -> Callable[[Body], Tool]: ...


def tool(
    fn: Optional[Body] = None,
    *,
    name: Optional[str] = None,
    input_schema: Union[JsonSchema, type, None] = None,
    replay: Replay = "unsafe",
    kind: Kind = "tool",
    timeout: Optional[float] = None,
) -> Union[Tool, Callable[[Body], Tool]]:
    """Decorator form of :func:`define_tool`: ``@tool`` or ``@tool(replay="safe")`` over
    ``async def name(args, ctx)``. The tool is named after the function unless ``name`` is
    given; without ``input_schema``, a pydantic model annotating the first parameter is the
    schema. The decorated name is the :class:`Tool` (still callable as ``await t(args, ctx)``)."""

    def make(body: Body) -> Tool:
        schema = input_schema if input_schema is not None else _first_parameter_model(body)
        return define_tool(
            name or str(getattr(body, "__name__", "")),
            schema,
            replay=replay,
            kind=kind,
            execute=body,
            timeout=timeout,
        )

    if fn is not None:
        return make(fn)
    return make


# Each running body's cancellation event by token; the engine calls `_abort(token)` on the event
# loop when the body's run can no longer write.
_events: Dict[int, asyncio.Event] = {}


def _abort(token: int) -> None:
    event = _events.get(token)
    if event is not None:
        event.set()


def _message_of(e: BaseException) -> str:
    text = str(e)
    return text if text else type(e).__name__


def _why_not_json(value: object, path: str = "$", seen: Optional[Set[int]] = None) -> Optional[str]:
    """Why ``value`` is not JSON, as a path and a reason, or None when it is."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{path} is a str with a lone surrogate (not Unicode text)"
        return None
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path} is {value} (JSON numbers are finite)"
    seen = set() if seen is None else seen
    if id(value) in seen:
        return f"{path} refers back to an object that holds it (a cycle)"
    if isinstance(value, (list, tuple)):
        seen.add(id(value))
        try:
            for i, member in enumerate(value):
                why = _why_not_json(member, f"{path}[{i}]", seen)
                if why:
                    return why
        finally:
            seen.discard(id(value))
        return None
    if isinstance(value, dict):
        seen.add(id(value))
        try:
            for key, member in value.items():
                if not isinstance(key, str):
                    return f"{path} has a key that is not a str ({key!r})"
                why = _why_not_json(member, f"{path}.{key}", seen)
                if why:
                    return why
        finally:
            seen.discard(id(value))
        return None
    return f"{path} is a {type(value).__name__}, not a JSON value"


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def settled_json(result: object) -> str:
    """What the engine records for a body that returned ``result``: ``{"ok": result}`` (a pydantic
    model as its JSON dump; None records null), or ``{"unrecordable": why}``, which lets go of
    the run: the body ran, so neither an error nor a made-up value is written, and the next wake
    decides the call by the rules."""
    if callable(getattr(result, "model_dump", None)) and not isinstance(result, type):
        try:
            result = typing.cast(Any, result).model_dump(mode="json")
        except Exception as e:
            return _dumps({"unrecordable": f"the result's model_dump failed: {_message_of(e)}"})
    why = _why_not_json(result)
    if why is not None:
        return _dumps({"unrecordable": f"the result is not JSON: {why}"})
    return _dumps({"ok": result})


def _body(tool: Tool, fn: Body, takes_args: bool = True) -> Callable[[str, _native.NativeCallCtx], Awaitable[str]]:
    """The coroutine function the engine calls for ``fn``: it never raises an Exception (what the
    tool raises is an error result); a BaseException (the task cancelled, the loop stopping) goes
    on to the engine, which lets go of the run: nobody knows what the body did."""

    async def run(text: str, native: _native.NativeCallCtx) -> str:
        token = native.token
        event = asyncio.Event()
        _events[token] = event
        if native.cancelled:
            event.set()
        ctx = CallCtx(native, event)
        try:
            args: Any = text
            if takes_args:
                args = json.loads(text)
                if tool.model is not None:
                    args = typing.cast(Any, tool.model).model_validate(args)
            result = fn(args, ctx)
            if inspect.isawaitable(result):
                result = await result
        except Exception as e:
            return _dumps({"error": _message_of(e)})
        finally:
            _events.pop(token, None)
        return settled_json(result)

    return run


def native_tools(tools: Sequence[Tool]) -> List[Dict[str, Any]]:
    """The tools as the native module takes them."""
    defs: List[Dict[str, Any]] = []
    for t in tools:
        if not isinstance(t, Tool):
            raise TypeError("each of `tools` must come from define_tool or @tool")
        defs.append(
            {
                "name": t.name,
                "kind": t.kind,
                "replay": t.replay,
                "input_schema": _dumps(t.input_schema),
                "execute": None if t.execute is None else _body(t, t.execute),
                "start": None if t.start is None else _body(t, t.start),
                "attach": None if t.attach is None else _body(t, t.attach, takes_args=False),
                "timeout_ms": None if t.timeout is None else max(1, round(t.timeout * 1000)),
            }
        )
    return defs


def check_reply(tools: Mapping[str, Tool], reply: Mapping[str, Any]) -> None:
    """Refuses a reply a call of which has arguments its tool's pydantic model rejects: the rules
    JSON Schema cannot carry (validators) are checked here, before the engine saves the reply, so
    a reply is never saved with arguments its body would refuse."""
    calls = reply.get("calls")
    if not isinstance(calls, list):
        return
    for c in calls:
        if not isinstance(c, abc.Mapping):
            continue
        t = tools.get(typing.cast(str, c.get("tool")))
        if t is None or t.model is None:
            continue
        try:
            typing.cast(Any, t.model).model_validate(c.get("args") or {})
        except Exception as e:
            raise RefusedError(
                f"call `{c.get('call')}`: the arguments fail tool `{t.name}`'s model: {str(e)[:500]}",
                refusal="invalid_arguments",
            ) from e
