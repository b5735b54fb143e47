// A runtime process the concurrency tests start: `lost DIR [close]` drives an unsafe call whose
// body returns a Promise nothing can settle, then collects it (run with --expose-gc); `setup URL`
// leaves a session crashed (shut down mid-body) and one suspended on a client call; `live URL`
// holds a run mid-body until its standard input closes, then finishes it.
import { createInterface } from 'node:readline';

import { defineClientTool, defineTool, openJournal } from '../../index.js';

const say = (what) => process.stdout.write(`${JSON.stringify(what)}\n`);
const [mode, where, after] = process.argv.slice(2);
const never = () => new Promise(() => {});

if (mode === 'lost') {
  const send = defineTool({ name: 'send', replay: 'unsafe', execute: never });
  const journal = await openJournal(`file:${where}`, { tools: [send] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'send', args: {} }] });
  const driving = step.drive().then(
    (outcome) => ({ outcome }),
    (e) => ({ code: e.code, message: e.message }),
  );
  await new Promise((r) => setTimeout(r, 100));
  if (after === 'close') say({ abandoned: await journal.close({ deadlineMs: 50 }) });
  // The body's Promise is unreachable: collecting it drops the native side's wait on it.
  for (let i = 0; i < 5; i++) {
    globalThis.gc();
    await new Promise((r) => setTimeout(r, 20));
  }
  say({ drive: await driving, status: run.status });
} else if (mode === 'setup') {
  const fetch = defineTool({ name: 'fetch', replay: 'safe', execute: never });
  const ask = defineClientTool({ name: 'ask' });
  const journal = await openJournal(where, { tools: [fetch, ask] });
  const waiting = await journal.beginRun('waiting', { kind: 'new_turn', message: 'ask me' });
  const asked = await waiting.commitReply({ text: '', calls: [{ call: 'q1', tool: 'ask', args: {} }] });
  say({ waiting: await asked.drive() });
  const crashed = await journal.beginRun('crashed', { kind: 'new_turn', message: 'fetch' });
  const step = await crashed.commitReply({ text: '', calls: [{ call: 'f1', tool: 'fetch', args: {} }] });
  step.drive().catch(() => {});
  await new Promise((r) => setTimeout(r, 100));
  say({ abandoned: await journal.close({ deadlineMs: 10 }) });
  process.exit(0);
} else if (mode === 'live') {
  let release;
  const released = new Promise((r) => {
    release = r;
  });
  const work = defineTool({ name: 'work', replay: 'unsafe', execute: async () => (await released, { done: true }) });
  const journal = await openJournal(where, { tools: [work] });
  const run = await journal.beginRun('live', { kind: 'new_turn', message: 'work' });
  const step = await run.commitReply({ text: '', calls: [{ call: 'w1', tool: 'work', args: {} }] });
  const driving = step.drive();
  await new Promise((r) => setTimeout(r, 50));
  say({ ready: true });
  createInterface({ input: process.stdin }).on('close', release);
  const outcome = await driving;
  await run.end('completed');
  say({ outcome, status: run.status });
  await journal.close();
} else {
  console.error(`actor: unknown mode ${mode}`);
  process.exit(2);
}
