// Builds the native module from source with cargo, for contributors working in a checkout:
//
//   node scripts/build.mjs [--release] [--out FILE]
//
// The crate is a member of the stepjournal workspace and shares its target/ directory
// (CARGO_TARGET_DIR, if set, is honoured): the engine is not compiled twice. Debug is the
// default (the build the tests use); --release (or STEPJOURNAL_PROFILE=release) builds the
// optimised module. The module is placed at FILE (default: `stepjournal.<target>.node` beside
// package.json, where lib/native.js looks first) by writing beside it and renaming, never in
// place. Users never run this: they install the prebuilt platform package (`npm run pack`).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { currentTarget, platformPackage } from '../lib/platform.js';
import { place } from './place.mjs';

export const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
const workspace = resolve(packageDir, '..', '..');
const LIBRARY = { linux: 'libstepjournal_node.so', darwin: 'libstepjournal_node.dylib', win32: 'stepjournal_node.dll' };

/** Removes the debug sections of the module at `path` (binutils' strip): what users install. */
function stripDebug(path) {
  const r = spawnSync('strip', ['--strip-debug', path], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (r.error) throw new Error(`stepjournal: cannot run strip (${r.error.message}); install binutils to pack the module`);
  if (r.status !== 0) throw new Error(`stepjournal: strip --strip-debug ${path} failed: ${r.stderr}`);
}

/**
 * Builds the module with cargo (`release` or `debug`) and places it at `out`, its debug sections
 * removed when `strip`; returns `out`.
 */
export function build({ profile = 'debug', out, strip = false } = {}) {
  const { target, host } = currentTarget();
  if (target === null && out === undefined) throw new Error(`stepjournal: no target name for ${host}; pass --out FILE`);
  const dest = resolve(out ?? join(packageDir, platformPackage(target).file));
  const args = ['build', '-p', 'stepjournal-node'];
  if (profile === 'release') args.push('--release');
  const built = spawnSync('cargo', args, { cwd: workspace, stdio: 'inherit' });
  if (built.error) throw new Error(`stepjournal: cannot run cargo (${built.error.message}); install Rust (rustup) to build the native module`);
  if (built.status !== 0) throw new Error(`stepjournal: cargo ${args.join(' ')} failed with status ${built.status}`);
  const targetDir = process.env.CARGO_TARGET_DIR ? resolve(workspace, process.env.CARGO_TARGET_DIR) : join(workspace, 'target');
  const library = join(targetDir, profile, LIBRARY[process.platform] ?? LIBRARY.linux);
  if (!existsSync(library)) throw new Error(`stepjournal: cargo succeeded but ${library} is missing`);
  place(library, dest, strip ? stripDebug : undefined);
  console.error(`stepjournal: placed the ${profile} native module at ${dest}`);
  return dest;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({ options: { release: { type: 'boolean' }, out: { type: 'string' } } });
  const release = values.release || process.env.STEPJOURNAL_PROFILE === 'release';
  try {
    build({ profile: release ? 'release' : 'debug', out: values.out });
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
}
