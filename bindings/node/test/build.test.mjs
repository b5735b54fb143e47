// `npm run build` places the module by writing beside it and renaming: a process that has the
// old module loaded keeps running. (Copying over it in place, as the build once did, truncated
// the mapped file under a running process, which died of SIGBUS.)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { currentTarget, platformPackage } from '../lib/platform.js';
import { place } from '../scripts/place.mjs';
import { packageDir, scratch, watchdog } from './helpers.mjs';

test('placing a module over one a running process has loaded leaves that process running', async () => {
  const dir = scratch();
  const loaded = join(dir, 'stepjournal.node');
  copyFileSync(join(packageDir, platformPackage(currentTarget().target).file), loaded);
  const child = spawn(
    process.execPath,
    ['-e', `const m = require(${JSON.stringify(loaded)}); console.log('loaded'); process.stdin.once('data', () => { console.log(m.errorCodes().errors.length, m.errorCodes().refusals.length); process.exit(0); }).resume();`],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await watchdog(new Promise((resolve) => child.stdout.on('data', (d) => ((stdout += d), stdout.includes('loaded') && resolve()))), 30_000, 'loading the module');

  const before = statSync(loaded).ino;
  const replacement = join(dir, 'replacement');
  writeFileSync(replacement, 'not a module');
  place(replacement, loaded);
  assert.notEqual(statSync(loaded).ino, before, 'the module was written in place');
  assert.equal(statSync(loaded).size, 'not a module'.length);
  assert.deepEqual(readdirSync(dir).sort(), ['replacement', 'stepjournal.node'], 'no temporary file is left');

  child.stdin.write('go\n');
  const { code, signal } = await watchdog(exited, 30_000, 'the child');
  assert.equal(signal, null, `the child died of ${signal}: ${stderr}`);
  assert.equal(code, 0, stderr);
  assert.match(stdout, /loaded\n\d+ \d+/, stdout);
});
