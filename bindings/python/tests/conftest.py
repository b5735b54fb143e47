"""Shared by the tests: the workspace's CLI, scratch journals, a watchdog."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any, Awaitable, List, TypeVar

import pytest

PACKAGE = Path(__file__).resolve().parent.parent
WORKSPACE = PACKAGE.parent.parent
CASES = WORKSPACE / "tests" / "conformance" / "cases"

T = TypeVar("T")

_cli: List[Path] = []


def stepjournal_cli() -> Path:
    """The `stepjournal` CLI of the workspace's target directory (built by cargo if absent)."""
    if _cli:
        return _cli[0]
    target = Path(os.environ.get("CARGO_TARGET_DIR", WORKSPACE / "target"))
    if not target.is_absolute():
        target = WORKSPACE / target
    cli = target / "debug" / "stepjournal"
    if not cli.exists():
        subprocess.run(
            ["cargo", "build", "-p", "stepjournal-cli", "--bin", "stepjournal"],
            cwd=WORKSPACE,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    assert cli.exists(), f"{cli} is missing after the build"
    _cli.append(cli)
    return cli


def run_cli(*args: str) -> "subprocess.CompletedProcess[str]":
    """Runs the CLI: its status, stdout and stderr."""
    return subprocess.run([str(stepjournal_cli()), *args], capture_output=True, text=True, timeout=120)


def lines(text: str) -> List[str]:
    return [line for line in text.split("\n") if line != ""]


async def watchdog(awaitable: Awaitable[T], seconds: float = 60, what: str = "the operation") -> T:
    """`awaitable`, or an AssertionError after `seconds`: a hang fails the test instead of
    stalling it."""
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except asyncio.TimeoutError:
        raise AssertionError(f"{what} did not finish within {seconds} s") from None


def run(coro: Awaitable[T]) -> T:
    """Runs `coro` in a new event loop, with a watchdog over the whole test."""
    return asyncio.run(watchdog(coro, 120, "the test"))


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A fresh file journal's URL."""
    return f"file:{tmp_path / 'journal'}"


def requires(tool: str) -> Any:
    """Skips the test when `tool` cannot be found, saying why, unless CI=true (then it fails:
    CI installs what the tests need)."""
    import shutil

    if shutil.which(tool) is None and os.environ.get("CI") != "true":
        return pytest.mark.skip(reason=f"`{tool}` is not on PATH")
    return lambda f: f
