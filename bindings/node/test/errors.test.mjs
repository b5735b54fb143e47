// Errors and their codes: bad URLs, a locked journal, malformed scenarios.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, openJournal, planScenario } from '../index.js';
import { scratch } from './helpers.mjs';

const coded = (code) => (e) => {
  assert.ok(e instanceof StepjournalError, `${e}`);
  assert.ok(e instanceof Error);
  assert.equal(e.code, code, e.message);
  assert.ok(e.message.length > 0);
  return true;
};

test('a bad URL is invalid_url, saying what is wrong', async () => {
  for (const url of ['ftp://example.invalid/j', 'file:', '/no/scheme', 'mysql://x']) {
    await assert.rejects(openJournal(url), coded('invalid_url'), url);
  }
  const missing = join(scratch(), 'absent');
  await assert.rejects(openJournal(`file:${missing}`, { create: false }), (e) => coded('invalid_url')(e) && e.message.includes(missing));
});

test('a journal another writer holds is locked', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  const first = await openJournal(url);
  await assert.rejects(openJournal(url), coded('locked'));
  await first.close();
});

test('a malformed scenario is malformed_scenario', () => {
  for (const text of ['{', '[]', '{}', '{"log": 3, "tools": {}, "entry": {"kind": "wake"}}']) {
    assert.throws(() => planScenario(text), coded('malformed_scenario'), text);
  }
  assert.throws(() => planScenario('['.repeat(1000) + ']'.repeat(1000)), coded('malformed_scenario'));
});

test('a refused entry is validation_error; a bad entry is invalid_entry', async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`);
  await assert.rejects(journal.beginRun('s', { kind: 'retry' }), coded('validation_error'));
  await assert.rejects(journal.beginRun('s', { kind: 'jump' }), coded('invalid_entry'));
});

test("index.d.ts's ErrorCode and RefusalCode are exactly the engine's lists of codes", async () => {
  const { readFileSync } = await import('node:fs');
  const { default: native } = await import('../lib/native.js');
  const { packageDir } = await import('./helpers.mjs');
  const dts = readFileSync(join(packageDir, 'index.d.ts'), 'utf8');
  const union = (name) => {
    const m = new RegExp(`export type ${name} =([^;]*);`).exec(dts);
    assert.ok(m, `index.d.ts declares ${name}`);
    return [...m[1].matchAll(/\| '([a-z_]+)'/g)].map((x) => x[1]);
  };
  const codes = native.errorCodes();
  assert.deepEqual(union('ErrorCode'), codes.errors);
  assert.deepEqual(union('RefusalCode'), codes.refusals);
});

test('two tools of one name are refused at openJournal, naming it', async () => {
  const { defineTool } = await import('../index.js');
  const safe = defineTool({ name: 'pay', replay: 'safe', execute: async () => 1 });
  const unsafe = defineTool({ name: 'pay', replay: 'unsafe', execute: async () => 2 });
  const url = `file:${join(scratch(), 'j')}`;
  await assert.rejects(openJournal(url, { tools: [safe, unsafe] }), (e) => coded('invalid_tool')(e) && /`pay` is defined twice/.test(e.message));
  const journal = await openJournal(url, { tools: [unsafe] });
  assert.equal(journal.toolsJson().pay.replay, 'unsafe');
});

test('a session id the library refuses is invalid_id, without echoing it', async () => {
  const journal = await openJournal(`file:${join(scratch(), 'j')}`);
  const long = 'a'.repeat(5000);
  for (const bad of [long, '', 'line\nbreak', 'bidi\u202e']) {
    await assert.rejects(journal.beginRun(bad, { kind: 'new_turn', message: 'hi' }), (e) => coded('invalid_id')(e) && e.message.length < 300, JSON.stringify(bad.slice(0, 20)));
  }
  await assert.rejects(journal.stop(long), coded('invalid_id'));
  await assert.rejects(journal.answerClient(long, 'c1', {}), coded('invalid_id'));
  await assert.rejects(journal.decideApproval(long, 'c1', true), coded('invalid_id'));
});

test("a tool's kind and replay policy are read by the engine's own names: an unknown one is invalid_tool, with the engine's list", async () => {
  const { defineTool } = await import('../index.js');
  const url = `file:${join(scratch(), 'j')}`;
  const oddKind = defineTool({ name: 'odd', kind: 'daemon', execute: async () => 1 });
  await assert.rejects(openJournal(url, { tools: [oddKind] }), (e) => coded('invalid_tool')(e) && /tool `odd`: kind `daemon`/.test(e.message) && /remote_agent/.test(e.message) && /companion/.test(e.message));
  const oddReplay = defineTool({ name: 'odd', replay: 'sometimes', execute: async () => 1 });
  await assert.rejects(openJournal(url, { tools: [oddReplay] }), (e) => coded('invalid_tool')(e) && /replay `sometimes`/.test(e.message) && /`safe`/.test(e.message));
});

test("journal.metrics() has exactly the counters index.d.ts lists", async () => {
  const { readFileSync } = await import('node:fs');
  const { packageDir } = await import('./helpers.mjs');
  const dts = readFileSync(join(packageDir, 'index.d.ts'), 'utf8');
  const m = /metrics\(\): \{([^}]*)\}/.exec(dts);
  assert.ok(m, 'index.d.ts declares metrics()');
  const declared = [...m[1].matchAll(/(\w+): number/g)].map((x) => x[1]).sort();
  const journal = await openJournal(`file:${join(scratch(), 'j')}`);
  const metrics = journal.metrics();
  assert.deepEqual(Object.keys(metrics).sort(), declared);
  for (const [k, v] of Object.entries(metrics)) assert.equal(typeof v, 'number', k);
});
