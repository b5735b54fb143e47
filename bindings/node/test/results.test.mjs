// A body's result that is not JSON is never recorded as something else: not `null` for NaN or a
// function, not `{}` for a Map, not an error result for a BigInt or a cycle (the body succeeded,
// its effect happened). The run is let go as after a crash and the wake decides the call by the
// rules: an unsafe call is answered outcome_unknown.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { defineTool, openJournal } from '../index.js';
import { settledJson, whyNotJson } from '../lib/result.js';
import { scratch } from './helpers.mjs';

const circular = { a: 1 };
circular.self = circular;
const unrecordable = [
  ['a BigInt', { amount: 10n }, /\$\.amount is a BigInt/],
  ['a cycle', circular, /\$\.self refers back/],
  ['a lone surrogate', { text: 'ok \ud800' }, /\$\.text is a string with a lone surrogate/],
  ['a Map', new Map([['a', 1]]), /\$ is a Map, not a plain object/],
  ['a function in an array', [1, () => 2], /\$\[1\] is a function/],
  ['NaN', { ratio: Number.NaN }, /\$\.ratio is NaN/],
];

test('the JSON check names what is not JSON, and passes what is', () => {
  for (const [what, value, why] of unrecordable) assert.match(whyNotJson(value), why, what);
  for (const value of [null, 0, 'text', [1, 'a', null], { a: { b: [true] } }, { skipped: undefined }, new Date(0)]) {
    assert.equal(whyNotJson(value), null, JSON.stringify(value));
  }
  assert.equal(settledJson(undefined), '{"ok":null}');
  assert.equal(settledJson({ at: new Date(0) }), '{"ok":{"at":"1970-01-01T00:00:00.000Z"}}');
});

test('a result that is not JSON lets go of the run, records nothing, and the wake answers the unsafe call outcome_unknown', async () => {
  let give;
  const send = defineTool({ name: 'send', replay: 'unsafe', execute: async () => give });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [send] });
  for (const [i, [what, value, why]] of unrecordable.entries()) {
    const session = `s${i}`;
    give = value;
    const run = await journal.beginRun(session, { kind: 'new_turn', message: 'send it' });
    const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'send', args: {} }] });
    await assert.rejects(step.drive(), (e) => e.code === 'interrupted', what);
    assert.equal(run.status.state, 'interrupted', what);
    assert.match(run.status.why, why, what);
    const types = (await journal.exportLines(session)).map((l) => JSON.parse(l).type);
    assert.ok(!types.includes('tool_result'), `${what}: nothing recorded as its result: ${types}`);
    const woken = await journal.beginRun(session, { kind: 'wake' });
    const outcome = await woken.drive();
    assert.equal(outcome.answers[0].type, 'paired', what);
    assert.equal(outcome.answers[0].reason, 'outcome_unknown', what);
    await woken.end('completed');
  }
});

test('a body that returns nothing records null, not an error', async () => {
  const quiet = defineTool({ name: 'quiet', replay: 'safe', execute: async () => undefined });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [quiet] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'quiet', args: {} }] });
  const outcome = await step.drive();
  assert.deepEqual([outcome.answers[0].output, outcome.answers[0].isError], [null, false]);
});

test('a result over the record limit is recorded cut to its head, not as an error, and the step commits', async () => {
  // 20 MiB of text: over the 16 MiB a record holds.
  const huge = defineTool({ name: 'huge', replay: 'safe', execute: async () => ({ text: 'x'.repeat(20 << 20) }) });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [huge] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: '', calls: [{ call: 'c1', tool: 'huge', args: {} }] });
  const outcome = await step.drive();
  assert.equal(outcome.status, 'committed');
  const [answer] = outcome.answers;
  assert.equal(answer.isError, false, 'the tool succeeded: its effect is not reported as an error');
  assert.equal(answer.output.bytes, (20 << 20) + '{"text":""}'.length);
  assert.match(answer.output.output_cut, /over the limit of 1048576 bytes/);
  assert.equal(answer.output.head.length, 1 << 20);
  assert.ok(answer.output.head.startsWith('{"text":"xxx'));
  await journal.close();
});
