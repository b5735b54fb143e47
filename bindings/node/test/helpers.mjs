// Shared by the tests: scratch directories, the workspace's CLI, a watchdog.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const workspace = resolve(packageDir, '..', '..');
export const casesDir = join(workspace, 'tests', 'conformance', 'cases');

/** A fresh scratch directory, removed when the process exits. */
export function scratch(prefix = 'sj-node-') {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

let cli;
/** The `stepjournal` CLI of the same target directory as the native module (built if absent). */
export function stepjournalCli() {
  if (cli) return cli;
  const target = process.env.CARGO_TARGET_DIR ? resolve(workspace, process.env.CARGO_TARGET_DIR) : join(workspace, 'target');
  const profile = process.env.STEPJOURNAL_PROFILE === 'release' ? 'release' : 'debug';
  const args = ['build', '-p', 'stepjournal-cli', '--bin', 'stepjournal'];
  if (profile === 'release') args.push('--release');
  const built = spawnSync('cargo', args, { cwd: workspace, stdio: ['ignore', 'ignore', 'inherit'] });
  if (built.status !== 0) throw new Error(`cargo ${args.join(' ')} failed`);
  cli = join(target, profile, 'stepjournal');
  if (!existsSync(cli)) throw new Error(`${cli} is missing after the build`);
  return cli;
}

/** Runs the CLI; its status, stdout and stderr. */
export function runCli(...args) {
  const r = spawnSync(stepjournalCli(), args, { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Rejects after `ms` unless `promise` settles first: a hang fails the test instead of stalling it. */
export function watchdog(promise, ms = 60_000, what = 'the operation') {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A promise with its resolve function outside. */
export function gate() {
  let open;
  const promise = new Promise((r) => {
    open = r;
  });
  return { promise, open };
}
