// index.d.ts covers the example as written: tsc type-checks test/types/example.ts.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

import { packageDir } from './helpers.mjs';

test('the example type-checks against index.d.ts', () => {
  const tsc = join(packageDir, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', join(packageDir, 'test', 'types', 'tsconfig.json')], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
