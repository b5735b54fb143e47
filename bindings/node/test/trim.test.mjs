// Trim from Node: `journal.trim(session, {keepTurns})` drops a long session's events before a
// kept snapshot; the export then starts there, the transcript says how many turns went, a
// reopened journal recovers a crash after the trim as before, and a live run is never trimmed.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, defineTool, openJournal } from '../index.js';
import { scratch } from './helpers.mjs';

const fetch = defineTool({ name: 'fetch', replay: 'safe', execute: (args) => ({ n: args.n ?? null }) });

async function turns(journal, session, count) {
  for (let t = 0; t < count; t++) {
    const run = await journal.beginRun(session, { kind: 'new_turn', message: `turn ${t}` });
    for (let n = 1; n <= 3; n++) {
      const step = await run.commitReply({ text: `step ${n}`, calls: [{ call: `t${t}c${n}`, tool: 'fetch', args: { n } }] });
      assert.equal((await step.drive()).status, 'committed');
    }
    await run.end('completed');
  }
}

test('a long session is trimmed to a kept snapshot, and reads, transcripts and recovers from it', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  let journal = await openJournal(url, { tools: [fetch], snapshotEvery: 2 });
  await turns(journal, 's', 5);
  const before = (await journal.exportLines('s')).map((l) => JSON.parse(l));
  const done = await journal.trim('s', { keepTurns: 2 });
  assert.equal(done.trimmed, true);
  assert.equal(done.turns, 3);
  assert.equal(done.from, 0);
  const after = (await journal.exportLines('s')).map((l) => JSON.parse(l));
  assert.ok(after[0].seq > 0 && after[0].seq <= done.before, `the log starts at ${after[0].seq}`);
  assert.equal(after.find((e) => e.seq === done.before).type, 'snapshot');
  assert.deepEqual(after.slice(0, -1), before.slice(after[0].seq), 'what is kept is as it was');
  assert.deepEqual(after.at(-1), { ...after.at(-1), type: 'trimmed', before: done.before, turns: 3 });
  const shown = await journal.transcript('s');
  assert.deepEqual(shown[0], { type: 'trimmed', seq: done.at, turns: 3 });
  assert.equal(shown.filter((i) => i.type === 'message').length, 2, 'the two kept turns');

  const again = await journal.trim('s', { keepTurns: 2 });
  assert.equal(again.trimmed, false);
  assert.match(again.why, /snapshot/);

  const live = await journal.beginRun('s', { kind: 'new_turn', message: 'live' });
  await assert.rejects(journal.trim('s', { keepTurns: 0 }), (e) => e instanceof StepjournalError && e.code === 'lease_held');
  await assert.rejects(journal.trim('s', { keepTurns: -1 }), TypeError);
  const step = await live.commitReply({ text: 'cut', calls: [{ call: 'x1', tool: 'fetch', args: { n: 9 } }] });
  assert.ok(step);
  await journal.close();

  // Reopened after the run was left open: the wake plans the open call as it would have.
  journal = await openJournal(url, { tools: [fetch], snapshotEvery: 2 });
  const wake = await journal.beginRun('s', { kind: 'wake' });
  const planned = wake.plan.calls.map((c) => [c.call, c.action, c.rule]);
  assert.deepEqual(planned, [['x1', 'run', 'recovery.no_body_run']], JSON.stringify(wake.plan));
  await journal.close();
});

test('trimKeepTurns trims a session after each run, keeping its log bounded', async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [fetch], snapshotEvery: 2, trimKeepTurns: 1 });
  await turns(journal, 's', 8);
  const kept = (await journal.exportLines('s')).map((l) => JSON.parse(l));
  assert.ok(kept[0].seq > 60, `the log starts at ${kept[0].seq}`);
  const shown = await journal.transcript('s');
  assert.equal(shown[0].type, 'trimmed');
  assert.ok(shown[0].turns >= 6, JSON.stringify(shown[0]));
  await assert.rejects(openJournal(`file:${join(scratch(), 'k')}`, { trimKeepTurns: -1 }), TypeError);
  await journal.close();
});

test('run.trim keeps a long turn bounded while it runs, and the run goes on', async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [fetch], snapshotEvery: 2 });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'one long turn' });
  for (let n = 1; n <= 12; n++) {
    const step = await run.commitReply({ text: `step ${n}`, calls: [{ call: `c${n}`, tool: 'fetch', args: { n } }] });
    assert.equal((await step.drive()).status, 'committed');
  }
  assert.equal((await run.trim()).trimmed, false, 'the one turn is kept whole');
  const done = await run.trim({ keepTurns: 0 });
  assert.equal(done.trimmed, true);
  const step = await run.commitReply({ text: 'more', calls: [{ call: 'c13', tool: 'fetch', args: { n: 13 } }] });
  assert.equal((await step.drive()).status, 'committed');
  await run.end('completed');
  const kept = (await journal.exportLines('s')).map((l) => JSON.parse(l));
  assert.ok(kept[0].seq > 0 && kept[0].seq <= done.before);
  await journal.close();
});
