// The example, as written (zod schema, safe and unsafe tools, a turn, recovery loop),
// and the rest of the API: client calls, approvals, each entry, the transcript.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { z } from 'zod';
import { StepjournalError, defineClientTool, defineTool, openJournal } from '../index.js';
import { gate, scratch, watchdog } from './helpers.mjs';

const prefs = {
  store: new Map(),
  async put(session, key, value) {
    this.store.set(`${session}/${key}`, value);
  },
};
const sent = [];

const setPreference = defineTool({
  name: 'set_preference',
  inputSchema: z.object({ key: z.string(), value: z.string() }),
  replay: 'safe',
  execute: async ({ key, value }, ctx) => {
    await prefs.put(ctx.sessionId, key, value);
    return { ok: true };
  },
});
const sendEmail = defineTool({
  name: 'send_email',
  inputSchema: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
  replay: 'unsafe',
  execute: async ({ to }, ctx) => {
    sent.push({ to, key: ctx.idempotencyKey });
    return { sent: to };
  },
});

test('the example works as written', async () => {
  const dir = join(scratch(), 'data');
  const journal = await openJournal(`file:${dir}`, { tools: [setPreference, sendEmail] });
  const run = await journal.beginRun('user-42', { kind: 'new_turn', message: 'window seat please' });
  const step = await run.commitReply({
    text: 'Saving it.',
    calls: [{ call: 'c1', tool: 'set_preference', args: { key: 'seat', value: 'window' } }],
  });
  const answers = await step.drive();
  await run.end('completed');
  for (const s of await journal.sessionsToRecover()) {
    const run = await journal.beginRun(s, { kind: 'wake' });
    await run.drive();
  }
  assert.equal(answers.status, 'committed');
  assert.deepEqual(answers.answers.map((a) => [a.type, a.call, a.output, a.isError]), [['tool_result', 'c1', { ok: true }, false]]);
  assert.equal(prefs.store.get('user-42/seat'), 'window');
  assert.deepEqual(await journal.sessionsToRecover(), []);
  assert.deepEqual(run.status, { state: 'ended', outcome: 'completed', error: null });
  const tools = journal.toolsJson();
  assert.equal(tools.set_preference.replay, 'safe');
  assert.equal(tools.set_preference.input_schema.type, 'object');
  assert.deepEqual(tools.set_preference.input_schema.required, ['key', 'value']);
  const transcript = await journal.transcript('user-42');
  assert.deepEqual(transcript.map((t) => t.type), ['message', 'reply', 'tool_result']);
});

test('arguments failing the schema and unknown tools are refused before anything is committed', async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [setPreference] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'hi' });
  const bad = run.commitReply({ text: 'x', calls: [{ call: 'c1', tool: 'set_preference', args: { key: 1 } }] });
  await assert.rejects(bad, (e) => e instanceof StepjournalError && e.code === 'refused' && e.refusal === 'invalid_arguments');
  const unknown = run.commitReply({ text: 'x', calls: [{ call: 'c1', tool: 'nope', args: {} }] });
  await assert.rejects(unknown, (e) => e.code === 'refused' && e.refusal === 'unknown_tool');
  assert.equal((await journal.exportLines('s')).length, 2, 'run_started and the message only');
});

test('a body that throws is recorded as an error result; output is committed', async () => {
  const flaky = defineTool({
    name: 'flaky',
    replay: 'unsafe',
    execute: async (_args, ctx) => {
      await ctx.output('trying');
      throw new Error('the service said no');
    },
  });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [flaky] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  const step = await run.commitReply({ text: 'trying', calls: [{ call: 'c1', tool: 'flaky', args: {} }] });
  const outcome = await step.drive();
  assert.deepEqual(outcome.answers[0].output, { error: 'the service said no' });
  assert.equal(outcome.answers[0].isError, true);
  const lines = (await journal.exportLines('s')).map((l) => JSON.parse(l));
  const types = lines.map((l) => l.event?.type ?? l.type);
  assert.ok(types.includes('output_chunk'), types.join(','));
});

