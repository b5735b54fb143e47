"""StepjournalError and one subclass per code of the engine.

The engine's codes are its own (``stepjournal._native.error_codes()`` lists them; a test checks
that every one has its class here and that no class stands for a code the engine does not
have). The native module raises them through :func:`from_native`.
"""

from __future__ import annotations

from typing import Dict, Literal, Optional, Type

ErrorCode = Literal[
    "conflict",
    "outcome_unknown",
    "encode",
    "store",
    "corrupt",
    "newer_format",
    "poisoned",
    "read_only",
    "closed",
    "store_contract",
    "invalid_url",
    "locked",
    "not_a_journal",
    "invalid_options",
    "validation_error",
    "shutting_down",
    "store_in_use",
    "lease_held",
    "fenced",
    "ended",
    "broken",
    "interrupted",
    "deadline",
    "refused",
    "malformed_scenario",
    "invalid_id",
    "invalid_json",
    "invalid_entry",
    "invalid_reply",
    "invalid_tool",
    "invalid_answer",
    "invalid_outcome",
    "cancelled",
]
"""Every code the engine reports, in the engine's order (``StepjournalError.code``)."""

RefusalCode = Literal[
    "repeated_call",
    "step_open",
    "step_closed",
    "unknown_call",
    "resolved",
    "paired_by_plan",
    "client_call",
    "awaiting_approval",
    "body_started",
    "max_bodies",
    "no_child",
    "no_body_started",
    "behind",
    "behind_blocked",
    "attempt_mismatch",
    "wrong_kind",
    "already_decided",
    "child_attached",
    "may_have_run",
    "nothing_to_await",
    "not_awaitable",
    "bodies_running",
    "open_calls",
    "unknown_tool",
    "invalid_arguments",
    "use_suspend",
    "not_waiting",
]
"""Every protocol rule that refuses a write (``RefusedError.refusal``)."""



