// The package as users install it: the two tarballs `npm run pack` wrote (run it first; `npm run
// test:install` does both) installed into an empty folder with no Rust toolchain on PATH and no
// install script run, then the README's example (ESM and CommonJS) and the crash demo run from
// the installed copy.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, join } from 'node:path';
import { before, test } from 'node:test';

import { packageDir, scratch } from '../helpers.mjs';
import { readmeExample } from './readme.mjs';

const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
const tarballs = [`stepjournal-${version}.tgz`, `stepjournal-linux-x64-gnu-${version}.tgz`];
const folder = scratch('sj-install-');

/** PATH without any directory holding cargo, rustc or rustup. */
function pathWithoutRust() {
  const rusty = (dir) => ['cargo', 'rustc', 'rustup'].some((tool) => existsSync(join(dir, tool)));
  return (process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== '' && !rusty(dir)).join(delimiter);
}
const env = { ...process.env, PATH: pathWithoutRust() };
delete env.CARGO_TARGET_DIR;
delete env.STEPJOURNAL_PROFILE;

/** Runs `command` (a shell line) in the installed folder without Rust on PATH. */
function inFolder(command, timeout = 120_000) {
  const r = spawnSync('sh', ['-c', command], { cwd: folder, env, encoding: 'utf8', timeout });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', output: `${r.stdout}\n${r.stderr}` };
}

before(() => {
  for (const tarball of tarballs) {
    const path = join(packageDir, tarball);
    assert.ok(existsSync(path), `${path} is missing: run \`npm run pack\` first (\`npm run test:install\` does)`);
    copyFileSync(path, join(folder, tarball));
  }
  writeFileSync(join(folder, 'package.json'), `${JSON.stringify({ name: 'fresh-folder', private: true }, null, 2)}\n`);
  assert.notEqual(inFolder('command -v cargo || command -v rustc').status, 0, 'cargo is still on PATH');
  const installed = inFolder('npm install --ignore-scripts --no-audit --no-fund --prefer-offline ./stepjournal-*.tgz zod', 300_000);
  assert.equal(installed.status, 0, installed.output);
});

test('the tarballs install as two packages: the JavaScript, and the prebuilt module in the platform package', () => {
  const main = join(folder, 'node_modules', 'stepjournal');
  const platform = join(folder, 'node_modules', 'stepjournal-linux-x64-gnu');
  assert.ok(!lstatSync(main).isSymbolicLink(), 'stepjournal is a copy, not a link into a checkout');
  const manifest = JSON.parse(readFileSync(join(main, 'package.json'), 'utf8'));
  assert.equal(manifest.scripts, undefined, 'the installed package has no scripts (no install step re-runs cargo)');
  assert.deepEqual(manifest.optionalDependencies, { 'stepjournal-linux-x64-gnu': version });
  const files = readdirSync(main, { recursive: true });
  assert.deepEqual(files.filter((f) => f.endsWith('.node')), [], 'the JavaScript package holds no native module');
  assert.ok(!files.includes('src') && !files.includes('Cargo.toml'), files.join(', '));
  assert.ok(existsSync(join(platform, 'stepjournal.linux-x64-gnu.node')), readdirSync(platform).join(', '));
  // zod is the user's: the package resolves the folder's own copy, and brings none.
  assert.ok(!existsSync(join(main, 'node_modules')), 'the package brought its own node_modules');
  const resolved = createRequire(join(main, 'lib', 'tools.js')).resolve('zod');
  assert.ok(resolved.startsWith(join(folder, 'node_modules', 'zod')), resolved);
});

test("the README's example runs from the installed package, twice over the same journal", () => {
  writeFileSync(join(folder, 'example.mjs'), readmeExample('esm'));
  for (const round of [1, 2]) {
    const r = inFolder('node example.mjs');
    assert.equal(r.status, 0, `round ${round}: ${r.output}`);
    assert.match(r.stdout, /saved: 'user-42\/seat=window'/, r.output);
  }
});

test("require('stepjournal') works from CommonJS", () => {
  writeFileSync(join(folder, 'example.cjs'), readmeExample('cjs'));
  const r = inFolder('node example.cjs');
  assert.equal(r.status, 0, r.output);
  assert.match(r.stdout, /^committed true$/m, r.output);
  assert.doesNotMatch(r.stderr, /ExperimentalWarning/, r.stderr);
});

test('the crash demo runs from the installed package: the safe call again as attempt 2, the unsafe one outcome_unknown', () => {
  const r = inFolder('node node_modules/stepjournal/examples/crash-demo.mjs');
  assert.equal(r.status, 0, r.output);
  const found = JSON.parse(r.stdout.trim().split('\n').at(-1));
  assert.equal(found.ok, true, r.output);
  assert.equal(found.killed, 'SIGKILL');
  assert.equal(found.safe.after.attempt, 2);
  assert.equal(found.unsafe.answer.reason, 'outcome_unknown');
});

test('with the platform package missing, the import fails saying what to install', () => {
  // As after `npm install --omit=optional`, or on a machine the platform package does not fit.
  renameSync(join(folder, 'node_modules', 'stepjournal-linux-x64-gnu'), join(folder, 'set-aside'));
  const r = inFolder(`node --input-type=module -e "import('stepjournal').then(() => console.log('loaded'))"`);
  assert.notEqual(r.status, 0, r.output);
  assert.match(r.stderr, /the package `stepjournal-linux-x64-gnu` is not installed/, r.stderr);
});
