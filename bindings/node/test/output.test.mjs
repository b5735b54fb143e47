// ctx.output(): committed at most once per interval (100 ms) and at least once per interval while
// text is pending, so a crash loses at most the last interval's text, not everything since the
// last output.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { defineTool, openJournal } from '../index.js';
import { gate, scratch, watchdog } from './helpers.mjs';

const chunks = async (journal, session) =>
  (await journal.exportLines(session)).map((l) => JSON.parse(l)).filter((l) => l.type === 'output_chunk').map((l) => l.text);

test('output given and then left alone is committed within its interval, while the body still runs', async () => {
  const release = gate();
  const started = gate();
  const work = defineTool({
    name: 'work',
    replay: 'safe',
    execute: async (_args, ctx) => {
      for (let i = 0; i < 20; i++) await ctx.output(`${i};`);
      started.open();
      await release.promise;
      return { done: true };
    },
  });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [work] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'work', args: {} }] });
  const driving = step.drive();
  await watchdog(started.promise, 10_000, 'the body');
  const began = performance.now();
  let text = '';
  while (performance.now() - began < 5_000) {
    text = (await chunks(journal, 's')).join('');
    if (text.endsWith('19;')) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const waited = performance.now() - began;
  assert.equal(text, Array.from({ length: 20 }, (_, i) => `${i};`).join(''), 'every output committed before the result');
  assert.ok(waited < 1_000, `the last output took ${Math.round(waited)} ms to be committed`);
  release.open();
  const outcome = await driving;
  assert.equal(outcome.status, 'committed');
  assert.ok((await chunks(journal, 's')).length <= 3, 'outputs within one interval are joined');
});

test('output over what one chunk holds is cut with a note, and the step commits', async () => {
  const loud = defineTool({
    name: 'loud',
    replay: 'safe',
    execute: async (_args, ctx) => {
      await ctx.output('x'.repeat(20_000_000));
      return { done: true };
    },
  });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [loud] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'loud', args: {} }] });
  const outcome = await step.drive();
  assert.equal(outcome.status, 'committed');
  assert.deepEqual(outcome.answers[0].output, { done: true });
  const [chunk] = await chunks(journal, 's');
  assert.ok(chunk.length < 16 * 1024 * 1024, `${chunk.length}`);
  assert.match(chunk.slice(-200), /\[stepjournal: the last \d+ bytes of this output were cut: one output chunk holds at most \d+ bytes\]$/);
  assert.ok(chunk.startsWith('x'.repeat(1000)));
});
