// Each hop of a Node append, counted and timed: one session, one call at a time, in turns.
//
//   node bench/hops.mjs [--calls N] [--rounds N]
//
// A run's one-event append (`run.modelAborted(text)`: one `model_aborted` event, one append
// through the run's writer) crosses JavaScript → napi → the engine's async path on the addon's
// tokio threads → the store's committer (and its fsync when Synced) → the Promise resolved on the
// event loop. The hops are taken one at a time, each row adding one:
//   1. napi, sync: `journal.metrics()`, a native call answered on the JavaScript thread;
//   2. napi, async, no store: `run.modelAborted()` while a step is open, refused by the run
//      before it reaches the store: JavaScript → napi → a tokio task → the Promise resolved;
//   3. + the store, Buffered: the same append accepted, on a journal opened `buffered` (the
//      committer writes it, no fsync);
//   4. + fsync: on a journal opened `synced` (the default).
// For each: latency per call (p50, p99) and the context switches of every thread of the process
// per call (process.resourceUsage(): the handoffs between threads a call costs), over `calls`
// calls, best of `rounds` rounds taken in turns. The Rust async append beside it is the bench's
// `file.async.256.1` row (`target/release/stepjournal-bench --only synced`): the same store's
// append_async from one task on a current-thread tokio runtime.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { defineTool, openJournal } from 'stepjournal';

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const CALLS = flag('--calls', 400);
const ROUNDS = flag('--rounds', 3);
const TEXT = 'x'.repeat(200);
const scratch = mkdtempSync(join(tmpdir(), 'stepjournal-node-hops-'));
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }));

const noop = defineTool({ name: 'noop', inputSchema: {}, replay: 'safe', execute: async () => ({}) });

/** Times `calls` sequential calls of `call`: latencies (µs) and context switches per call. */
async function measure(call) {
  const latencies = new Float64Array(CALLS);
  const before = process.resourceUsage();
  for (let i = 0; i < CALLS; i++) {
    const t = process.hrtime.bigint();
    await call();
    latencies[i] = Number(process.hrtime.bigint() - t) / 1000;
  }
  const after = process.resourceUsage();
  latencies.sort();
  const at = (q) => latencies[Math.min(CALLS - 1, Math.floor(q * CALLS))];
  return {
    p50: at(0.5),
    p99: at(0.99),
    voluntary: (after.voluntaryContextSwitches - before.voluntaryContextSwitches) / CALLS,
    involuntary: (after.involuntaryContextSwitches - before.involuntaryContextSwitches) / CALLS,
  };
}

async function hops() {
  const journals = [];
  const open = async (tag, durability) => {
    const journal = await openJournal(`file:${join(scratch, tag)}`, { tools: [noop], durability });
    journals.push(journal);
    return journal;
  };
  const sync = await open('sync', 'synced');
  const refusing = await sync.beginRun('open-step', { kind: 'new_turn', message: 'hops' });
  await refusing.commitReply({ text: 'open', calls: [{ call: 'c1', tool: 'noop', args: {} }] });
  const buffered = await open('buffered', 'buffered');
  const bufferedRun = await buffered.beginRun('s', { kind: 'new_turn', message: 'hops' });
  const synced = await open('synced', 'synced');
  const syncedRun = await synced.beginRun('s', { kind: 'new_turn', message: 'hops' });
  const rows = [
    ['1 napi, sync (journal.metrics)', async () => sync.metrics()],
    [
      '2 napi, async, no store (a refused append)',
      async () => {
        try {
          await refusing.modelAborted(TEXT);
        } catch (e) {
          if (e.code !== 'refused') throw e;
          return;
        }
        throw new Error('the append was not refused');
      },
    ],
    ['3 + the store, Buffered (run.modelAborted)', () => bufferedRun.modelAborted(TEXT)],
    ['4 + fsync, Synced (run.modelAborted)', () => syncedRun.modelAborted(TEXT)],
  ];
  const best = rows.map(() => null);
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, [, call]] of rows.entries()) {
      const m = await measure(call);
      if (best[k] === null || m.p50 < best[k].p50) best[k] = m;
    }
  }
  for (const j of journals) await j.close();
  return rows.map(([name], k) => ({ name, ...best[k] }));
}

const results = await hops();
console.log(`stepjournal Node hops: ${CALLS} sequential calls per round, best p50 of ${ROUNDS} rounds in turns`);
console.log(`${'hop'.padEnd(46)} ${'p50 µs'.padStart(9)} ${'p99 µs'.padStart(9)} ${'+p50 µs'.padStart(9)} ${'vol. cs'.padStart(8)} ${'invol.'.padStart(7)}`);
let previous = 0;
for (const r of results) {
  console.log(
    `${r.name.padEnd(46)} ${r.p50.toFixed(1).padStart(9)} ${r.p99.toFixed(1).padStart(9)} ${(r.p50 - previous).toFixed(1).padStart(9)} ${r.voluntary.toFixed(2).padStart(8)} ${r.involuntary.toFixed(2).padStart(7)}`,
  );
  previous = r.p50;
}
console.log(`\nJSON: ${JSON.stringify(results)}`);
