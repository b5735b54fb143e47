// A runtime process the continuation test starts: `crash DIR` begins session `s`, records a
// model request cut off with the provider's continuation handle, says the transcript, and kills
// itself with SIGKILL before anything else (no end, no close).
import { openJournal } from '../../index.js';

const [mode, dir] = process.argv.slice(2);
if (mode !== 'crash') {
  console.error(`aborted: unknown mode ${mode}`);
  process.exit(2);
}
const journal = await openJournal(`file:${dir}`);
const run = await journal.beginRun('s', { kind: 'new_turn', message: 'write the report' });
await run.modelAborted('Here is the first half of', { continuation: 'resp_bg_7f3a' });
process.stdout.write(`${JSON.stringify(await run.transcript())}\n`);
process.kill(process.pid, 'SIGKILL');
