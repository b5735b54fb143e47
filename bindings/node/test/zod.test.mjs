// zod schemas: the rules JSON Schema cannot carry are checked before a reply is saved, and a
// schema JSON cannot express is refused naming its tool.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { z } from 'zod';
import { StepjournalError, defineTool, openJournal } from '../index.js';
import { scratch } from './helpers.mjs';

test('a .refine() rule is checked before the reply is saved: refused invalid_arguments, nothing written', async () => {
  const ran = [];
  const book = defineTool({
    name: 'book',
    inputSchema: z.object({ from: z.string(), to: z.string() }).refine((a) => a.from !== a.to, { message: 'from and to must differ' }),
    replay: 'unsafe',
    execute: async (args) => (ran.push(args), { booked: true }),
  });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [book] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'book' });
  const before = (await journal.exportLines('s')).length;
  await assert.rejects(
    run.commitReply({ text: 'x', calls: [{ call: 'c1', tool: 'book', args: { from: 'PAR', to: 'PAR' } }] }),
    (e) => e instanceof StepjournalError && e.code === 'refused' && e.refusal === 'invalid_arguments' && /from and to must differ/.test(e.message) && /`c1`/.test(e.message),
  );
  assert.equal((await journal.exportLines('s')).length, before, 'nothing was written');
  const step = await run.commitReply({ text: 'x', calls: [{ call: 'c1', tool: 'book', args: { from: 'PAR', to: 'LYS' } }] });
  assert.equal((await step.drive()).status, 'committed');
  assert.deepEqual(ran, [{ from: 'PAR', to: 'LYS' }]);
});

test('an async .refine() rule is checked before the reply is saved, and the body gets the parsed arguments', async () => {
  const ran = [];
  const known = new Set(['PAR', 'LYS']);
  const book = defineTool({
    name: 'book',
    inputSchema: z
      .object({ to: z.string(), seats: z.number().default(1) })
      .refine(async (a) => known.has(a.to), { message: 'unknown destination' }),
    replay: 'unsafe',
    execute: async (args) => (ran.push(args), { booked: true }),
  });
  const journal = await openJournal(`file:${join(scratch(), 'j')}`, { tools: [book] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'book' });
  await assert.rejects(
    run.commitReply({ text: 'x', calls: [{ call: 'c1', tool: 'book', args: { to: 'XXX' } }] }),
    (e) => e instanceof StepjournalError && e.refusal === 'invalid_arguments' && /unknown destination/.test(e.message),
  );
  const step = await run.commitReply({ text: 'x', calls: [{ call: 'c1', tool: 'book', args: { to: 'LYS' } }] });
  const outcome = await step.drive();
  assert.equal(outcome.status, 'committed');
  assert.deepEqual(ran, [{ to: 'LYS', seats: 1 }], 'the body ran once, with the default applied');
});

test('a zod schema JSON cannot express (z.date(), z.bigint(), z.map()) is refused at openJournal, naming the tool', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  for (const [name, schema] of [['when', z.object({ at: z.date() })], ['count', z.object({ n: z.bigint() })], ['table', z.map(z.string(), z.string())]]) {
    const tool = defineTool({ name, inputSchema: schema, execute: async () => null });
    await assert.rejects(openJournal(url, { tools: [tool] }), (e) => e instanceof StepjournalError && e.code === 'invalid_tool' && e.message.includes(`tool \`${name}\``), name);
  }
});
