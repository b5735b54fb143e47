"""The README's example: a tool defined once, a turn committed and driven, recovery at start-up."""

import asyncio
import sys

import stepjournal


@stepjournal.tool(
    replay="safe",  # two runs of the body, even overlapping, leave what one leaves
    input_schema={
        "type": "object",
        "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
        "required": ["key", "value"],
    },
)
async def set_preference(args, ctx):
    return {"saved": f"{ctx.session_id}/{args['key']}={args['value']}"}


async def main(directory):
    async with await stepjournal.open_journal(f"file:{directory}", tools=[set_preference]) as journal:
        # At start-up: finish what a crashed process left open, by the recovery rules.
        await journal.recover_all()

        run = await journal.begin_run("user-42", {"kind": "new_turn", "message": "window seat please"})
        step = await run.commit_reply(
            {
                "text": "Saving it.",
                "calls": [{"call": "c1", "tool": "set_preference", "args": {"key": "seat", "value": "window"}}],
            }
        )
        outcome = await step.drive()  # {"status": "committed", "checkpoint": ..., "answers": [...]}
        await run.end("completed")
        print(outcome["answers"][0]["output"])  # {'saved': 'user-42/seat=window'}


asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "./data"))
