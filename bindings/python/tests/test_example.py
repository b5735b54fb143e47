"""The README's example runs and prints what the README says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import PACKAGE, WORKSPACE


def readme_example() -> str:
    text = (WORKSPACE / "README.md").read_text()
    start = text.index("<!-- example: python -->")
    body = text[start:].split("```python\n", 1)[1].split("```", 1)[0]
    return body


def test_the_readme_example_is_examples_example_py() -> None:
    assert readme_example() == (PACKAGE / "examples" / "example.py").read_text()


def test_the_example_saves_the_preference(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(PACKAGE / "examples" / "example.py"), str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "{'saved': 'user-42/seat=window'}"
