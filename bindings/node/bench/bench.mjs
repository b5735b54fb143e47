// The Node API beside what a TypeScript runtime uses today for the same durability, in turns:
// appends/s and steps/s from 1, 64 and 1,000 concurrent sessions.
//
//   node bench/bench.mjs [--budget-ms N] [--rounds N] [--sessions 1,64,1000] [--rust]
//
// The workload is the Rust bench's `drive` row: a step of 4 calls of a safe tool answered at
// once, through commitReply and drive (10 appends per step: the reply with its dispatch ids,
// 4 attempt_started, 4 tool_result, step_commit), each session stepping until the budget has
// passed. The baselines append the same 10 events per step, each one durable before the next:
//   - better-sqlite3 (WAL, synchronous=FULL), one transaction per append;
//   - the same with a simple group commit: one transaction per event-loop turn;
//   - a JSONL file per session with an fsync per line (what Pi Durable's JSONL storage does).
// Build the release module first (npm run build -- --release), or run it from the installed package; --rust runs
// target/release/stepjournal-bench --quick --only drive after, for the same workload in Rust.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { open as openFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { defineTool, openJournal } from 'stepjournal';

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
};
const BUDGET_MS = Number(flag('--budget-ms', 2000));
const ROUNDS = Number(flag('--rounds', 2));
const SESSIONS = flag('--sessions', '1,64,1000').split(',').map(Number);
const APPENDS_PER_STEP = 10;
const CALLS = 4;
const ARGS = { query: 'restaurants near the station', limit: 5 };
const OUTPUT = { results: ['Chez Nous', 'La Table', 'Bistro 9'], took_ms: 41 };
const scratch = mkdtempSync(join(tmpdir(), 'stepjournal-node-bench-'));
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }));

const lookup = defineTool({ name: 'lookup', inputSchema: {}, replay: 'safe', execute: async () => OUTPUT });
const reply = {
  text: 'looking',
  calls: Array.from({ length: CALLS }, (_, i) => ({ call: `c${i}`, tool: 'lookup', args: ARGS })),
};

/** Runs `step(i)` for every session until the budget has passed; steps and elapsed ms. */
async function slice(n, step) {
  const until = performance.now() + BUDGET_MS;
  const start = performance.now();
  let steps = 0;
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      while (performance.now() < until) {
        await step(i);
        steps += 1;
      }
    }),
  );
  return { steps, ms: performance.now() - start };
}

/** The Node API: one journal, n runs begun (not timed), each stepping through drive. */
async function nodeApi(n, tag) {
  const journal = await openJournal(`file:${join(scratch, `node-${tag}`)}`, { tools: [lookup] });
  const runs = await Promise.all(Array.from({ length: n }, (_, i) => journal.beginRun(`s-${i}`, { kind: 'new_turn', message: 'bench' })));
  return {
    name: 'stepjournal (Node API, file, Synced)',
    journal,
    async round() {
      const before = journal.metrics();
      const m = await slice(n, async (i) => {
        const step = await runs[i].commitReply(reply);
        const outcome = await step.drive();
        if (outcome.status !== 'committed') throw new Error(`step not committed: ${JSON.stringify(outcome)}`);
      });
      const after = journal.metrics();
      m.appends = after.appends - before.appends;
      m.groups = after.groups - before.groups;
      return m;
    },
  };
}

/** The events of one step, as JSON lines a runtime would store (the same sizes as the journal's). */
function stepEvents(session, step) {
  const events = [{ type: 'reply_committed', session, step, text: reply.text, calls: reply.calls }];
  for (const c of reply.calls) events.push({ type: 'attempt_started', session, call: c.call, dispatch: `d-${step}-${c.call}`, attempt: 1 });
  for (const c of reply.calls) events.push({ type: 'tool_result', session, call: c.call, output: OUTPUT, is_error: false });
  events.push({ type: 'step_commit', session, step, checkpoint: `cp-${step}` });
  return events.map((e) => JSON.stringify({ ...e, at: Date.now() }));
}

