"""Errors and their codes: one class per engine code, raised for bad URLs, a locked journal,
malformed scenarios, refused entries, bad ids and tools."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Type

import pytest

import stepjournal
from stepjournal import _native
from conftest import run


def raises(cls: Type[stepjournal.StepjournalError], code: str) -> typing.Any:
    class Check:
        def __enter__(self) -> None:
            self.ctx = pytest.raises(cls)
            self.info = self.ctx.__enter__()

        def __exit__(self, *exc: typing.Any) -> bool:
            handled = self.ctx.__exit__(*exc)
            e = self.info.value
            assert isinstance(e, stepjournal.StepjournalError)
            assert e.code == code, str(e)
            assert str(e) != ""
            return bool(handled)

    return Check()


def test_every_code_the_engine_lists_has_its_class_and_no_class_is_extra() -> None:
    errors, refusals = _native.error_codes()
    assert sorted(stepjournal.ERROR_CLASSES) == sorted(errors)
    assert list(typing.get_args(stepjournal.ErrorCode)) == errors
    assert list(typing.get_args(stepjournal.RefusalCode)) == refusals
    classes = [
        v
        for v in vars(stepjournal).values()
        if isinstance(v, type) and issubclass(v, stepjournal.StepjournalError) and v is not stepjournal.StepjournalError
    ]
    assert sorted(c.code for c in classes) == sorted(errors), "exactly one exported class per code"
    for code, cls in stepjournal.ERROR_CLASSES.items():
        assert cls.code == code
        assert issubclass(cls, stepjournal.StepjournalError) and issubclass(cls, Exception)
        made = stepjournal._errors.from_native(code, None, "m")
        assert type(made) is cls and made.code == code and str(made) == "m"


def test_a_code_the_package_does_not_know_is_still_a_stepjournal_error_with_that_code() -> None:
    made = stepjournal._errors.from_native("from_the_future", None, "new")
    assert type(made) is stepjournal.StepjournalError and made.code == "from_the_future"


def test_a_bad_url_is_invalid_url_saying_what_is_wrong(tmp_path: Path) -> None:
    async def main() -> None:
        for url in ["ftp://example.invalid/j", "file:", "/no/scheme", "mysql://x"]:
            with raises(stepjournal.InvalidUrlError, "invalid_url"):
                await stepjournal.open_journal(url)
        missing = tmp_path / "absent"
        with pytest.raises(stepjournal.InvalidUrlError, match=str(missing)):
            await stepjournal.open_journal(f"file:{missing}", create=False)

    run(main())


def test_a_journal_another_writer_holds_is_locked(url: str) -> None:
    async def main() -> None:
        first = await stepjournal.open_journal(url)
        with raises(stepjournal.LockedError, "locked"):
            await stepjournal.open_journal(url)
        await first.close()
        again = await stepjournal.open_journal(url)
        await again.close()

    run(main())


def test_a_malformed_scenario_is_malformed_scenario() -> None:
    for text in ["{", "[]", "{}", '{"log": 3, "tools": {}, "entry": {"kind": "wake"}}', "[" * 1000 + "]" * 1000]:
        with raises(stepjournal.MalformedScenarioError, "malformed_scenario"):
            stepjournal.plan(text)


def test_a_refused_entry_is_validation_error_and_a_bad_entry_invalid_entry(url: str) -> None:
    async def main() -> None:
        journal = await stepjournal.open_journal(url)
        with raises(stepjournal.ValidationError, "validation_error"):
            await journal.begin_run("s", {"kind": "retry"})
        with raises(stepjournal.InvalidEntryError, "invalid_entry"):
            await journal.begin_run("s", {"kind": "jump"})
        with raises(stepjournal.InvalidEntryError, "invalid_entry"):
            await journal.begin_run("s", {"kind": "wake", "message": "dropped?"})
        await journal.close()

    run(main())


def test_a_session_id_the_library_refuses_is_invalid_id_without_echoing_it(url: str) -> None:
    async def main() -> None:
        journal = await stepjournal.open_journal(url)
        long = "a" * 5000
        for bad in [long, "", "line\nbreak", "bidi\u202e"]:
            with pytest.raises(stepjournal.InvalidIdError) as info:
                await journal.begin_run(bad, {"kind": "new_turn", "message": "hi"})
            assert len(str(info.value)) < 300
        with raises(stepjournal.InvalidIdError, "invalid_id"):
            await journal.stop(long)
        with raises(stepjournal.InvalidIdError, "invalid_id"):
            await journal.answer_client(long, "c1", {})
        with raises(stepjournal.InvalidIdError, "invalid_id"):
            await journal.decide_approval(long, "c1", True)
        await journal.close()

    run(main())


def test_two_tools_of_one_name_are_refused_naming_it(url: str) -> None:
    async def body(args: object, ctx: stepjournal.CallCtx) -> int:
        return 1

    safe = stepjournal.define_tool("pay", replay="safe", execute=body)
    unsafe = stepjournal.define_tool("pay", replay="unsafe", execute=body)

    async def main() -> None:
        with pytest.raises(stepjournal.InvalidToolError, match="`pay` is defined twice"):
            await stepjournal.open_journal(url, tools=[safe, unsafe])
        journal = await stepjournal.open_journal(url, tools=[unsafe])
        assert journal.tools_json()["pay"]["replay"] == "unsafe"
        await journal.close()

    run(main())


def test_an_unknown_kind_or_replay_is_invalid_tool_with_the_engines_list(url: str) -> None:
    async def body(args: object, ctx: stepjournal.CallCtx) -> int:
        return 1

    async def main() -> None:
        odd_kind = stepjournal.define_tool("odd", kind="daemon", execute=body)  # type: ignore[arg-type]
        with pytest.raises(stepjournal.InvalidToolError, match="kind `daemon`.*remote_agent"):
            await stepjournal.open_journal(url, tools=[odd_kind])
        odd_replay = stepjournal.define_tool("odd", replay="sometimes", execute=body)  # type: ignore[arg-type]
        with pytest.raises(stepjournal.InvalidToolError, match="replay `sometimes`"):
            await stepjournal.open_journal(url, tools=[odd_replay])

    run(main())


def test_bad_options_are_refused_before_anything_opens(url: str) -> None:
    async def main() -> None:
        with raises(stepjournal.InvalidOptionsError, "invalid_options"):
            await stepjournal.open_journal(url, durability="sometimes")
        with raises(stepjournal.InvalidOptionsError, "invalid_options"):
            await stepjournal.open_journal(url, max_bodies=0)
        with raises(stepjournal.InvalidOptionsError, "invalid_options"):
            await stepjournal.open_journal(url, lease_ttl=-1)
        with raises(stepjournal.InvalidOptionsError, "invalid_options"):
            await stepjournal.open_journal(url, owner=" ")
        with pytest.raises(TypeError):
            await stepjournal.open_journal(url, lease_ttl="soon")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await stepjournal.open_journal(url, nonsense=1)  # type: ignore[call-arg]

    run(main())


def test_a_refusal_names_its_rule(url: str) -> None:
    async def body(args: object, ctx: stepjournal.CallCtx) -> int:
        return 1

    echo = stepjournal.define_tool("echo", execute=body)

    async def main() -> None:
        journal = await stepjournal.open_journal(url, tools=[echo])
        r = await journal.begin_run("s", {"kind": "new_turn", "message": "hi"})
        with pytest.raises(stepjournal.RefusedError) as info:
            await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "echo"}, {"call": "c1", "tool": "echo"}]})
        assert info.value.code == "refused" and info.value.refusal == "repeated_call"
        with pytest.raises(stepjournal.RefusedError) as info:
            await r.commit_reply({"text": "", "calls": [{"call": "c1", "tool": "nope"}]})
        assert info.value.refusal == "unknown_tool"
        with raises(stepjournal.InvalidOutcomeError, "invalid_outcome"):
            await r.end("exploded")
        await journal.close()

    run(main())
