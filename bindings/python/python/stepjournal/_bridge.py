"""The event loop's side of the native module's bridge (bindings/python/src/bridge.rs): each loop
gets an inbox whose socket it watches; the engine's threads put into it the results to settle
futures with and the coroutines to start, and the loop handles them in one drain per wake-up."""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from typing import Any, Callable, Optional, Tuple

from . import _native


class _Bridge:
    def __init__(self) -> None:
        self._inboxes: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _native.Inbox]" = weakref.WeakKeyDictionary()
        self._last_loop_ref: "Optional[weakref.ReferenceType[asyncio.AbstractEventLoop]]" = None
        self._last_inbox: Optional[_native.Inbox] = None

    @property
    def _last_loop(self) -> Optional[asyncio.AbstractEventLoop]:
        return None if self._last_loop_ref is None else self._last_loop_ref()

    def caller(self) -> Tuple[_native.Inbox, contextvars.Context, "asyncio.Future[Any]", asyncio.AbstractEventLoop]:
        """The running loop's inbox (made and watched on first use), a copy of the caller's
        context, a new future of the loop, and the loop."""
        loop = asyncio.get_running_loop()
        if loop is self._last_loop and self._last_inbox is not None:
            return self._last_inbox, contextvars.copy_context(), loop.create_future(), loop
        inbox = self._inboxes.get(loop)
        if inbox is None:
            inbox = _native.Inbox()
            loop.add_reader(inbox.fileno(), inbox.drain)
            self._inboxes[loop] = inbox
        # The last loop's inbox, for the next call without the weak dictionary's lookup (a weak
        # reference: a finished loop is not kept alive).
        self._last_loop_ref = weakref.ref(loop)
        self._last_inbox = inbox
        return inbox, contextvars.copy_context(), loop.create_future(), loop

    @staticmethod
    def settle(future: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
        """Sets the result (or the exception) unless the awaiting task gave up on it."""
        if future.cancelled():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    @staticmethod
    def start(function: Callable[..., Any], args: Tuple[Any, ...], context: contextvars.Context, reply: _native.Reply) -> None:
        """Starts ``function(*args)`` as a task in ``context``; sends what it comes to on ``reply``."""
        try:
            task = context.run(asyncio.ensure_future, function(*args))
        except BaseException as e:
            reply.send(False, e)
            return

        task.add_done_callback(reply.done)


BRIDGE = _Bridge()
