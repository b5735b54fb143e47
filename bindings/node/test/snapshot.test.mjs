// Snapshots from Node: openJournal's `snapshotEvery` puts a `snapshot` event in the batch of every
// n-th step commit, a runtime restarted after a crash plans from them as from the whole log, and
// `run.snapshot()` writes one at a committed step and is refused while a step is open.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, defineTool, openJournal, planScenario } from '../index.js';
import { packageDir, scratch } from './helpers.mjs';

const child = join(packageDir, 'test', 'children', 'snapshotted.mjs');

const fetch = (seen = []) =>
  defineTool({
    name: 'fetch',
    replay: 'safe',
    execute: (args, ctx) => {
      seen.push({ dispatchId: ctx.dispatchId, attempt: ctx.attempt });
      return { n: args.n ?? null, attempt: ctx.attempt };
    },
  });

const events = async (journal, session) => (await journal.exportLines(session)).map((l) => JSON.parse(l));

/** The steps whose `step_commit` the very next event, a snapshot of the log before it, follows. */
function snapshottedSteps(log) {
  const steps = [];
  for (const [i, e] of log.entries()) {
    assert.equal(e.seq, i, 'the export is in seq order');
    if (e.type !== 'snapshot') continue;
    assert.equal(e.len, e.seq, 'a snapshot counts the events before it');
    const commit = log[i - 1];
    assert.equal(commit.type, 'step_commit', `the snapshot at ${e.seq} follows a step commit`);
    assert.deepEqual(e.commit, { seq: commit.seq, step: commit.step, checkpoint: commit.checkpoint });
    steps.push(commit.step);
  }
  return steps;
}

async function grow(journal, session, steps) {
  const run = await journal.beginRun(session, { kind: 'new_turn', message: 'go' });
  for (let n = 1; n <= steps; n++) {
    const step = await run.commitReply({ text: `step ${n}`, calls: [{ call: `c${n}`, tool: 'fetch', args: { n } }] });
    assert.equal((await step.drive()).status, 'committed');
  }
  return run;
}

test('with snapshotEvery 2 a snapshot follows the commit of every second step; with 0 none', async () => {
  for (const [every, expected] of [
    [2, [2, 4]],
    [3, [3]],
    [0, []],
  ]) {
    const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [fetch()], snapshotEvery: every });
    const run = await grow(journal, 's', 5);
    await run.end('completed');
    const log = await events(journal, 's');
    assert.deepEqual(snapshottedSteps(log), expected, `snapshotEvery ${every}`);
    assert.equal(log.filter((e) => e.type === 'step_commit').length, 5);
    await journal.close();
  }
});

test('a few steps of large outputs make a snapshot before snapshotEvery does', async () => {
  const big = 'x'.repeat(4000);
  const tool = defineTool({ name: 'fetch_page', replay: 'safe', execute: () => ({ page: big }) });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, {
    tools: [tool], snapshotEvery: 1000, snapshotAfterBytes: 10000,
  });
  const run = await journal.beginRun('s-bytes', { kind: 'new_turn', message: 'go' });
  for (let i = 0; i < 7; i++) {
    const step = await run.commitReply({ text: '', calls: [{ call: `c${i}`, tool: 'fetch_page', args: { url: 'u' } }] });
    await step.drive();
  }
  const log = await events(journal, 's-bytes');
  const commitsBefore = log
    .map((e, i) => (e.type === 'snapshot' ? log.slice(0, i).filter((x) => x.type === 'step_commit').length : null))
    .filter((n) => n !== null);
  assert.deepEqual(commitsBefore, [3, 6]);
  for (const snapshotAfterBytes of [-1, 1.5, '10', 2 ** 60]) {
    await assert.rejects(openJournal(`file:${join(scratch(), 'k')}`, { snapshotAfterBytes }), (e) => e instanceof TypeError && /snapshotAfterBytes/.test(e.message), String(snapshotAfterBytes));
  }
  await run.end('completed');
});

test('snapshotEvery must be a whole number of steps, 0 or more', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  for (const snapshotEvery of [-1, 1.5, '2', Number.NaN, 2 ** 32, null]) {
    await assert.rejects(openJournal(url, { snapshotEvery }), (e) => e instanceof TypeError && /snapshotEvery/.test(e.message), String(snapshotEvery));
  }
  const journal = await openJournal(url, { snapshotEvery: 0 });
  await journal.close();
});

