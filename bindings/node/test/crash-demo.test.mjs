// Runs examples/crash-demo.mjs: a child killed with SIGKILL mid-body, recovery in a new process.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

import { packageDir, scratch } from './helpers.mjs';

test('the crash demo: the safe call runs again as attempt 2 with its dispatch id, the unsafe one is outcome_unknown', () => {
  const dir = join(scratch(), 'journal');
  const demo = spawnSync(process.execPath, [join(packageDir, 'examples', 'crash-demo.mjs'), dir], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(demo.status, 0, `${demo.stdout}\n${demo.stderr}`);
  const lines = demo.stdout.trim().split('\n');
  const found = JSON.parse(lines.at(-1));
  assert.equal(found.killed, 'SIGKILL');
  assert.equal(found.safe.before.attempt, 1);
  assert.equal(found.safe.after.attempt, 2);
  assert.equal(found.safe.after.dispatchId, found.safe.before.dispatchId);
  assert.equal(found.unsafe.ranAgain, false);
  assert.equal(found.unsafe.answer.type, 'paired');
  assert.equal(found.unsafe.answer.reason, 'outcome_unknown');
  assert.equal(found.ok, true);
});
