// Builds the native module from source with cargo and copies it to stepjournal.node.
//
// The crate is a member of the stepjournal workspace, so it shares the workspace's target/
// directory (CARGO_TARGET_DIR, if set, is honoured): the engine is not compiled twice. The debug
// build is the default (the one the workspace's tests use); STEPJOURNAL_PROFILE=release builds
// the optimised module, for measurements.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const workspace = resolve(here, '..', '..');
const profile = process.env.STEPJOURNAL_PROFILE === 'release' ? 'release' : 'debug';
const args = ['build', '-p', 'stepjournal-node'];
if (profile === 'release') args.push('--release');

const built = spawnSync('cargo', args, { cwd: workspace, stdio: 'inherit' });
if (built.error) {
  console.error(`stepjournal: cannot run cargo (${built.error.message}); install Rust (rustup) to build the native module`);
  process.exit(1);
}
if (built.status !== 0) {
  console.error(`stepjournal: cargo ${args.join(' ')} failed with status ${built.status}`);
  process.exit(built.status ?? 1);
}

const target = process.env.CARGO_TARGET_DIR ? resolve(workspace, process.env.CARGO_TARGET_DIR) : join(workspace, 'target');
const names = { linux: 'libstepjournal_node.so', darwin: 'libstepjournal_node.dylib', win32: 'stepjournal_node.dll' };
const name = names[process.platform] ?? 'libstepjournal_node.so';
const library = join(target, profile, name);
if (!existsSync(library)) {
  console.error(`stepjournal: cargo succeeded but ${library} is missing`);
  process.exit(1);
}
copyFileSync(library, join(here, 'stepjournal.node'));
console.log(`stepjournal: built ${profile} native module from ${library}`);
