"""Settles the asyncio futures the native module returns, on their loop."""

from __future__ import annotations

import asyncio
from typing import Any


def settle(future: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
    """Called by the native module through ``loop.call_soon_threadsafe``: sets the result (or the
    exception) unless the awaiting task gave up on it (cancelled)."""
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
