// Where the package and cargo's output are: shared by the build, the pack and the type
// generation scripts.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's directory (bindings/node). */
export const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));

/** The cargo workspace the package's crate belongs to. */
export const workspace = resolve(packageDir, '..', '..');

/** Cargo's target directory: CARGO_TARGET_DIR, if set, else the workspace's target/. */
export function targetDir() {
  return process.env.CARGO_TARGET_DIR ? resolve(workspace, process.env.CARGO_TARGET_DIR) : join(workspace, 'target');
}

/** Where cargo's build of the module has napi-derive write its type definitions. */
export function typeDefDir() {
  return join(targetDir(), 'stepjournal-node-type-defs');
}
