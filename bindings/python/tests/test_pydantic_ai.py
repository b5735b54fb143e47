"""stepjournal.pydantic_ai: a Pydantic AI agent's model requests and tool calls journalled through
stepjournal, with Pydantic AI's own test models (no network), and the agent killed with SIGKILL
mid-tool and recovered by the rules: the safe tool runs again under the same dispatch id, the
unsafe one is not run again and the model is told its outcome is unknown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("pydantic_ai", reason="Pydantic AI is not installed (pip install pydantic-ai-slim)")

import stepjournal
from conftest import run, run_cli

AGENT = Path(__file__).resolve().parent / "pydantic_ai_agent.py"


def test_an_agent_run_journals_each_model_request_and_tool_call_and_a_second_run_replays_them(url: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from stepjournal.pydantic_ai import StepjournalDurability, current_call, run_durable, unit_tools

    ran: List[Dict[str, Any]] = []
    agent = Agent(TestModel(), name="greeter", capabilities=[StepjournalDurability()])

    @agent.tool_plain(metadata={"stepjournal": {"replay": "safe"}})
    async def lookup(city: str) -> str:
        call = current_call()
        assert call is not None
        ran.append({"tool": "lookup", "dispatch_id": call.dispatch_id})
        return f"sunny in {city}"

    @agent.tool_plain
    async def send(text: str) -> str:
        call = current_call()
        assert call is not None
        ran.append({"tool": "send", "dispatch_id": call.dispatch_id})
        return "sent"

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=unit_tools())
        first = await run_durable(agent, journal, "s1", "weather?")
        assert sorted(r["tool"] for r in ran) == ["lookup", "send"]
        events = [json.loads(line) for line in await journal.export_lines("s1")]
        replies = [e for e in events if e["type"] == "reply_committed"]
        names = [r["calls"][0]["args"]["name"] for r in replies]
        assert any(n.endswith("model.request") for n in names)
        tools = {r["calls"][0]["args"]["name"].rsplit(":", 1)[-1]: r["calls"][0] for r in replies if ".call_tool:" in r["calls"][0]["args"]["name"]}
        assert tools["lookup"]["replay"] == "safe" and tools["send"]["replay"] == "unsafe"
        dispatch = {e["call"]: e["dispatch"] for e in events if e["type"] == "dispatch_minted"}
        assert {r["dispatch_id"] for r in ran} == {dispatch[tools["lookup"]["call"]], dispatch[tools["send"]["call"]]}
        assert events[-1]["type"] == "run_ended" and events[-1]["outcome"] == "completed"

        # Run again as after a crash at the very end: every unit replays its recorded result.
        ran.clear()
        again = await run_durable(agent, journal, "s1", "weather?")
        assert ran == [] and again.output == first.output
        await journal.close()

    run(main())
    verify = run_cli("verify", url)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def crash_and_recover(tmp_path: Path, hang: str) -> Dict[str, Any]:
    url = f"file:{tmp_path / 'journal'}"
    child = subprocess.Popen([sys.executable, str(AGENT), url, hang], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    started: List[Dict[str, Any]] = []
    deadline = time.monotonic() + 60
    for line in child.stdout:
        started.append(json.loads(line))
        if started[-1].get("started") == hang or time.monotonic() > deadline:
            break
    child.kill()
    child.wait()
    assert child.returncode == -9, "the child was killed with SIGKILL mid-tool"
    recovered = subprocess.run([sys.executable, str(AGENT), url, "none"], capture_output=True, text=True, timeout=120)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    lines = [json.loads(line) for line in recovered.stdout.splitlines() if line.strip()]
    return {"before": started, "after": lines, "url": url}


def test_a_safe_tool_interrupted_by_sigkill_runs_again_under_the_same_dispatch_id(tmp_path: Path) -> None:
    found = crash_and_recover(tmp_path, "hold_seat")
    before = [x for x in found["before"] if x.get("started") == "hold_seat"]
    after = [x for x in found["after"] if x.get("started") == "hold_seat"]
    assert [x["attempt"] for x in before] == [1] and [x["attempt"] for x in after] == [2]
    assert after[0]["dispatch"] == before[0]["dispatch"]
    output = found["after"][-1]["output"]
    assert output == {"hold_seat": ["ToolReturnPart", "held 14C"], "charge_card": ["ToolReturnPart", "charged 120"]}
    # The first model request was recorded: the recovery replayed it, and asked the model once more.
    assert found["after"][-1]["model_calls"] == 1


def test_an_unsafe_tool_interrupted_by_sigkill_is_not_run_again_and_the_model_is_told_its_outcome_is_unknown(tmp_path: Path) -> None:
    from stepjournal.pydantic_ai import OUTCOME_UNKNOWN

    found = crash_and_recover(tmp_path, "charge_card")
    assert [x["started"] for x in found["before"]] == ["hold_seat", "charge_card"]
    assert [x for x in found["after"] if x.get("started")] == [], "neither tool ran again (hold_seat's result was recorded)"
    output = found["after"][-1]["output"]
    assert output["hold_seat"] == ["ToolReturnPart", "held 14C"]
    assert output["charge_card"][1] == OUTCOME_UNKNOWN
    shown = run_cli("show", found["url"], "s1", "--json")
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    paired = [e for e in events if e["type"] == "paired"]
    assert [e["reason"] for e in paired] == ["outcome_unknown"]
