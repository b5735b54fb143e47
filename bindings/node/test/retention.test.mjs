// Retention and who-and-why from Node: openJournal's `retainEndedForMs` and `operator`, and
// `journal.retain(ageMs)`.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, defineClientTool, openJournal } from '../index.js';
import { scratch } from './helpers.mjs';

const ask = defineClientTool({ name: 'ask', inputSchema: { type: 'object' } });

async function exportedTypes(journal, session) {
  return (await journal.exportLines(session)).map((l) => JSON.parse(l));
}

test('retain deletes the sessions that ended longer ago than the age and keeps the rest', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  const journal = await openJournal(url, { tools: [ask] });
  for (const [session, outcome] of [['done', 'completed'], ['failed', 'failed']]) {
    const run = await journal.beginRun(session, { kind: 'new_turn', message: 'go' });
    await run.end(outcome);
  }
  await journal.beginRun('open', { kind: 'new_turn', message: 'go' });
  const waiting = await journal.beginRun('waiting', { kind: 'new_turn', message: 'go' });
  const step = await waiting.commitReply({ text: '', calls: [{ call: 'c1', tool: 'ask', args: {} }] });
  assert.equal((await step.drive()).status, 'suspended');
  await new Promise((r) => setTimeout(r, 50));
  // Nothing ended an hour ago; everything ended 20 ms ago but the open and the suspended.
  assert.deepEqual(await journal.retain(3_600_000), { deleted: [], changed: [] });
  const done = await journal.retain(20);
  assert.deepEqual(done.deleted.sort(), ['done', 'failed']);
  assert.deepEqual(await journal.exportLines('done'), []);
  assert.equal((await journal.exportLines('open')).length > 0, true);
  assert.equal((await journal.exportLines('waiting')).length > 0, true);
  assert.throws(() => journal.retain(0), TypeError);
  await journal.close();
});

test('retainEndedForMs deletes by itself; operator signs each run', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  const journal = await openJournal(url, { tools: [ask], retainEndedForMs: 1, operator: { name: 'ana', reason: 'nightly cleanup' } });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const started = (await exportedTypes(journal, 's')).find((e) => e.type === 'run_started');
  assert.deepEqual(started.by, { name: 'ana', reason: 'nightly cleanup' });
  await run.end('completed');
  // A pass every second (a tenth of the age, at least a second): watched for up to 20 s.
  const start = Date.now();
  while ((await journal.exportLines('s')).length > 0) {
    assert.ok(Date.now() - start < 20_000, 'the retention thread deleted nothing');
    await new Promise((r) => setTimeout(r, 100));
  }
  await journal.close();
});

test('bad retention and operator options are refused before anything opens', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  for (const retainEndedForMs of [0, -1, 1.5, '10']) {
    await assert.rejects(openJournal(url, { retainEndedForMs }), TypeError, String(retainEndedForMs));
  }
  for (const operator of [null, 'ana', { name: 1 }, { who: 'ana' }]) {
    await assert.rejects(openJournal(url, { operator }), TypeError, JSON.stringify(operator));
  }
  await assert.rejects(openJournal(url, { operator: { name: 'ana\u0007' } }), (e) => e instanceof StepjournalError && e.code === 'invalid_id');
});
