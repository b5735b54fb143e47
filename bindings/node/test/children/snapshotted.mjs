// A runtime process the snapshot tests start: `crash DIR` grows session `s` over five steps with
// snapshotEvery 2, starts a sixth whose safe call's body never settles, says the dispatch id it
// ran under and the transcript, and kills itself with SIGKILL mid-body.
import { defineTool, openJournal } from '../../index.js';

const say = (what) => process.stdout.write(`${JSON.stringify(what)}\n`);
const [mode, dir] = process.argv.slice(2);
if (mode !== 'crash') {
  console.error(`snapshotted: unknown mode ${mode}`);
  process.exit(2);
}

let started;
const running = new Promise((resolve) => {
  started = resolve;
});
const fetch = defineTool({
  name: 'fetch',
  replay: 'safe',
  execute: (args, ctx) => {
    if (!args.hang) return { n: args.n };
    started({ dispatchId: ctx.dispatchId, attempt: ctx.attempt });
    return new Promise(() => {});
  },
});
const journal = await openJournal(`file:${dir}`, { tools: [fetch], snapshotEvery: 2 });
const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
for (let n = 1; n <= 5; n++) {
  const step = await run.commitReply({ text: `step ${n}`, calls: [{ call: `c${n}`, tool: 'fetch', args: { n } }] });
  await step.drive();
}
const step = await run.commitReply({ text: 'step 6', calls: [{ call: 'c6', tool: 'fetch', args: { hang: true } }] });
step.drive().catch(() => {});
say({ started: await running, transcript: await run.transcript() });
process.kill(process.pid, 'SIGKILL');
