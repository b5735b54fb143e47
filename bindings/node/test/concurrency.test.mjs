// Several actors from JavaScript: a body whose Promise can never settle records nothing (the
// run is let go as after a crash, never a "failed" result), recoverAll is the engine's (it never
// touches a session another process runs, and reports the sessions waiting for answers), and a
// tool's timeoutMs bounds a hung body.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';

import { StepjournalError, defineTool, openJournal } from '../index.js';
import { packageDir, scratch, watchdog } from './helpers.mjs';

const actor = join(packageDir, 'test', 'children', 'actor.mjs');

function lines(text) {
  return text
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}


for (const close of [false, true]) {
  test(`a body whose Promise can never settle records nothing${close ? ', after close left it for recovery' : ''}; the wake answers it outcome_unknown`, async () => {
    const dir = join(scratch(), 'j');
    const args = ['--expose-gc', actor, 'lost', dir, ...(close ? ['close'] : [])];
    const child = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 60_000 });
    assert.equal(child.status, 0, `${child.stdout}\n${child.stderr}`);
    const said = lines(child.stdout);
    if (close) assert.deepEqual(said[0].abandoned, ['s']);
    const { drive, status } = said.at(-1);
    assert.equal(drive.code, 'interrupted', JSON.stringify(drive));
    assert.equal(status.state, 'interrupted');
    if (!close) assert.match(status.why, /lost before it settled/);

    const send = defineTool({ name: 'send', replay: 'unsafe', execute: () => assert.fail('an unsafe body never runs again') });
    const journal = await openJournal(`file:${dir}`, { tools: [send] });
    const types = (await journal.exportLines('s')).map((l) => JSON.parse(l).type);
    assert.ok(!types.includes('tool_result'), `no result recorded: ${types}`);
    assert.ok(!types.includes('step_commit'), `no step committed: ${types}`);
    const { recovered, failed } = await journal.recoverAll();
    assert.deepEqual(failed, []);
    assert.deepEqual(recovered.map((r) => r.session), ['s']);
    const [answer] = recovered[0].outcome.answers;
    assert.equal(answer.type, 'paired');
    assert.equal(answer.reason, 'outcome_unknown');
    await recovered[0].run.end('completed');
    await journal.close();
  });
}

