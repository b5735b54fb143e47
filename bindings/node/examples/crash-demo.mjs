// The crash demo: a child Node process runs a session with a safe and an unsafe tool and is
// killed with SIGKILL while both bodies run; a new process recovers the session by the seeds'
// rules. The safe call runs again as attempt 2 under the same dispatch id; the unsafe one is
// answered `outcome_unknown`.
//
//   node examples/crash-demo.mjs [DIR]     runs the demo (a fresh scratch directory by default)
//
// It prints each step and, last, one JSON line with what it found; it exits non-zero if
// recovery did not go by the rules.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

import { defineTool, openJournal } from 'stepjournal';

const SESSION = 'user-42';
const self = fileURLToPath(import.meta.url);

// Both tools report each start on stdout as one JSON line: the parent learns the dispatch id
// and attempt of each body that ran, in whichever process ran it.
function report(what) {
  process.stdout.write(`${JSON.stringify(what)}\n`);
}

/** The tools. In the crashing child the bodies wait (for the SIGKILL); after it they finish. */
function tools(wait) {
  const hold = (signal) =>
    new Promise((resolve) => {
      if (!wait) return resolve();
      signal.addEventListener('abort', resolve, { once: true });
      setInterval(() => {}, 1 << 30); // keep the process alive until it is killed
    });
  const reserveSeat = defineTool({
    name: 'reserve_seat',
    inputSchema: { type: 'object', properties: { seat: { type: 'string' } }, required: ['seat'] },
    replay: 'safe',
    execute: async ({ seat }, ctx) => {
      report({ started: 'reserve_seat', call: ctx.callId, dispatchId: ctx.dispatchId, attempt: ctx.attempt });
      await ctx.output(`holding seat ${seat}`);
      await hold(ctx.signal);
      return { seat, held: true, key: ctx.idempotencyKey };
    },
  });
  const chargeCard = defineTool({
    name: 'charge_card',
    inputSchema: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
    replay: 'unsafe',
    execute: async ({ amount }, ctx) => {
      report({ started: 'charge_card', call: ctx.callId, dispatchId: ctx.dispatchId, attempt: ctx.attempt });
      await hold(ctx.signal);
      return { charged: amount };
    },
  });
  return [reserveSeat, chargeCard];
}

/** The crashing child: begins the turn, commits the reply, drives the step; the bodies wait. */
async function child(dir) {
  const journal = await openJournal(`file:${dir}`, { tools: tools(true) });
  const run = await journal.beginRun(SESSION, { kind: 'new_turn', message: 'book 14C and pay' });
  const step = await run.commitReply({
    text: 'Reserving the seat and paying.',
    calls: [
      { call: 'c1', tool: 'reserve_seat', args: { seat: '14C' } },
      { call: 'c2', tool: 'charge_card', args: { amount: 120 } },
    ],
  });
  await step.drive();
}

/** The new process: recovers every session left open. */
async function recover(dir) {
  const journal = await openJournal(`file:${dir}`, { tools: tools(false) });
  for (const s of await journal.sessionsToRecover()) {
    const run = await journal.beginRun(s, { kind: 'wake' });
    report({ session: s, plan: run.plan.calls.map((c) => ({ call: c.call, action: c.action, rule: c.rule, reason: c.reason })) });
    const outcome = await run.drive();
    report({ session: s, outcome });
    await run.end('completed');
  }
}

/** Runs this file as `mode` in a child Node process; resolves with the JSON lines it printed. */
function start(mode, dir, onLine) {
  const proc = spawn(process.execPath, [self, mode, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = [];
  createInterface({ input: proc.stdout }).on('line', (line) => {
    const value = JSON.parse(line);
    lines.push(value);
    onLine?.(value, proc);
  });
  const done = new Promise((resolve) => proc.on('close', (code, signal) => resolve({ code, signal, lines })));
  return { proc, done };
}

async function demo(dir) {
  console.log(`1. A child process runs session ${SESSION} on file:${dir}: reserve_seat (safe) and charge_card (unsafe).`);
  const started = new Map();
  const crashing = start('child', dir, (line, proc) => {
    if (line.started) started.set(line.call, line);
    if (started.size === 2) proc.kill('SIGKILL');
  });
  const timer = setTimeout(() => crashing.proc.kill('SIGKILL'), 60_000);
  const crashed = await crashing.done;
  clearTimeout(timer);
  console.log(`2. With both bodies running, the child was killed by ${crashed.signal}.`);
  for (const s of started.values()) console.log(`   ${s.call} ${s.started}: dispatch ${s.dispatchId}, attempt ${s.attempt}`);

  console.log('3. A new process recovers the session with a wake:');
  const recovering = start('recover', dir);
  const recovered = await recovering.done;
  const plan = recovered.lines.find((l) => l.plan)?.plan ?? [];
  for (const c of plan) console.log(`   ${c.call}: ${c.action}${c.reason ? ` (${c.reason})` : ''} by rule ${c.rule}`);
  const rerun = recovered.lines.find((l) => l.started === 'reserve_seat');
  const unsafeRan = recovered.lines.some((l) => l.started === 'charge_card');
  const outcome = recovered.lines.find((l) => l.outcome)?.outcome;
  const answer = (call) => outcome?.answers?.find((a) => a.call === call);
  const before = started.get('c1');
  const found = {
    killed: crashed.signal,
    safe: { before: before && { dispatchId: before.dispatchId, attempt: before.attempt }, after: rerun && { dispatchId: rerun.dispatchId, attempt: rerun.attempt } },
    unsafe: { ranAgain: unsafeRan, answer: answer('c2') },
    recoveryExit: recovered.code,
  };
  const ok =
    crashed.signal === 'SIGKILL' &&
    recovered.code === 0 &&
    before?.attempt === 1 &&
    rerun?.attempt === 2 &&
    rerun?.dispatchId === before?.dispatchId &&
    !unsafeRan &&
    answer('c2')?.type === 'paired' &&
    answer('c2')?.reason === 'outcome_unknown' &&
    answer('c1')?.type === 'tool_result';
  if (rerun) console.log(`   c1 ran again: attempt ${rerun.attempt}, same dispatch ${rerun.dispatchId}`);
  if (answer('c2')) console.log(`   c2 was answered ${answer('c2').reason}: "${answer('c2').message}"`);
  console.log(JSON.stringify({ ok, ...found }));
  return ok;
}

const [mode, dir] = process.argv.slice(2);
if (mode === 'child') {
  await child(dir);
} else if (mode === 'recover') {
  await recover(dir);
} else {
  const scratch = mode ?? mkdtempSync(join(tmpdir(), 'stepjournal-crash-demo-'));
  const ok = await demo(mode ?? join(scratch, 'journal'));
  if (!mode) rmSync(scratch, { recursive: true, force: true });
  process.exitCode = ok ? 0 : 1;
}
