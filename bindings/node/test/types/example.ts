// The example, type-checked against index.d.ts (tsc --noEmit; see types.test.mjs).
import { openJournal, defineTool, StepjournalError } from 'stepjournal';
import { z } from 'zod';

const prefs = { put: async (_session: string, _key: string, _value: string): Promise<void> => {} };

const setPreference = defineTool({
  name: 'set_preference',
  inputSchema: z.object({ key: z.string(), value: z.string() }),
  replay: 'safe',
  execute: async ({ key, value }, ctx) => {
    await prefs.put(ctx.sessionId, key, value);
    const attempt: number = ctx.attempt;
    const signal: AbortSignal = ctx.signal;
    void [attempt, signal, ctx.dispatchId, ctx.idempotencyKey];
    await ctx.output('saved');
    return { ok: true };
  },
});
const sendEmail = defineTool({
  name: 'send_email',
  inputSchema: { type: 'object', properties: { to: { type: 'string' } } },
  replay: 'unsafe',
  execute: async (args: { to: string }) => ({ sent: args.to }),
});

export async function main(): Promise<void> {
  const journal = await openJournal('file:./data', { tools: [setPreference, sendEmail] });
  const run = await journal.beginRun('user-42', { kind: 'new_turn', message: 'window seat please' });
  const step = await run.commitReply({ text: 'Saving it.', calls: [{ call: 'c1', tool: 'set_preference',
                                        args: { key: 'seat', value: 'window' } }] });
  const answers = await step.drive();
  if (answers.status === 'committed') void answers.answers.length;
  await run.end('completed');
  for (const s of await journal.sessionsToRecover()) {
    const run = await journal.beginRun(s, { kind: 'wake' });
    for (const c of run.plan.calls) void [c.call, c.action, c.rule];
    await run.drive();
  }
  const report = await journal.recoverAll({ concurrency: 4, onRecovered: (r, o) => void [r.id, o?.status] });
  for (const r of report.recovered) await r.run.end('completed');
  for (const s of report.skipped) void [s.session, s.owner, s.expiresAtMs];
  for (const w of report.waiting) void w.calls.map((c) => journal.answerClient(w.session, c, { ok: true }));
  void [report.changed.length, report.failed.map((f) => f.error)];
  const { run: finished, outcome } = await run.driveWithin();
  if (finished.status.state === 'interrupted') void [finished.status.why, outcome];
  try {
    await journal.beginRun('x', { kind: 'retry' });
  } catch (e) {
    if (e instanceof StepjournalError && e.code === 'validation_error') return;
    throw e;
  }
}

export async function snapshots(): Promise<number | null> {
  const journal = await openJournal('file:./data', { snapshotEvery: 8 });
  const run = await journal.beginRun('user-42', 'wake');
  return run.snapshot();
}

export async function cutStream(): Promise<string | undefined> {
  const journal = await openJournal('file:./data');
  const run = await journal.beginRun('user-42', 'wake');
  await run.modelAborted('Here is half', { continuation: 'resp_bg_1' });
  await run.modelAborted('no handle');
  for (const item of await run.transcript()) {
    if (item.type === 'aborted') return item.continuation;
  }
  return undefined;
}
