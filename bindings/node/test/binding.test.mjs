// The native module's declarations are napi-rs's, generated from the Rust source
// (scripts/types.mjs), and the JavaScript layer is type-checked against them and against the
// hand-written index.d.ts: a Rust signature the layer no longer matches fails here.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import native from '../lib/native.js';
import { bindingDts, generated } from '../scripts/types.mjs';
import { packageDir } from './helpers.mjs';

test('lib/binding.d.ts is what napi-rs generates from the module the tests built', async () => {
  const committed = readFileSync(bindingDts, 'utf8');
  assert.equal(committed, await generated(), 'lib/binding.d.ts is stale: run `npm run build` and commit it');
});

test('the loaded module exports exactly what lib/binding.d.ts declares', () => {
  const declared = [...readFileSync(bindingDts, 'utf8').matchAll(/^export declare (?:class|function|const) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual(Object.keys(native).sort(), declared.sort());
});

test('the JavaScript layer type-checks against lib/binding.d.ts and index.d.ts', () => {
  const tsc = join(packageDir, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', join(packageDir, 'test', 'types', 'lib.tsconfig.json')], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
