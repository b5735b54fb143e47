// Loads the native module. An installed package loads the prebuilt module of its platform
// package (`stepjournal-linux-x64-gnu`, an optional dependency npm installs on that platform
// only); a checkout of the repository loads the module `npm run build` placed beside this
// package (`stepjournal.linux-x64-gnu.node`), which a tarball never holds.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

import { currentTarget, platformPackage } from './platform.js';

const require = createRequire(import.meta.url);

function load() {
  const { target, host } = currentTarget();
  if (target === null) {
    throw new Error(
      `stepjournal: no prebuilt native module for ${host} (built for linux-x64-gnu); ` +
        'build it from a checkout of the repository with Rust: `cd bindings/node && npm ci && npm run build`',
    );
  }
  const { name, file } = platformPackage(target);
  const local = fileURLToPath(new URL(`../${file}`, import.meta.url));
  if (existsSync(local)) return require(local);
  try {
    return require(name);
  } catch (e) {
    if (e?.code !== 'MODULE_NOT_FOUND' || !String(e.message).includes(name)) throw e;
    throw new Error(
      `stepjournal: the native module for ${host} is missing: the package \`${name}\` is not installed ` +
        '(npm installs it as an optional dependency: install again without --omit=optional / --no-optional); ' +
        'in a checkout of the repository, `npm run build` builds it from source',
      { cause: e },
    );
  }
}

/** @type {typeof import('./binding.js')} */
const binding = load();

export default binding;
