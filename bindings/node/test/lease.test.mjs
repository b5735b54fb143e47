// openJournal's `leaseTtlMs` and `owner`: a runtime that restarts after a crash finds the crashed
// process's runs to recover once their lease lapsed (leaseTtlMs after the crash), not 30 s later.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

import { defineTool, openJournal } from '../index.js';
import { packageDir, scratch, watchdog } from './helpers.mjs';

const child = join(packageDir, 'test', 'children', 'leased.mjs');
const work = defineTool({ name: 'work', replay: 'safe', execute: async () => ({ done: true }) });

/** Starts the child on `url`, waits until it holds its run mid-body, kills it with SIGKILL. */
async function crashMidBody(url, ttl) {
  const proc = spawn(process.execPath, [child, url, ...(ttl === undefined ? [] : [String(ttl)])], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const ready = new Promise((resolve) => proc.stdout.on('data', (d) => ((out += d), out.includes('\n') && resolve(JSON.parse(out)))));
  const said = await watchdog(ready, 60_000, 'the child');
  const died = new Promise((resolve) => proc.on('exit', (_code, signal) => resolve(signal)));
  proc.kill('SIGKILL');
  assert.equal(await died, 'SIGKILL');
  return said;
}

const stores = [['sqlite', (dir) => `sqlite:${join(dir, 'j.db')}`]];

for (const [name, urlOf] of stores) {
  test(`${name}: with leaseTtlMs 300 a restarted runtime recovers the crashed run within a second; with the default it is not found for 30 s`, async () => {
    const short = urlOf(scratch());
    const said = await crashMidBody(short, 300);
    assert.equal(said.owner, 'crashing-process');
    await new Promise((r) => setTimeout(r, 700));
    const journal = await openJournal(short, { tools: [work], owner: 'restarted', leaseTtlMs: 300 });
    assert.deepEqual(await journal.sessionsToRecover(), ['leased']);
    assert.equal(journal.owner, 'restarted');
    const report = await journal.recoverAll();
    assert.deepEqual(report.recovered.map((r) => r.session), ['leased'], JSON.stringify(report));
    assert.equal(report.recovered[0].outcome.status, 'committed');

    const long = urlOf(scratch());
    await crashMidBody(long);
    await new Promise((r) => setTimeout(r, 700));
    const other = await openJournal(long, { tools: [work], owner: 'restarted' });
    // The crashed process's lease (30 s by default) still holds: nothing to recover yet.
    assert.deepEqual(await other.sessionsToRecover(), []);
    const held = await other.recoverAll();
    assert.deepEqual(held.recovered, [], JSON.stringify(held));
  });
}

test('bad lease options and unknown options are refused, naming them', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  for (const leaseTtlMs of [0, -1, 1.5, '300', 2 ** 32]) {
    await assert.rejects(openJournal(url, { leaseTtlMs }), (e) => e instanceof TypeError && /leaseTtlMs/.test(e.message), String(leaseTtlMs));
  }
  for (const owner of ['', '  ', 7]) {
    await assert.rejects(openJournal(url, { owner }), (e) => e instanceof TypeError && /owner/.test(e.message), String(owner));
  }
  await assert.rejects(openJournal(url, { leaseTTL: 300 }), (e) => e instanceof TypeError && /unknown option `leaseTTL`/.test(e.message));
});
