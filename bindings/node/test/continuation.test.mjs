// A cut model stream from Node: `run.modelAborted(partial, { continuation })` records the
// partial answer and the provider's handle (`model_aborted.continuation`), the transcript's
// `aborted` item gives the handle back, in the same process and after a crash, so a runtime
// resumes the answer; a handle that breaks the id rule is refused, nothing written.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, defineTool, openJournal } from '../index.js';
import { packageDir, scratch } from './helpers.mjs';

const child = join(packageDir, 'test', 'children', 'aborted.mjs');
const events = async (journal, session) => (await journal.exportLines(session)).map((l) => JSON.parse(l));
const aborted = (items) => items.filter((i) => i.type === 'aborted');
const fetch = defineTool({ name: 'fetch', replay: 'safe', execute: () => ({ ok: true }) });

test('modelAborted records the partial answer and the continuation, and the transcript gives both back', async () => {
  const dir = scratch();
  const journal = await openJournal(`file:${dir}`, { tools: [fetch] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  await run.modelAborted('I was saying', { continuation: 'job-42' });
  await run.modelAborted('no handle this time');
  await run.modelAborted('nor here', {});
  assert.deepEqual(
    aborted(await run.transcript()).map(({ partial, continuation }) => ({ partial, continuation })),
    [
      { partial: 'I was saying', continuation: 'job-42' },
      { partial: 'no handle this time', continuation: undefined },
      { partial: 'nor here', continuation: undefined },
    ],
  );
  const log = (await events(journal, 's')).filter((e) => e.type === 'model_aborted');
  assert.deepEqual(log.map((e) => e.continuation), ['job-42', undefined, undefined]);
  assert.ok(!('continuation' in log[1]), 'absent, not null, in the export');
  await run.end('completed');
  // Read back from the store, past the run: the same items.
  assert.equal(aborted(await journal.transcript('s'))[0].continuation, 'job-42');
  await journal.close();
});

test('a continuation that breaks the id rule is refused and nothing is written; a step open refuses it too', async () => {
  const journal = await openJournal(`file:${scratch()}`, { tools: [fetch] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const before = (await events(journal, 's')).length;
  for (const bad of ['', 'job\u001b[2J', 'x'.repeat(1025)]) {
    await assert.rejects(run.modelAborted('half', { continuation: bad }), (e) => {
      assert.ok(e instanceof StepjournalError, String(e));
      assert.equal(e.code, 'invalid_id', e.message);
      assert.ok(!e.message.includes('\u001b'), e.message);
      return true;
    });
  }
  assert.throws(() => run.modelAborted('half', { continuation: 42 }), TypeError);
  assert.throws(() => run.modelAborted(undefined), TypeError);
  assert.equal((await events(journal, 's')).length, before, 'nothing written');
  const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'fetch', args: {} }] });
  await assert.rejects(run.modelAborted('half', { continuation: 'job-1' }), (e) => e.refusal === 'step_open');
  await step.drive();
  await run.end('completed');
  await journal.close();
});

test('after a crash the wake reads the cut answer and its continuation back, to resume it', async () => {
  const dir = scratch();
  const crashed = spawnSync(process.execPath, [child, 'crash', dir], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(crashed.signal, 'SIGKILL', `${crashed.stdout}\n${crashed.stderr}`);
  const said = JSON.parse(crashed.stdout.trim().split('\n').at(-1));
  assert.equal(aborted(said)[0].continuation, 'resp_bg_7f3a');

  const journal = await openJournal(`file:${dir}`);
  const wake = await journal.beginRun('s', { kind: 'wake' });
  const [cut] = aborted(await wake.transcript());
  assert.deepEqual({ partial: cut.partial, continuation: cut.continuation }, {
    partial: 'Here is the first half of',
    continuation: 'resp_bg_7f3a',
  });
  assert.deepEqual(wake.plan.calls, [], 'the plan is the plan: nothing to decide');
  await wake.end('completed');
  await journal.close();
});
