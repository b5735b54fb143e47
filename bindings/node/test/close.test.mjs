// journal.close(): the store is closed once the runs are let go: a file journal's lock is
// released (the same directory opens again in this process at once), the journal's threads
// stop, and later calls through the closed journal reject with code `closed`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { StepjournalError, defineTool, openJournal } from '../index.js';
import { scratch } from './helpers.mjs';

const work = defineTool({ name: 'work', replay: 'safe', execute: async () => ({ done: true }) });

/** The names of this process's threads that are stepjournal's. */
function ourThreads() {
  return readdirSync('/proc/self/task')
    .map((t) => { try { return readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim(); } catch { return ''; } })
    .filter((name) => name.startsWith('stepjournal'));
}

test('a closed file journal opens again at once in the same process; the closed one rejects with code closed', async () => {
  const url = `file:${join(scratch(), 'j')}`;
  const journal = await openJournal(url, { tools: [work] });
  const run = await journal.beginRun('s', { kind: 'new_turn', message: 'go' });
  await run.end('completed');
  assert.ok(ourThreads().length > 0, 'the file store runs threads');
  assert.deepEqual(await journal.close(), []);

  const again = await openJournal(url, { tools: [work] });
  const items = await again.transcript('s');
  assert.match(JSON.stringify(items), /"go"/, 'the session as the closed journal left it');

  await assert.rejects(journal.transcript('s'), (e) => e instanceof StepjournalError && e.code === 'closed', 'a read through the closed journal');
  await assert.rejects(journal.beginRun('t', { kind: 'new_turn', message: 'go' }), (e) => e instanceof StepjournalError, 'a run of the closed journal');
  await again.close();
  // Both stores closed: their threads stop (the reading threads within their idle second).
  const start = Date.now();
  while (ourThreads().length > 0) {
    assert.ok(Date.now() - start < 10_000, `still running: ${ourThreads()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
});
