// remote_agent and companion tools from JavaScript: the child is started once under the call's
// dispatch id and recorded; a run that takes over after the first was cut off re-attaches to it
// (re-enters it) without starting another.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { defineTool, openJournal } from '../index.js';
import { gate, scratch, watchdog } from './helpers.mjs';

for (const [kind, wait, action] of [['remote_agent', 'attach', 'reattach'], ['companion', 'reenter', 'reenter_child']]) {
  test(`${kind}: start once under the dispatch id, ${wait} to the child; a new run goes back to it without starting another`, async () => {
    const started = [];
    const waited = [];
    const hold = gate();
    let first = true;
    const child = defineTool({
      name: 'research',
      kind,
      replay: 'safe',
      inputSchema: { type: 'object', properties: { topic: { type: 'string' } }, required: ['topic'] },
      start: async ({ topic }, ctx) => (started.push({ topic, dispatch: ctx.dispatchId }), `child-${ctx.dispatchId}`),
      [wait]: async (childId, ctx) => {
        waited.push({ child: childId, attempt: ctx.attempt });
        if (first) {
          first = false;
          await hold.promise; // the first run is cut off while its child works
        }
        return { report: `done: ${childId}` };
      },
    });
    const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [child] });
    const run = await journal.beginRun('s', { kind: 'new_turn', message: 'research it' });
    const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'research', args: { topic: 'tides' } }] });
    const cutOff = step.drive().catch((e) => e);
    while (waited.length === 0) await new Promise((r) => setTimeout(r, 5));
    const types = (await journal.exportLines('s')).map((l) => JSON.parse(l).type);
    assert.ok(types.includes('child_attached'), types.join(','));

    const woken = await journal.beginRun('s', { kind: 'wake' });
    assert.equal(woken.plan.calls[0].action, action, JSON.stringify(woken.plan.calls[0]));
    const outcome = await watchdog(woken.drive(), 30_000, 'the woken run');
    hold.open();
    assert.equal((await cutOff).code, 'fenced');
    assert.equal(outcome.status, 'committed');
    const childId = `child-${started[0].dispatch}`;
    assert.deepEqual(outcome.answers[0].output, { report: `done: ${childId}` });
    assert.deepEqual(started.map((s) => s.topic), ['tides'], 'started once');
    assert.deepEqual(waited.map((w) => w.child), [childId, childId]);
  });
}

test('a remote_agent or companion needs start and attach (reenter), and no execute', () => {
  assert.throws(() => defineTool({ name: 'r', kind: 'remote_agent', start: async () => 'c' }), /needs `start` and `attach`/);
  assert.throws(() => defineTool({ name: 'c', kind: 'companion', start: async () => 'c', attach: async () => 1 }), /needs `start` and `reenter`/);
  assert.throws(() => defineTool({ name: 'r', kind: 'remote_agent', execute: async () => 1, start: async () => 'c', attach: async () => 1 }), /not `execute`/);
});

test("a start that settles with something not a session id is the call's error, named", async () => {
  const bad = defineTool({ name: 'bad', kind: 'remote_agent', replay: 'safe', start: async () => 42, attach: async () => 'never' });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [bad] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'bad', args: {} }] });
  const outcome = await step.drive();
  assert.equal(outcome.answers[0].isError, true);
  assert.match(JSON.stringify(outcome.answers[0].output), /start must settle with the child's session id, a string \(it gave 42\)/);
});
