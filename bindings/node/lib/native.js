// Loads the native module cargo built (scripts/build.mjs copies it to stepjournal.node).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let native;
try {
  native = require('../stepjournal.node');
} catch (e) {
  throw new Error(`stepjournal: the native module is not built (run \`npm install\` or \`npm run build\` in bindings/node): ${e.message}`, { cause: e });
}
export default native;