test('after a SIGKILL mid-body past two snapshots, the wake plans as the whole log does: the safe call runs again under its dispatch id', async () => {
  const dir = join(scratch(), 'j');
  const crashed = spawnSync(process.execPath, [child, 'crash', dir], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(crashed.signal, 'SIGKILL', `${crashed.stdout}\n${crashed.stderr}`);
  const said = JSON.parse(crashed.stdout.trim().split('\n').at(-1));
  assert.equal(said.started.attempt, 1);

  const seen = [];
  const journal = await openJournal(`file:${dir}`, { tools: [fetch(seen)], snapshotEvery: 2 });
  const log = await events(journal, 's');
  assert.deepEqual(snapshottedSteps(log), [2, 4]);
  assert.deepEqual(await journal.transcript('s'), said.transcript, 'the transcript reads as the crashed run saw it');

  // The plan of the same log with its snapshots taken out, folded from its first event.
  const whole = log.filter((e) => e.type !== 'snapshot').map(({ session, seq, at, ...event }) => event);
  const expected = planScenario({ tools: journal.toolsJson(), log: whole, entry: { kind: 'wake' } });
  assert.equal(expected.error, null);

  const plans = [];
  const report = await journal.recoverAll({
    onRecovered: async (run, outcome) => {
      plans.push(run.plan);
      assert.equal(outcome.status, 'committed');
      await run.end('completed');
    },
  });
  assert.deepEqual(report.failed, []);
  assert.deepEqual(report.recovered.map((r) => r.session), ['s']);
  const [plan] = plans;
  assert.equal(plan.step, expected.step);
  assert.deepEqual(plan.calls, expected.calls);
  assert.deepEqual(
    plan.calls.map(({ call, action, dispatch, attempt }) => ({ call, action, dispatch, attempt })),
    [{ call: 'c6', action: 'run', dispatch: said.started.dispatchId, attempt: 2 }],
  );
  assert.deepEqual(seen, [{ dispatchId: said.started.dispatchId, attempt: 2 }], 'the body ran again, once, under the same dispatch id');

  const after = await journal.transcript('s');
  assert.deepEqual(after.slice(0, said.transcript.length), said.transcript);
  assert.deepEqual(after.at(-1).output, { n: null, attempt: 2 });
  await journal.close();
});

test('run.snapshot() is refused while a step is open and gives its seq once the step is committed; transcript(since) gives what is new', async () => {
  let release;
  const released = new Promise((resolve) => {
    release = resolve;
  });
  const slow = defineTool({ name: 'slow', replay: 'safe', execute: async (args) => (await released, { n: args.n }) });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [slow], snapshotEvery: 0 });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: 'first', calls: [{ call: 'c1', tool: 'slow', args: { n: 1 } }] });
  const refused = (e) => e instanceof StepjournalError && e.code === 'refused' && e.refusal === 'step_open';
  await assert.rejects(run.snapshot(), refused, 'before the step is driven');
  const driving = step.drive();
  await new Promise((r) => setTimeout(r, 20));
  await assert.rejects(run.snapshot(), refused, 'while its body runs');
  release();
  assert.equal((await driving).status, 'committed');
  const types = (await events(journal, 's')).map((e) => e.type);
  assert.ok(!types.includes('snapshot'), `nothing written by the refused calls: ${types}`);

  const at = await run.snapshot();
  assert.equal(typeof at, 'number');
  const log = await events(journal, 's');
  assert.equal(at, log.length - 1, 'it landed at the tail');
  assert.equal(log[at].type, 'snapshot');
  assert.equal(log[at].len, at);
  assert.deepEqual(snapshottedSteps(log), [1]);

  const before = await run.transcript();
  assert.deepEqual(await run.transcript(at), [], 'nothing is new since the snapshot');
  const second = await run.commitReply({ text: 'second', calls: [{ call: 'c2', tool: 'slow', args: { n: 2 } }] });
  await second.drive();
  const fresh = await run.transcript(at);
  assert.deepEqual(
    fresh.map((i) => [i.type, i.call ?? i.step]),
    [
      ['reply', 2],
      ['tool_result', 'c2'],
    ],
  );
  assert.ok(fresh.every((i) => i.seq > at));
  assert.deepEqual(await run.transcript(), [...before, ...fresh]);

  await run.end('completed');
  await assert.rejects(run.snapshot(), (e) => e instanceof StepjournalError && e.code === 'ended');
  await journal.close();
});
