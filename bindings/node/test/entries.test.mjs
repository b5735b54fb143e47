// Entries as the seeds write them: `checkpointId` is read as `checkpoint`, and a member an entry
// does not carry is refused rather than dropped (a dropped checkpoint retried from the wrong step).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, defineTool, openJournal } from '../index.js';
import { scratch } from './helpers.mjs';

const echo = defineTool({ name: 'echo', replay: 'safe', execute: async (args) => args });

async function failedStep(journal, session) {
  const run = await journal.beginRun(session, { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: 'x', calls: [{ call: 'c1', tool: 'echo', args: {} }] });
  await run.fail('the model timed out');
  return step.checkpoint;
}

const invalidEntry = (pattern) => (e) => {
  assert.ok(e instanceof StepjournalError, String(e));
  assert.equal(e.code, 'invalid_entry', e.message);
  assert.match(e.message, pattern);
  return true;
};

test("retry with the seeds' checkpointId retries from that checkpoint", async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [echo] });
  const checkpoint = await failedStep(journal, 'a');
  // An unknown checkpoint is refused: the id was read, not dropped.
  await assert.rejects(journal.beginRun('a', { kind: 'retry', checkpointId: 'no-such-checkpoint', message: 'again' }), (e) => e instanceof StepjournalError && e.code !== 'invalid_entry');
  const retried = await journal.beginRun('a', { kind: 'retry', checkpointId: checkpoint, message: 'from there' });
  assert.equal(retried.plan.error, null);
  const spelled = await failedStep(journal, 'b');
  const same = await journal.beginRun('b', { kind: 'retry', checkpoint: spelled, message: 'from there' });
  assert.deepEqual(same.plan.calls.map((c) => [c.call, c.action]), retried.plan.calls.map((c) => [c.call, c.action]));
});

test('a member the entry does not carry is invalid_entry, naming it', async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [echo] });
  await assert.rejects(journal.beginRun('s', { kind: 'wake', message: 'hello' }), invalidEntry(/does not carry `message`/));
  await assert.rejects(journal.beginRun('s', { kind: 'new_turn', message: 'hi', checkpiont: 'x' }), invalidEntry(/`checkpiont`/));
  await assert.rejects(journal.beginRun('s', { kind: 'retry', checkpoint: 'a', checkpointId: 'b' }), invalidEntry(/both `checkpoint` and `checkpointId`/));
  const long = 'x'.repeat(5000);
  await assert.rejects(journal.beginRun('s', { kind: long }), (e) => invalidEntry(/not FORMAT.md's entry JSON/)(e) && e.message.length < 600);
  // Members given as null are absent, as JSON.stringify drops undefined ones.
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'hi', checkpoint: null });
  assert.equal(run.plan.error, null);
});

test("journal.steps reads each saved step's checkpoint, which retry takes", async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [echo] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const first = await run.commitReply({ text: 'one', calls: [{ call: 'c1', tool: 'echo', args: {} }] });
  const done = await first.drive();
  const second = await run.commitReply({ text: 'two', calls: [{ call: 'c2', tool: 'echo', args: {} }] });
  await run.fail('the model timed out');
  const steps = await journal.steps('s');
  assert.deepEqual(steps, [
    { step: first.number, checkpoint: first.checkpoint, committed: true, commitCheckpoint: done.checkpoint },
    { step: second.number, checkpoint: second.checkpoint, committed: false, commitCheckpoint: null },
  ]);
  const retried = await journal.beginRun('s', { kind: 'retry', checkpointId: steps[1].checkpoint, message: 'again' });
  assert.equal(retried.plan.error, null);
  assert.deepEqual(await journal.steps('nobody'), []);
});
