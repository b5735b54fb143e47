// Fencing from JavaScript: a body of a run that a later wake overtook finishes, its result is
// refused, and its ctx.signal fired.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, defineTool, openJournal } from '../index.js';
import { gate, scratch, watchdog } from './helpers.mjs';

test('a late body of a fenced run: its signal aborts, its result is refused, the new run runs attempt 2', async () => {
  const started = gate();
  const release = gate();
  const seen = [];
  const slow = defineTool({
    name: 'slow',
    replay: 'safe',
    execute: async (_args, ctx) => {
      seen.push({ attempt: ctx.attempt, dispatchId: ctx.dispatchId, signal: ctx.signal });
      if (ctx.attempt === 1) {
        started.open();
        await release.promise;
      }
      return { attempt: ctx.attempt };
    },
  });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [slow] });
  const first = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await first.commitReply({ text: 'working', calls: [{ call: 'c1', tool: 'slow', args: {} }] });
  const driving = step.drive();
  await watchdog(started.promise, 30_000, 'the first body');

  const aborted = new Promise((resolve) => seen[0].signal.addEventListener('abort', resolve, { once: true }));
  const second = await journal.beginRun('s', { kind: 'wake' });
  await watchdog(aborted, 30_000, 'the abort of the fenced body');
  assert.equal(seen[0].signal.aborted, true);
  assert.equal(seen[0].signal.reason.code, 'cancelled');

  release.open();
  await assert.rejects(watchdog(driving, 30_000, 'the fenced drive'), (e) => e instanceof StepjournalError && e.code === 'fenced');
  const lines = (await journal.exportLines('s')).map((l) => JSON.parse(l));
  assert.equal(lines.filter((e) => e.type === 'tool_result').length, 0, 'the late result never landed');

  assert.equal(second.plan.calls[0].action, 'run');
  assert.equal(second.plan.calls[0].attempt, 2);
  const outcome = await second.drive();
  assert.deepEqual(outcome.answers.map((a) => a.output), [{ attempt: 2 }]);
  assert.equal(seen[1].dispatchId, seen[0].dispatchId);
  assert.equal(seen[1].signal.aborted, false);
  await second.end('completed');
});
