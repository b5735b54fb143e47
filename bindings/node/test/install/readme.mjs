// The README's examples as files: each is the fenced block after a `<!-- example: NAME -->` line
// of bindings/node/README.md, so the install test runs what the README shows.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { packageDir } from '../helpers.mjs';

/** The code of the README's example `name` (`esm` or `cjs`). */
export function readmeExample(name) {
  const readme = readFileSync(join(packageDir, 'README.md'), 'utf8');
  const m = new RegExp(`<!-- example: ${name} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(readme);
  assert.ok(m, `README.md has no fenced block after <!-- example: ${name} -->`);
  return `${m[1]}\n`;
}
