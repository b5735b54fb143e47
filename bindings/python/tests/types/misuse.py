"""Checked by mypy --strict (tests/test_types.py), never run: each line marked `# error` must be
refused by the package's types."""

from __future__ import annotations

import stepjournal


async def body(args: object, ctx: stepjournal.CallCtx) -> int:
    return 1


stepjournal.define_tool("t", replay="sometimes", execute=body)  # error
stepjournal.define_tool("t", kind="daemon", execute=body)  # error


async def main(journal: stepjournal.Journal) -> None:
    await journal.begin_run(42, "wake")  # error
    n: int = ctx_attempt_as_str(journal)  # error


def ctx_attempt_as_str(journal: stepjournal.Journal) -> str:
    return journal.owner
