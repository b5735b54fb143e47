// A runtime process the lease test kills: `node leased.mjs URL [LEASE_TTL_MS]` opens the journal
// (with that lease TTL, if given), holds a run mid-body, says it is ready and waits for SIGKILL.
import { defineTool, openJournal } from '../../index.js';

const [url, ttl] = process.argv.slice(2);
const work = defineTool({ name: 'work', replay: 'safe', execute: () => new Promise(() => setInterval(() => {}, 1 << 30)) });
const options = { tools: [work], owner: 'crashing-process' };
if (ttl !== undefined) options.leaseTtlMs = Number(ttl);
const journal = await openJournal(url, options);
const run = await journal.beginRun('leased', { kind: 'new_turn', message: 'work' });
const step = await run.commitReply({ text: '', calls: [{ call: 'w1', tool: 'work', args: {} }] });
step.drive().catch(() => {});
await new Promise((r) => setTimeout(r, 50));
process.stdout.write(`${JSON.stringify({ ready: true, owner: journal.owner })}\n`);
