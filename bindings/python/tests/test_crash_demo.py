"""Runs examples/crash_demo.py: a child killed with SIGKILL mid-body, recovery in a new process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import PACKAGE


def test_the_crash_demo_reruns_the_safe_call_as_attempt_2_and_answers_the_unsafe_one_outcome_unknown(tmp_path: Path) -> None:
    demo = subprocess.run(
        [sys.executable, str(PACKAGE / "examples" / "crash_demo.py"), str(tmp_path / "journal")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    found = json.loads(demo.stdout.strip().split("\n")[-1])
    assert found["killed"] == "SIGKILL"
    assert found["safe"]["before"]["attempt"] == 1
    assert found["safe"]["after"]["attempt"] == 2
    assert found["safe"]["after"]["dispatch_id"] == found["safe"]["before"]["dispatch_id"]
    assert found["unsafe"]["ran_again"] is False
    assert found["unsafe"]["answer"]["type"] == "paired"
    assert found["unsafe"]["answer"]["reason"] == "outcome_unknown"
    assert found["ok"] is True
