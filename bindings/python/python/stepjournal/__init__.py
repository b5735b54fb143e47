"""stepjournal: a storage and recovery engine for AI-agent runtimes, for asyncio.

Each agent session is an append-only log of typed events; after a crash, recovery decides for
every tool call that was in flight whether to run it again (a replay-safe tool, under the same
dispatch id) or to answer the model that its outcome is unknown (one that may have had an
effect), so that no call with side effects runs twice by accident.
"""

import atexit as _atexit

from . import _native
from ._errors import (
    ERROR_CLASSES,
    BrokenError,
    CancelledError,
    ClosedError,
    ConflictError,
    CorruptError,
    DeadlineError,
    EncodeError,
    EndedError,
    ErrorCode,
    FencedError,
    InterruptedError,
    InvalidAnswerError,
    InvalidEntryError,
    InvalidIdError,
    InvalidJsonError,
    InvalidOptionsError,
    InvalidOutcomeError,
    InvalidReplyError,
    InvalidToolError,
    InvalidUrlError,
    LeaseHeldError,
    LockedError,
    MalformedScenarioError,
    NewerFormatError,
    NotAJournalError,
    OutcomeUnknownError,
    PoisonedError,
    ReadOnlyError,
    RefusalCode,
    RefusedError,
    ShuttingDownError,
    StepjournalError,
    StoreContractError,
    StoreError,
    StoreInUseError,
    ValidationError,
)
from ._journal import (
    Entry,
    FailedSession,
    Journal,
    RecoveredSession,
    RecoveryReport,
    Run,
    Step,
    open_journal,
    plan,
)
from ._tools import CallCtx, Kind, Replay, Tool, define_client_tool, define_tool, tool

__version__ = "0.1.0"

# Before the interpreter finalizes, the engine's threads stop entering Python (a thread inside it
# then would abort the process): see bindings/python/src/bridge.rs.
_atexit.register(_native.finalizing)

# `InterruptedError` and `CancelledError` are the engine's (codes `interrupted`, `cancelled`):
# left out of `*` so that a star import does not shadow the builtin and asyncio's names.
__all__ = [
    "ERROR_CLASSES",
    "BrokenError",
    "CallCtx",
    "ClosedError",
    "ConflictError",
    "CorruptError",
    "DeadlineError",
    "EncodeError",
    "EndedError",
    "Entry",
    "ErrorCode",
    "FailedSession",
    "FencedError",
    "InvalidAnswerError",
    "InvalidEntryError",
    "InvalidIdError",
    "InvalidJsonError",
    "InvalidOptionsError",
    "InvalidOutcomeError",
    "InvalidReplyError",
    "InvalidToolError",
    "InvalidUrlError",
    "Journal",
    "Kind",
    "LeaseHeldError",
    "LockedError",
    "MalformedScenarioError",
    "NewerFormatError",
    "NotAJournalError",
    "OutcomeUnknownError",
    "PoisonedError",
    "ReadOnlyError",
    "RecoveredSession",
    "RecoveryReport",
    "RefusalCode",
    "RefusedError",
    "Replay",
    "Run",
    "ShuttingDownError",
    "Step",
    "StepjournalError",
    "StoreContractError",
    "StoreError",
    "StoreInUseError",
    "Tool",
    "ValidationError",
    "define_client_tool",
    "define_tool",
    "open_journal",
    "plan",
    "tool",
]