test('client calls and approvals suspend the run; step.answerClient and step.decideApproval go on', async () => {
  const pickSeat = defineClientTool({ name: 'pick_seat', inputSchema: { type: 'object' } });
  const ran = [];
  const pay = defineTool({
    name: 'pay',
    kind: 'approval',
    replay: 'unsafe',
    execute: async ({ amount }, ctx) => {
      ran.push({ amount, attempt: ctx.attempt });
      return { paid: amount };
    },
  });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [pickSeat, pay] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'book' });
  const step = await run.commitReply({
    text: 'pick a seat, and may I pay?',
    calls: [
      { call: 'c1', tool: 'pick_seat', args: {} },
      { call: 'c2', tool: 'pay', args: { amount: 30 } },
    ],
  });
  const suspended = await step.drive();
  assert.deepEqual(suspended, { status: 'suspended', awaiting: ['c1', 'c2'] });
  assert.equal(run.status.outcome, 'suspended');
  const answered = await step.answerClient('c1', { seat: '3A' });
  assert.deepEqual(await answered.drive(), { status: 'suspended', awaiting: ['c2'] });
  const decided = await answered.step.decideApproval('c2', true);
  const done = await decided.drive();
  assert.equal(done.status, 'committed');
  assert.deepEqual(done.answers.map((a) => [a.type, a.call]), [['client_answer', 'c1'], ['tool_result', 'c2']]);
  assert.deepEqual(ran, [{ amount: 30, attempt: 1 }]);
  await decided.end('completed');
});

test('every entry of FORMAT.md begins a run, or is refused with validation_error', async () => {
  const slow = gate();
  const hang = defineTool({ name: 'hang', replay: 'safe', execute: () => slow.promise });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [hang] });
  const open = async (session) => {
    const run = await journal.beginRun(session, { kind: 'new_turn', message: 'go' });
    const step = await run.commitReply({ text: 'x', calls: [{ call: 'c1', tool: 'hang', args: {} }] });
    return { run, step };
  };
  // wake and resume/continue recover the saved step: the safe call runs again.
  const a = await open('a');
  const woken = await journal.beginRun('a', 'wake');
  assert.equal(woken.plan.calls[0].action, 'run');
  assert.equal(woken.plan.calls[0].attempt, 1);
  assert.equal(woken.plan.error, null);
  const resumed = await journal.beginRun('a', { kind: 'resume', mode: 'continue' });
  assert.equal(resumed.plan.calls[0].action, 'run');
  await assert.rejects(a.run.fail('late'), (e) => e.code === 'fenced');
  assert.equal(a.run.status.state, 'fenced');
  // resume with a message redirects; from_checkpoint recovers the named step.
  const b = await open('b');
  const redirected = await journal.beginRun('b', { kind: 'resume', mode: 'with_message', message: 'no, wait' });
  assert.equal(redirected.plan.error, null);
  assert.equal(redirected.step, null, 'a redirect closes the step');
  const c = await open('c');
  const fromCheckpoint = await journal.beginRun('c', { kind: 'resume', mode: 'from_checkpoint', checkpoint: c.step.checkpoint });
  assert.equal(fromCheckpoint.plan.error, null);
  assert.ok(fromCheckpoint.step);
  // retry: refused without a failed run; after fail, each form.
  await assert.rejects(journal.beginRun('c', { kind: 'retry' }), (e) => e instanceof StepjournalError && e.code === 'validation_error');
  await fromCheckpoint.fail('the model timed out');
  const retried = await journal.beginRun('c', { kind: 'retry' });
  assert.equal(retried.plan.error, null);
  await retried.fail('again');
  const retriedWithMessage = await journal.beginRun('c', { kind: 'retry', message: 'try another way' });
  assert.equal(retriedWithMessage.plan.error, null);
  await retriedWithMessage.end('completed');
  const d = await open('d');
  await d.run.fail('lost');
  const retriedFromCheckpoint = await journal.beginRun('d', { kind: 'retry', checkpoint: d.step.checkpoint, message: 'from there' });
  assert.equal(retriedFromCheckpoint.plan.error, null);
  // stop: the open calls paired run_stopped, the run ended stopped.
  const e = await open('e');
  const stopped = await journal.stop('e');
  assert.equal(stopped.error, null);
  assert.ok(stopped.appends.some((x) => x.type === 'run_ended'));
  await assert.rejects(e.run.fail('late'), (err) => err.code === 'fenced');
  const stopRun = await journal.beginRun('a', 'stop');
  assert.equal(stopRun.status.outcome, 'stopped');
  slow.open({ late: true });
  await watchdog(Promise.resolve(), 1000);
});