/** better-sqlite3, WAL, synchronous=FULL, one transaction per append. */
async function sqlite(n, tag) {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(join(scratch, `sqlite-${tag}.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE IF NOT EXISTS events (session TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session, seq))');
  const insert = db.prepare('INSERT INTO events (session, seq, body) VALUES (?, ?, ?)');
  const append = db.transaction((session, seq, body) => insert.run(session, seq, body));
  const seqs = new Array(n).fill(0);
  const steps = new Array(n).fill(0);
  return {
    name: 'better-sqlite3 (WAL, synchronous=FULL, txn per append)',
    async round() {
      const m = await slice(n, async (i) => {
        const session = `s-${i}`;
        for (const line of stepEvents(session, ++steps[i])) {
          append(session, seqs[i]++, line);
          await null; // the event loop may run other sessions between appends
        }
      });
      m.appends = m.steps * APPENDS_PER_STEP;
      return m;
    },
    close: () => db.close(),
  };
}

/**
 * better-sqlite3, WAL, synchronous=FULL, with a simple group commit: the appends made in one
 * event-loop turn go into one transaction, run on the next turn; each append resolves after it.
 */
async function sqliteGrouped(n, tag) {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(join(scratch, `sqlite-grouped-${tag}.db`));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE IF NOT EXISTS events (session TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session, seq))');
  const insert = db.prepare('INSERT INTO events (session, seq, body) VALUES (?, ?, ?)');
  const commit = db.transaction((batch) => batch.forEach((a) => insert.run(a.session, a.seq, a.body)));
  let queue = [];
  let groups = 0;
  const flush = () => {
    const batch = queue;
    queue = [];
    groups += 1;
    try {
      commit(batch);
      batch.forEach((a) => a.resolve());
    } catch (e) {
      batch.forEach((a) => a.reject(e));
    }
  };
  const append = (session, seq, body) =>
    new Promise((resolve, reject) => {
      if (queue.length === 0) setImmediate(flush);
      queue.push({ session, seq, body, resolve, reject });
    });
  const seqs = new Array(n).fill(0);
  const steps = new Array(n).fill(0);
  return {
    name: 'better-sqlite3 (WAL, FULL, group commit per event-loop turn)',
    async round() {
      const before = groups;
      const m = await slice(n, async (i) => {
        const session = `s-${i}`;
        for (const line of stepEvents(session, ++steps[i])) await append(session, seqs[i]++, line);
      });
      m.appends = m.steps * APPENDS_PER_STEP;
      m.groups = groups - before;
      return m;
    },
    close: () => db.close(),
  };
}

/** A JSONL file per session, an fsync per line. */
async function jsonl(n, tag) {
  const files = await Promise.all(Array.from({ length: n }, (_, i) => openFile(join(scratch, `jsonl-${tag}-${i}.jsonl`), 'a')));
  const steps = new Array(n).fill(0);
  return {
    name: 'JSONL file per session, fsync per line',
    async round() {
      const m = await slice(n, async (i) => {
        for (const line of stepEvents(`s-${i}`, ++steps[i])) {
          await files[i].appendFile(`${line}\n`);
          await files[i].sync();
        }
      });
      m.appends = m.steps * APPENDS_PER_STEP;
      return m;
    },
    close: () => Promise.all(files.map((f) => f.close())),
  };
}

const fmt = (x) => (x >= 100 ? Math.round(x).toLocaleString('en-US') : x.toFixed(1));
const pad = (s, w) => String(s).padStart(w);

console.log(`stepjournal Node bench: ${BUDGET_MS} ms per slice, ${ROUNDS} rounds in turns, UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE ?? '4 (default)'}`);
console.log(`workload: steps of ${CALLS} calls, ${APPENDS_PER_STEP} appends per step, every append durable (fsync) before it returns\n`);
const header = `${'sessions'.padEnd(8)} ${'system'.padEnd(60)} ${pad('appends/s', 11)} ${pad('steps/s', 9)} ${pad('appends/group', 13)} ${pad('vs sqlite', 9)} ${pad('vs grouped', 10)} ${pad('vs jsonl', 9)}`;
console.log(header);
console.log('-'.repeat(header.length));
const results = [];
for (const n of SESSIONS) {
  const contenders = [await nodeApi(n, n), await sqlite(n, n), await sqliteGrouped(n, n), await jsonl(n, n)];
  const best = contenders.map(() => null);
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, c] of contenders.entries()) {
      const m = await c.round();
      const rate = (m.appends / m.ms) * 1000;
      if (best[k] === null || rate > best[k].appendsPerS) {
        best[k] = { appendsPerS: rate, stepsPerS: (m.steps / m.ms) * 1000, group: m.groups ? m.appends / m.groups : null };
      }
    }
  }
  const [node, sql, grouped, file] = best;
  for (const [k, c] of contenders.entries()) {
    const b = best[k];
    const vs = (other) => (k === 0 ? `${(b.appendsPerS / other.appendsPerS).toFixed(1)}x` : '');
    console.log(`${String(n).padEnd(8)} ${c.name.padEnd(60)} ${pad(fmt(b.appendsPerS), 11)} ${pad(fmt(b.stepsPerS), 9)} ${pad(b.group ? b.group.toFixed(1) : '', 13)} ${pad(vs(sql), 9)} ${pad(vs(grouped), 10)} ${pad(vs(file), 9)}`);
  }
  results.push({ sessions: n, node, sqlite: sql, sqliteGrouped: grouped, jsonl: file });
  for (const c of contenders) await c.close?.();
}
console.log(`\nJSON: ${JSON.stringify(results)}`);

if (argv.includes('--rust')) {
  const workspace = resolve(fileURLToPath(import.meta.url), '..', '..', '..', '..');
  const bin = join(workspace, 'target', 'release', 'stepjournal-bench');
  console.log(`\nthe same workload in Rust: ${bin} --quick --only drive`);
  const r = spawnSync(bin, ['--quick', '--only', 'drive', '--dir', join(scratch, 'rust'), '--json', join(scratch, 'rust.json')], { encoding: 'utf8' });
  if (r.status !== 0) console.log(`(the Rust bench failed: ${r.error?.message ?? r.stderr})`);
  else console.log(r.stdout);
}
