// One journal, two languages: a journal Node wrote is read by the Rust CLI (show, verify, plan),
// and a session the Rust CLI's demo left crashed is recovered from Node, its events unchanged.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { defineTool, openJournal } from '../index.js';
import { runCli, scratch } from './helpers.mjs';

const lines = (text) => text.split('\n').filter((l) => l !== '');

test('the Rust CLI reads a journal written from Node: show, verify, plan', async () => {
  const dir = join(scratch(), 'j');
  const url = `file:${dir}`;
  const setPreference = defineTool({
    name: 'set_preference',
    inputSchema: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
    replay: 'safe',
    execute: async ({ key }) => ({ saved: key }),
  });
  const journal = await openJournal(url, { tools: [setPreference] });
  const run = await journal.beginRun('done', { kind: 'new_turn', message: 'aisle please' });
  const step = await run.commitReply({ text: 'Saving.', calls: [{ call: 'c1', tool: 'set_preference', args: { key: 'seat' } }] });
  await step.drive();
  await run.end('completed');
  const open = await journal.beginRun('open', { kind: 'new_turn', message: 'again' });
  await open.commitReply({ text: 'Saving.', calls: [{ call: 'c1', tool: 'set_preference', args: { key: 'tz' } }] });

  const verify = runCli('verify', url);
  assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  const show = runCli('show', url, 'done');
  assert.equal(show.status, 0, show.stderr);
  assert.match(show.stdout, /set_preference/);
  for (const session of ['done', 'open']) {
    const shown = runCli('show', url, session, '--json');
    assert.equal(shown.status, 0, shown.stderr);
    assert.deepEqual(lines(shown.stdout), await journal.exportLines(session), `${session}: the same lines`);
  }
  const tools = join(dir, '..', 'tools.json');
  writeFileSync(tools, JSON.stringify(journal.toolsJson()));
  const plan = runCli('plan', url, 'open', '--entry', 'wake', '--tools', tools, '--json');
  assert.equal(plan.status, 0, plan.stderr);
  const fromCli = JSON.parse(lines(plan.stdout).at(-1));
  const woken = await journal.beginRun('open', 'wake');
  const strip = (calls) => calls.map(({ call, action, rule, attempt, dispatch }) => ({ call, action, rule, attempt, dispatch }));
  assert.deepEqual(strip(fromCli.calls), strip(woken.plan.calls));
  assert.equal(woken.plan.calls[0].action, 'run');
});

test('a session the Rust demo left crashed recovers from Node, byte for byte the same events', async () => {
  const dir = join(scratch(), 'demo');
  const url = `file:${dir}`;
  const demo = runCli('demo', '--dir', dir, '--no-recover');
  assert.equal(demo.status, 0, demo.stdout + demo.stderr);

  const ran = [];
  const tool = (name, replay) =>
    defineTool({
      name,
      inputSchema: { type: 'object' },
      replay,
      execute: async (args, ctx) => {
        ran.push({ name, attempt: ctx.attempt, dispatchId: ctx.dispatchId });
        return { done: name };
      },
    });
  const journal = await openJournal(url, {
    tools: [tool('search_flights', 'safe'), tool('set_preference', 'safe'), tool('send_email', 'unsafe'), tool('archive_email', 'safe')],
  });
  const [session, ...others] = await journal.sessionsToRecover();
  assert.ok(session, 'the demo left a session to recover');
  assert.deepEqual(others, []);
  const before = lines(runCli('show', url, session, '--json').stdout);
  assert.deepEqual(await journal.exportLines(session), before, 'Node reads the bytes Rust wrote');

  const run = await journal.beginRun(session, { kind: 'wake' });
  const action = Object.fromEntries(run.plan.calls.map((c) => [c.call, c]));
  assert.equal(action.c1.action, 'keep');
  assert.equal(action.c2.action, 'run');
  assert.equal(action.c2.attempt, 2);
  assert.equal(action.c3.action, 'pair');
  assert.equal(action.c3.reason, 'outcome_unknown');
  const outcome = await run.drive();
  await run.end('completed');
  assert.equal(outcome.status, 'committed');
  assert.deepEqual(ran.map((r) => [r.name, r.attempt]), [['set_preference', 2]]);
  const c2Dispatch = before.map((l) => JSON.parse(l)).find((e) => e.type === 'dispatch_minted' && e.call === 'c2').dispatch;
  assert.equal(ran[0].dispatchId, c2Dispatch);

  const after = await journal.exportLines(session);
  assert.deepEqual(after.slice(0, before.length), before, 'the Rust-written events are unchanged');
  assert.ok(after.length > before.length);
  const verify = runCli('verify', url);
  assert.equal(verify.status, 0, verify.stdout + verify.stderr);
  assert.deepEqual(lines(runCli('show', url, session, '--json').stdout), after);
});