class StepjournalError(Exception):
    """An error the engine reported: ``code`` says what kind (``"fenced"``, ``"locked"``, ...),
    ``refusal`` which protocol rule refused (for ``code == "refused"``), the message what and
    where."""

    code: str = ""

    def __init__(self, message: str, *, code: Optional[str] = None, refusal: Optional[str] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.refusal: Optional[str] = refusal

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConflictError(StepjournalError):
    """The session's tail moved: nothing was written."""

    code = "conflict"


class OutcomeUnknownError(StepjournalError):
    """The store cannot tell whether an append landed: read the session before writing again."""

    code = "outcome_unknown"


class EncodeError(StepjournalError):
    """An event could not be encoded (larger than the record limit): nothing was written."""

    code = "encode"


class StoreError(StepjournalError):
    """The store failed (an I/O or database error)."""

    code = "store"


class CorruptError(StepjournalError):
    """Stored bytes are damaged."""

    code = "corrupt"


class NewerFormatError(StepjournalError):
    """Stored bytes are of a format version newer than this build reads."""

    code = "newer_format"


class PoisonedError(StepjournalError):
    """An earlier write or sync failed: the store refuses everything until it is reopened."""

    code = "poisoned"


class ReadOnlyError(StepjournalError):
    """The store was opened read-only."""

    code = "read_only"


class ClosedError(StepjournalError):
    """The store was closed: open it again to use it."""

    code = "closed"


class StoreContractError(StepjournalError):
    """The store answered against its own contract."""

    code = "store_contract"


class InvalidUrlError(StepjournalError):
    """The store's URL cannot be opened by this build."""

    code = "invalid_url"


class LockedError(StepjournalError):
    """Another process holds the journal's writer lock."""

    code = "locked"


class NotAJournalError(StepjournalError):
    """What was found where a store was to be opened or created is not one."""

    code = "not_a_journal"


class InvalidOptionsError(StepjournalError):
    """Options (of a store, of recovery) are inconsistent."""

    code = "invalid_options"


class ValidationError(StepjournalError):
    """Recovery refused the entry (FORMAT.md's ``validation_error``): nothing was written."""

    code = "validation_error"


class ShuttingDownError(StepjournalError):
    """The journal is shutting down and takes no new work."""

    code = "shutting_down"


class StoreInUseError(StepjournalError):
    """Another journal of this process runs over the same store."""

    code = "store_in_use"


class LeaseHeldError(StepjournalError):
    """Another owner's run holds a live lease on the session."""

    code = "lease_held"


class FencedError(StepjournalError):
    """A newer run (or a stop issued elsewhere) owns the session: this run writes nothing more."""

    code = "fenced"


class EndedError(StepjournalError):
    """The run has ended."""

    code = "ended"


class BrokenError(StepjournalError):
    """A store failure left the run unable to write."""

    code = "broken"


class InterruptedError(StepjournalError):  # noqa: A001 - the engine's `interrupted`, namespaced
    """This process let go of the run (a body lost, a shutdown, a body past its deadline): a new
    entry goes on. (Not the builtin ``InterruptedError``: use it as
    ``stepjournal.InterruptedError``.)"""

    code = "interrupted"


class DeadlineError(StepjournalError):
    """A body overran its deadline: the run was let go, a ``wake`` goes on."""

    code = "deadline"


class RefusedError(StepjournalError):
    """The protocol forbids the write now; ``refusal`` says which rule."""

    code = "refused"


class MalformedScenarioError(StepjournalError):
    """A recovery conformance scenario is not FORMAT.md's shape."""

    code = "malformed_scenario"


class InvalidIdError(StepjournalError):
    """An id breaks the rule for ids (empty, too long, or holding a control character)."""

    code = "invalid_id"


class InvalidJsonError(StepjournalError):
    """A text is not FORMAT.md's JSON form of an event."""

    code = "invalid_json"


class InvalidEntryError(StepjournalError):
    """An entry is not FORMAT.md's entry."""

    code = "invalid_entry"


class InvalidReplyError(StepjournalError):
    """A reply is not ``{text, calls}`` of known tools."""

    code = "invalid_reply"


class InvalidToolError(StepjournalError):
    """A tool's definition (its name, replay policy or input schema) is not acceptable."""

    code = "invalid_tool"


class InvalidAnswerError(StepjournalError):
    """An answer given from outside (a client's output) is not JSON."""

    code = "invalid_answer"


class InvalidOutcomeError(StepjournalError):
    """A run outcome given by name is not one of ``completed``, ``failed``, ``stopped``."""

    code = "invalid_outcome"


class CancelledError(StepjournalError):
    """The call's work was cancelled: its run can no longer write (fenced, or shut down).
    (Not ``asyncio.CancelledError``.)"""

    code = "cancelled"


ERROR_CLASSES: Dict[str, Type[StepjournalError]] = {
    cls.code: cls
    for cls in (
        ConflictError,
        OutcomeUnknownError,
        EncodeError,
        StoreError,
        CorruptError,
        NewerFormatError,
        PoisonedError,
        ReadOnlyError,
        ClosedError,
        StoreContractError,
        InvalidUrlError,
        LockedError,
        NotAJournalError,
        InvalidOptionsError,
        ValidationError,
        ShuttingDownError,
        StoreInUseError,
        LeaseHeldError,
        FencedError,
        EndedError,
        BrokenError,
        InterruptedError,
        DeadlineError,
        RefusedError,
        MalformedScenarioError,
        InvalidIdError,
        InvalidJsonError,
        InvalidEntryError,
        InvalidReplyError,
        InvalidToolError,
        InvalidAnswerError,
        InvalidOutcomeError,
        CancelledError,
    )
}
"""The exception class of each engine code."""


def from_native(code: str, refusal: Optional[str], message: str) -> StepjournalError:
    """The exception for an engine error (called by the native module). A code this package does
    not know (a newer engine's) still raises a StepjournalError, with that code."""
    cls = ERROR_CLASSES.get(code)
    if cls is None:
        return StepjournalError(message, code=code, refusal=refusal)
    return cls(message, refusal=refusal)