test('recoverAll is the engine’s: it wakes the crashed session, reports the waiting one, and leaves a run live in another process alone', async () => {
  const url = `sqlite:${join(scratch(), 'j.db')}`;
  const setup = spawnSync(process.execPath, [actor, 'setup', url], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(setup.status, 0, `${setup.stdout}\n${setup.stderr}`);
  const said = lines(setup.stdout);
  assert.deepEqual(said[0].waiting, { status: 'suspended', awaiting: ['q1'] });
  assert.deepEqual(said[1].abandoned, ['crashed']);

  const live = spawn(process.execPath, [actor, 'live', url], { stdio: ['pipe', 'pipe', 'inherit'] });
  const out = createInterface({ input: live.stdout });
  const heard = [];
  const ready = new Promise((resolve) => {
    out.on('line', (line) => {
      heard.push(JSON.parse(line));
      if (heard.at(-1).ready) resolve();
    });
  });
  const ended = new Promise((resolve) => live.on('exit', resolve));
  try {
    await watchdog(ready, 60_000, 'the live runtime');
    let fetched = 0;
    const fetch = defineTool({ name: 'fetch', replay: 'safe', execute: (_args, ctx) => ({ attempt: ctx.attempt, n: ++fetched }) });
    const work = defineTool({ name: 'work', replay: 'unsafe', execute: () => assert.fail('the live run’s body is not run here') });
    const journal = await openJournal(url, { tools: [fetch, work] });
    const handed = [];
    const report = await journal.recoverAll({
      concurrency: 2,
      onRecovered: async (run, outcome) => {
        handed.push(run.sessionId);
        assert.equal(outcome.status, 'committed');
        await run.end('completed');
      },
    });
    assert.deepEqual(handed, ['crashed']);
    assert.deepEqual(report.recovered.map((r) => r.session), ['crashed']);
    assert.deepEqual(report.recovered[0].outcome.answers.map((a) => a.output), [{ attempt: 2, n: 1 }]);
    assert.deepEqual(report.waiting, [{ session: 'waiting', calls: ['q1'] }]);
    assert.deepEqual(report.skipped, []);
    assert.deepEqual(report.changed, []);
    assert.deepEqual(report.failed, []);
    await journal.close();
  } finally {
    live.stdin.end();
  }
  assert.equal(await watchdog(ended, 60_000, 'the live runtime’s end'), 0);
  const last = heard.at(-1);
  assert.equal(last.outcome.status, 'committed', 'the live run was never fenced');
  assert.deepEqual(last.status, { state: 'ended', outcome: 'completed', error: null });
});

test('recoverAll reports what onRecovered threw as that session’s failure, and checks its options', async () => {
  const dir = join(scratch(), 'j');
  const never = defineTool({
    name: 'slow',
    replay: 'safe',
    timeoutMs: 50,
    execute: (_args, ctx) => (ctx.attempt === 1 ? new Promise(() => {}) : { attempt: ctx.attempt }),
  });
  const journal = await openJournal(`file:${dir}`, { tools: [never] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'slow', args: {} }] });
  await assert.rejects(run.drive(), (e) => e instanceof StepjournalError && e.code === 'deadline');
  await assert.rejects(journal.recoverAll({ concurrency: 0 }), TypeError);
  await assert.rejects(journal.recoverAll({ onRecovered: 'no' }), TypeError);
  const report = await journal.recoverAll({
    onRecovered: () => {
      throw new Error('the runtime broke');
    },
  });
  assert.deepEqual(report.recovered, []);
  assert.equal(report.failed.length, 1);
  assert.equal(report.failed[0].session, 's');
  assert.equal(report.failed[0].error.message, 'the runtime broke');
  assert.ok(report.failed[0].run, 'the run is handed back to end it');
  await journal.close();
});

test('timeoutMs bounds a hung body: drive rejects with code deadline, driveWithin goes on by the rules', async () => {
  const dir = join(scratch(), 'j');
  let bodies = 0;
  const hang = defineTool({
    name: 'hang',
    replay: 'unsafe',
    timeoutMs: 50,
    execute: (_args, ctx) =>
      new Promise((resolve) => {
        bodies += 1;
        ctx.signal.addEventListener('abort', () => setTimeout(() => resolve({ late: true }), 20), { once: true });
      }),
  });
  const flaky = defineTool({
    name: 'flaky',
    replay: 'safe',
    timeoutMs: 50,
    execute: (_args, ctx) => (ctx.attempt === 1 ? new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true })) : { attempt: ctx.attempt }),
  });
  assert.throws(() => defineTool({ name: 'x', timeoutMs: 0, execute: () => null }), TypeError);
  assert.throws(() => defineTool({ name: 'x', timeoutMs: 1.5, execute: () => null }), TypeError);
  const journal = await openJournal(`file:${dir}`, { tools: [hang, flaky] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  await run.commitReply({
    text: '',
    calls: [
      { call: 'c1', tool: 'hang', args: {} },
      { call: 'c2', tool: 'flaky', args: {} },
    ],
  });
  const { run: finished, outcome } = await watchdog(run.driveWithin(), 60_000, 'driveWithin');
  assert.notEqual(finished.id, run.id, 'a wake finished the step');
  assert.equal(run.status.state, 'interrupted');
  const byCall = Object.fromEntries(outcome.answers.map((a) => [a.call, a]));
  assert.equal(byCall.c1.type, 'paired');
  assert.equal(byCall.c1.reason, 'outcome_unknown');
  assert.deepEqual(byCall.c2.output, { attempt: 2 });
  assert.equal(bodies, 1, 'the unsafe body ran once');
  await finished.end('completed');
  await new Promise((r) => setTimeout(r, 50));
  const events = (await journal.exportLines('s')).map((l) => JSON.parse(l));
  assert.ok(!events.some((e) => e.type === 'tool_result' && e.output?.late), 'the late result was refused');
  await journal.close();
});
