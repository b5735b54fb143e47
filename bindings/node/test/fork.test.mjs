// Forks from Node: journal.fork(session, checkpointId, newSession) writes `forked_from` and the
// snapshot into the new session, the fork goes on as a session of its own and its transcript
// begins with the original's turns; a saved step with open calls, an existing session and an
// unknown checkpoint are refused with a coded error and nothing written.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, defineTool, openJournal } from '../index.js';
import { scratch } from './helpers.mjs';

const fetch = defineTool({ name: 'fetch', replay: 'safe', execute: (args) => ({ n: args.n ?? null }) });

test('a fork at a step commit goes on from the original and refusals write nothing', async () => {
  const dir = scratch('fork');
  const journal = await openJournal(`file:${join(dir, 'journal')}`, { tools: [fetch] });
  try {
    const run = await journal.beginRun('s-1', { kind: 'new_turn', message: 'go' });
    for (const n of [1, 2]) {
      const step = await run.commitReply({ text: `step ${n}`, calls: [{ call: `c${n}`, tool: 'fetch', args: { n } }] });
      assert.equal((await step.drive()).status, 'committed');
    }
    // Step 3 saved, its call not answered: open.
    await run.commitReply({ text: 'step 3', calls: [{ call: 'c3', tool: 'fetch', args: { n: 3 } }] });
    const steps = await journal.steps('s-1');
    const before = await journal.exportLines('s-1');

    const written = await journal.fork('s-1', steps[0].commitCheckpoint, 's-2');
    assert.deepEqual(written.map((e) => e.type), ['forked_from', 'snapshot']);
    assert.equal(written[0].original, 's-1');
    assert.equal(written[0].checkpoint, steps[0].commitCheckpoint);
    assert.deepEqual(await journal.exportLines('s-1'), before, 'the original is untouched');

    const forked = await journal.beginRun('s-2', { kind: 'new_turn', message: 'another way' });
    const step = await forked.commitReply({ text: 'forked', calls: [{ call: 'c9', tool: 'fetch', args: {} }] });
    assert.equal((await step.drive()).status, 'committed');
    const shown = (await journal.transcript('s-2')).filter((t) => t.type === 'message' || t.type === 'reply');
    assert.deepEqual(shown.map((t) => t.text), ['go', 'step 1', 'another way', 'forked']);

    await assert.rejects(journal.fork('s-1', steps[2].checkpoint, 's-3'), (e) => {
      assert.ok(e instanceof StepjournalError);
      assert.equal(e.code, 'validation_error');
      assert.match(e.message, /its calls would be in flight in two sessions/);
      return true;
    });
    await assert.rejects(journal.fork('s-1', steps[1].commitCheckpoint, 's-2'), (e) => e.code === 'conflict' && /already exists/.test(e.message));
    await assert.rejects(journal.fork('s-1', 'nowhere', 's-3'), (e) => e.code === 'validation_error');
    await assert.rejects(journal.fork('s-1', steps[1].commitCheckpoint, 'bad\nid'), (e) => e.code === 'invalid_id');
    assert.deepEqual(await journal.exportLines('s-3'), [], 'nothing written');
  } finally {
    await journal.close();
  }
});
