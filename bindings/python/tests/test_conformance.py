"""The public conformance cases through `journal.plan` and `stepjournal.plan`: the same plan as
the CLI's `stepjournal plan --scenario`, and the plan each case expects."""

from __future__ import annotations

import json
from typing import Any, Dict

import stepjournal
from conftest import CASES, run, run_cli

CASE_FILES = sorted(p for p in CASES.iterdir() if p.suffix == ".json")


def test_there_are_the_30_public_cases() -> None:
    assert len(CASE_FILES) == 30


def check_expect(name: str, planned: Dict[str, Any], expect: Dict[str, Any]) -> None:
    error = planned["error"]["kind"] if planned["error"] else None
    assert error == expect.get("error"), f"{name}: error"
    calls = expect.get("calls") or {}
    if "calls" in expect:
        assert sorted(c["call"] for c in planned["calls"]) == sorted(calls), f"{name}: the calls planned"
    for call, members in calls.items():
        found = [c for c in planned["calls"] if c["call"] == call]
        assert found, f"{name}: call {call} planned"
        for key, value in members.items():
            assert found[0].get(key) == value, f"{name}: {call}.{key}"
    if "appends" in expect:
        assert [a["type"] for a in planned["appends"]] == expect["appends"], f"{name}: appends"
    for call, members in (expect.get("paired") or {}).items():
        paired = [a for a in planned["appends"] if a["type"] == "paired" and a["call"] == call]
        assert paired, f"{name}: {call} paired"
        for key, value in members.items():
            assert paired[0].get(key) == value, f"{name}: paired {call}.{key}"


def test_journal_plan_gives_each_case_the_cli_plan_and_the_case_expects_it(url: str) -> None:
    async def main() -> None:
        journal = await stepjournal.open_journal(url)
        for path in CASE_FILES:
            text = path.read_text()
            scenario = json.loads(text)
            from_python = journal.plan(scenario)
            cli = run_cli("plan", "--scenario", str(path))
            assert cli.returncode == 0, f"{path.name}: {cli.stderr}"
            assert from_python == json.loads(cli.stdout), path.name
            assert stepjournal.plan(text) == from_python, f"{path.name}: from the text"
            check_expect(path.name, from_python, scenario["expect"])
        await journal.close()

    run(main())


def test_the_plan_never_reads_expect() -> None:
    path = CASE_FILES[0]
    scenario = json.loads(path.read_text())
    planned = stepjournal.plan(scenario)
    scenario["expect"] = {"error": "validation_error", "calls": {}, "appends": ["nonsense"]}
    assert stepjournal.plan(scenario) == planned
