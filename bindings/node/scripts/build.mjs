// Builds the native module from source with cargo, for contributors working in a checkout:
//
//   node scripts/build.mjs [--release] [--out FILE] [--types]
//
// The crate is a member of the stepjournal workspace and shares its target/ directory
// (CARGO_TARGET_DIR, if set, is honoured): the engine is not compiled twice. Debug is the
// default (the build the tests use); --release (or STEPJOURNAL_PROFILE=release) builds the
// optimised module. The module is placed at FILE (default: `stepjournal.<target>.node` beside
// package.json, where lib/native.js looks first) by writing beside it and renaming, never in
// place. With --types (`npm run build`) it writes lib/binding.d.ts again, the module's declarations
// napi-rs generates (scripts/types.mjs); the tests' build leaves it, and a test fails when it is
// not current. Users never run this: they install the prebuilt platform package (`npm run pack`).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { currentTarget, platformPackage } from '../lib/platform.js';
import { packageDir, targetDir, typeDefDir, workspace } from './paths.mjs';
import { place } from './place.mjs';
import { bindingDts, writeBindingTypes } from './types.mjs';

export { packageDir };
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
  // napi-derive writes the module's type definitions into this folder as it compiles
  // (scripts/types.mjs); when they are missing the crate is compiled again to write them.
  const typeDefs = typeDefDir();
  mkdirSync(typeDefs, { recursive: true });
  const written = readdirSync(typeDefs).length > 0;
  const env = {
    ...process.env,
    NAPI_TYPE_DEF_TMP_FOLDER: typeDefs,
    NAPI_FORCE_BUILD_STEPJOURNAL_NODE: written ? 'written' : String(Date.now()),
  };
  const built = spawnSync('cargo', args, { cwd: workspace, stdio: 'inherit', env });
  if (built.error) throw new Error(`stepjournal: cannot run cargo (${built.error.message}); install Rust (rustup) to build the native module`);
  if (built.status !== 0) throw new Error(`stepjournal: cargo ${args.join(' ')} failed with status ${built.status}`);
  const library = join(targetDir(), profile, LIBRARY[process.platform] ?? LIBRARY.linux);
  if (!existsSync(library)) throw new Error(`stepjournal: cargo succeeded but ${library} is missing`);
  place(library, dest, strip ? stripDebug : undefined);
  console.error(`stepjournal: placed the ${profile} native module at ${dest}`);
  return dest;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({ options: { release: { type: 'boolean' }, out: { type: 'string' }, types: { type: 'boolean' } } });
  const release = values.release || process.env.STEPJOURNAL_PROFILE === 'release';
  try {
    build({ profile: release ? 'release' : 'debug', out: values.out });
    if (values.types && (await writeBindingTypes())) console.error(`stepjournal: wrote ${bindingDts}`);
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
}
