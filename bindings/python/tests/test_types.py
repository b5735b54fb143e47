"""The package's type hints (inline, `py.typed`, and the native module's `_native.pyi`) pass
mypy --strict, as a runtime's code uses them, and refuse what they should."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PACKAGE

TYPES = Path(__file__).resolve().parent / "types"

try:
    import mypy  # noqa: F401

    HAVE_MYPY = True
except ImportError:
    HAVE_MYPY = False

needs_mypy = pytest.mark.skipif(not HAVE_MYPY and os.environ.get("CI") != "true", reason="mypy is not installed (pip install mypy)")


def mypy_strict(tmp_path: Path, *files: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), *map(str, files)],
        cwd=PACKAGE / "python",
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_package_ships_py_typed_and_the_native_modules_stub() -> None:
    assert (PACKAGE / "python" / "stepjournal" / "py.typed").exists()
    assert (PACKAGE / "python" / "stepjournal" / "_native.pyi").exists()


@needs_mypy
def test_the_package_and_a_runtimes_use_of_it_pass_mypy_strict(tmp_path: Path) -> None:
    package = PACKAGE / "python" / "stepjournal"
    files = [p for p in package.iterdir() if p.suffix in (".py", ".pyi")]
    try:
        import pydantic_ai  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        # The optional extra's module is checked where Pydantic AI is installed (CI installs it).
        files = [p for p in files if p.name != "pydantic_ai.py"]
    checked = mypy_strict(tmp_path, *files, TYPES / "usage.py")
    assert checked.returncode == 0, checked.stdout + checked.stderr


@needs_mypy
def test_mypy_strict_refuses_each_misuse(tmp_path: Path) -> None:
    source = (TYPES / "misuse.py").read_text().split("\n")
    expected = {i + 1 for i, line in enumerate(source) if line.rstrip().endswith("# error")}
    checked = mypy_strict(tmp_path, TYPES / "misuse.py")
    flagged = {int(m.group(1)) for m in re.finditer(r"misuse\.py:(\d+): error", checked.stdout)}
    assert flagged == expected, checked.stdout
