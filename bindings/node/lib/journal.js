// The journal, its runs and steps: the seeds' API over the native module.

import { call, toError, wrap } from './errors.js';
import native from './native.js';
import { abortBody, checkReply, nativeTools, zodSchemas } from './tools.js';

/** Each journal's zod input schemas by tool name, for the checks JSON Schema cannot make. */
const schemasOf = new WeakMap();

const WORDS = {
  wake: { kind: 'wake' },
  resume: { kind: 'resume', mode: 'continue' },
  continue: { kind: 'resume', mode: 'continue' },
  retry: { kind: 'retry' },
  stop: { kind: 'stop' },
};

function entryJson(entry) {
  if (typeof entry === 'string') {
    const word = WORDS[entry];
    return JSON.stringify(word ?? { kind: entry });
  }
  return JSON.stringify(entry);
}

const parse = (text) => (text === null || text === undefined ? null : JSON.parse(text));

/**
 * Plans a conformance scenario (FORMAT.md: `log`, `tools`, `max_bodies`, `entry`), as
 * `stepjournal plan --scenario` does. Takes the scenario object or its JSON text.
 */
export function planScenario(scenario) {
  const text = typeof scenario === 'string' ? scenario : JSON.stringify(scenario);
  return JSON.parse(call(() => native.planScenario(text)));
}

export class Journal {
  /** @type {import('./binding.js').NativeJournal} */
  #native;
  constructor(nativeJournal, schemas = new Map()) {
    this.#native = nativeJournal;
    schemasOf.set(this, schemas);
  }

  /** The plan of a conformance scenario (see planScenario). */
  plan(scenario) {
    return planScenario(scenario);
  }

  /** Begins a run of `session` through `entry` (FORMAT.md's entry, or 'wake', 'resume', 'retry', 'stop'). */
  async beginRun(session, entry) {
    return new Run(this, await wrap(this.#native.beginRun(String(session), entryJson(entry))));
  }

  /** Stops the session's work; the stop's plan. */
  async stop(session) {
    return JSON.parse(await wrap(this.#native.stop(String(session))));
  }

  /** The sessions a start-up recovers. */
  sessionsToRecover() {
    return wrap(this.#native.sessionsToRecover());
  }

  /**
   * Recovers every session to recover, as the engine's `recover_all` does: each is woken at the
   * tail it was listed at without forcing a lease (a session another owner's run holds a live
   * lease on is `skipped`, one another actor wrote to since it was listed is `changed`: neither
   * is written to), its recovered step driven, and `onRecovered(run, outcome)` called to go on
   * with it. Sessions suspended on client answers or approvals are reported in `waiting` with the
   * calls they wait for (nothing written). A session whose wake or drive failed, or whose
   * `onRecovered` threw, is in `failed` with the error.
   *
   * @param {Parameters<import('../index.js').Journal['recoverAll']>[0]} [options]
   */
  async recoverAll({ concurrency = 8, onRecovered } = {}) {
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new TypeError(`recoverAll: concurrency must be a whole number of sessions, at least 1 (got ${concurrency})`);
    }
    if (onRecovered !== undefined && typeof onRecovered !== 'function') {
      throw new TypeError('recoverAll: onRecovered must be a function');
    }
    const runs = new Map();
    const thrown = new Map();
    const hand = async ([nativeRun, outcomeJson]) => {
      const run = new Run(this, nativeRun);
      let outcome;
      try {
        outcome = parse(outcomeJson);
      } catch (error) {
        thrown.set(run.sessionId, error);
        return;
      }
      runs.set(run.sessionId, { run, outcome });
      try {
        if (onRecovered) await onRecovered(run, outcome);
      } catch (error) {
        thrown.set(run.sessionId, error);
      }
    };
    const report = JSON.parse(await wrap(this.#native.recoverAll(concurrency, hand)));
    const recovered = [];
    const failed = report.failed.map(({ session, error }) => ({ session, error: toError(new Error(error)) }));
    for (const session of report.recovered) {
      const handed = runs.get(session);
      if (handed === undefined) {
        // Recovered by the engine, but its run never reached this side (its hand-over threw
        // before the run was kept): reported, not dropped.
        const error = thrown.get(session) ?? new Error(`session ${JSON.stringify(session)} was recovered but its run was not handed over`);
        failed.push({ session, error: toError(error) });
        continue;
      }
      const { run, outcome } = handed;
      if (thrown.has(session)) failed.push({ session, run, outcome, error: thrown.get(session) });
      else recovered.push({ session, run, outcome });
    }
    return { recovered, skipped: report.skipped, changed: report.changed, waiting: report.waiting, failed };
  }

  /** Writes the client's answer to client call `call`; the run it went through (drive it to go on). */
  async answerClient(session, callId, output) {
    const run = await wrap(this.#native.answerClient(String(session), String(callId), JSON.stringify(output ?? null)));
    return new Run(this, run);
  }

  /** Records the decision on approval-gated call `call`; the run it went through. */
  async decideApproval(session, callId, approved) {
    return new Run(this, await wrap(this.#native.decideApproval(String(session), String(callId), Boolean(approved))));
  }

  /**
   * Forks `session` at `checkpointId`, a step commit's checkpoint (see `steps`), into
   * `newSession`, which must not exist: the new session's events as written (`forked_from`,
   * then the `snapshot` of the original's state there). A saved step's checkpoint with calls
   * still open, any other checkpoint, an existing or invalid new session are refused
   * (StepjournalError) and nothing is written. The original is not changed.
   */
  async fork(session, checkpointId, newSession) {
    const lines = await wrap(this.#native.fork(String(session), String(checkpointId), String(newSession)));
    return lines.map((l) => JSON.parse(l));
  }

  /** What the model is shown for the session now (a fork's begins with the original's turns up to the fork). */
  async transcript(session) {
    return JSON.parse(await wrap(this.#native.transcript(String(session))));
  }

  /**
   * The session's steps, oldest first: `{step, checkpoint, committed, commitCheckpoint}`, each
   * step's checkpoint being what `{kind: 'resume', mode: 'from_checkpoint', checkpoint}` and
   * `{kind: 'retry', checkpoint}` take.
   */
  async steps(session) {
    return JSON.parse(await wrap(this.#native.steps(String(session))));
  }

  /** The session's log as `stepjournal export` writes it, one line per record. */
  exportLines(session) {
    return wrap(this.#native.exportLines(String(session)));
  }

  /** FORMAT.md's `tools` object for the journal's tools (what `stepjournal plan --tools` takes). */
  toolsJson() {
    return JSON.parse(this.#native.toolsJson());
  }

  /** Who owns the runs this journal begins: the holder of their leases. */
  get owner() {
    return this.#native.owner;
  }

  /**
   * One retention pass: deletes the sessions whose last run ended (completed, failed, stopped)
   * more than `ageMs` ago; never an open, crashed or suspended one. Each is deleted at the tail
   * it was listed at: one a runtime resumed meanwhile is kept and listed in `changed`.
   */
  retain(ageMs) {
    if (!Number.isSafeInteger(ageMs) || ageMs < 1) throw new TypeError(`retain: ageMs must be a whole number of milliseconds, at least 1 (got ${ageMs})`);
    return wrap(this.#native.retain(ageMs));
  }

  /**
   * Drops the session's events before a kept snapshot, keeping the last `keepTurns` turns whole
   * (default 1): never the newest snapshot alone, never anything an open call, a pending
   * approval or a client call needs. Resolves to `{trimmed: true, before, from, at, turns}` (the
   * log now starts at `before`; `turns` dropped in all) or `{trimmed: false, why}`. Rejects with
   * code `lease_held` while a run of the session is live, `conflict` when another actor wrote
   * to it meanwhile (nothing written).
   */
  async trim(session, { keepTurns = 1 } = {}) {
    if (!Number.isSafeInteger(keepTurns) || keepTurns < 0 || keepTurns > 0xffffffff) throw new TypeError(`trim: keepTurns must be a whole number, at least 0 (got ${keepTurns})`);
    return JSON.parse(await wrap(this.#native.trim(String(session), keepTurns)));
  }

  /** The store's and the writer's counters. */
  metrics() {
    return JSON.parse(this.#native.metrics());
  }

  /**
   * Refuses new runs; open runs get `deadlineMs` to end; then closes the store (a file
   * journal's lock is released and its threads stop), so it can be opened again at once. The
   * sessions left for recovery.
   */
  close({ deadlineMs = 0 } = {}) {
    return wrap(this.#native.close(deadlineMs));
  }
}

export class Run {
  #journal;
  /** @type {import('./binding.js').NativeRun} */
  #native;
  #plan;
  constructor(journal, nativeRun) {
    this.#journal = journal;
    this.#native = nativeRun;
  }

  get id() {
    return this.#native.id;
  }

  get sessionId() {
    return this.#native.sessionId;
  }

  /** The entry's plan: `{error, step, calls: [{call, action, rule, why, ...}], appends}`. */
  get plan() {
    this.#plan ??= JSON.parse(this.#native.plan);
    return this.#plan;
  }

  /** `{state: 'open' | 'ended' | 'fenced' | 'broken', ...}`. */
  get status() {
    return JSON.parse(this.#native.status);
  }

  /** The step the run has open (a recovered step), or null. */
  get step() {
    const step = this.#native.step();
    return step ? new Step(this.#journal, step) : null;
  }

  /** What the model is shown up to the run's tail; with `since`, only items at or after that seq. */
  async transcript(since) {
    return JSON.parse(await wrap(this.#native.transcript(since ?? null)));
  }

  /**
   * Writes a `snapshot` of the session as the run sees it now (the journal writes one every
   * `snapshotEvery` steps; this writes one before a long pause, say): the seq where it landed,
   * or null, nothing written, when the run's view cannot make one. Rejects with code `refused`,
   * refusal `step_open`, while a step is open: a snapshot stands at a committed step.
   */
  snapshot() {
    return wrap(this.#native.snapshot());
  }

  /**
   * Trims the session through this run, keeping its last `keepTurns` turns whole (default 1; a
   * run that is one long turn passes 0): what `journal.trim` does between runs, written as one
   * of the run's appends so it never fences the run. Resolves as `journal.trim` does.
   */
  async trim({ keepTurns = 1 } = {}) {
    if (!Number.isSafeInteger(keepTurns) || keepTurns < 0 || keepTurns > 0xffffffff) throw new TypeError(`trim: keepTurns must be a whole number, at least 0 (got ${keepTurns})`);
    return JSON.parse(await wrap(this.#native.trim(keepTurns)));
  }

  /** Commits the model's reply `{text, calls: [{call, tool, args, group?, sequential?}]}`: the step. */
  async commitReply(reply) {
    await checkReply(schemasOf.get(this.#journal) ?? new Map(), reply);
    return new Step(this.#journal, await wrap(this.#native.commitReply(JSON.stringify(reply))));
  }

  /** Drives the step the run has open (a recovered step); null when it has none. */
  async drive() {
    return parse(await wrap(this.#native.drive()));
  }

  /**
   * Drives the step the run has open with its tools' `timeoutMs`: a body past its deadline lets
   * go of the run, and a `wake` begun in the same call decides that call by the rules (an unsafe
   * one `outcome_unknown`, a safe one run again under its dispatch id) and drives the step on.
   * `{run, outcome}`: the run that finished the step (this one, or the wake) and its outcome.
   */
  async driveWithin() {
    const driven = await wrap(this.#native.driveWithin());
    return { run: new Run(this.#journal, driven.run), outcome: parse(driven.outcome) };
  }

  /**
   * Records that a model request was cut off (`model_aborted`): its partial answer, kept and
   * marked aborted in the transcript, and the provider's handle to go on with it
   * (`{continuation}`: a background job id), which `transcript()` gives back (after a crash
   * too) so the runtime resumes the answer rather than asks again. Rejects with code
   * `refused`, refusal `step_open`, while a step is open; with `invalid_id` for a continuation
   * that is empty, longer than 1024 bytes or holds a control character.
   */
  modelAborted(partial, options = {}) {
    if (typeof partial !== 'string') {
      throw new TypeError(`run.modelAborted: partial must be a string (got ${typeof partial})`);
    }
    const { continuation } = options ?? {};
    if (continuation !== undefined && continuation !== null && typeof continuation !== 'string') {
      throw new TypeError(`run.modelAborted: continuation must be a string (got ${typeof continuation})`);
    }
    return wrap(this.#native.modelAborted(partial, continuation ?? null));
  }

  /** Ends the run: 'completed' (default), 'failed' or 'stopped'. */
  end(outcome = 'completed') {
    return wrap(this.#native.end(outcome));
  }

  /** Ends the run failed, pairing each open call. */
  fail(error) {
    return wrap(this.#native.fail(error === undefined ? null : String(error)));
  }
}

export class Step {
  #journal;
  /** @type {import('./binding.js').NativeStep} */
  #native;
  constructor(journal, nativeStep) {
    this.#journal = journal;
    this.#native = nativeStep;
  }

  get number() {
    return this.#native.number;
  }

  get sessionId() {
    return this.#native.sessionId;
  }

  get checkpoint() {
    return this.#native.checkpoint;
  }

  get isOpen() {
    return this.#native.isOpen;
  }

  openCalls() {
    return this.#native.openCalls();
  }

  /**
   * Runs the step by the rules and commits it: `{status: 'committed', checkpoint, answers}`, or
   * `{status: 'suspended', awaiting}` when client answers or approvals are waited for.
   */
  async drive() {
    return JSON.parse(await wrap(this.#native.drive()));
  }

  /** Writes the client's answer to `call`; the run it went through (drive it to go on). */
  answerClient(callId, output) {
    return this.#journal.answerClient(this.sessionId, callId, output);
  }

  /** Decides approval-gated call `call`; the run it went through (drive it to go on). */
  decideApproval(callId, approved) {
    return this.#journal.decideApproval(this.sessionId, callId, approved);
  }
}

const OPTIONS = ['tools', 'durability', 'maxBodies', 'create', 'leaseTtlMs', 'owner', 'snapshotEvery', 'snapshotAfterBytes', 'retainEndedForMs', 'trimKeepTurns', 'operator'];

/**
 * Opens the journal at `url` (`file:PATH`, `sqlite:PATH`, `postgres://...`) with its tools.
 * Options: `tools`, `durability` ('synced' default, or 'buffered'), `maxBodies` (default 3),
 * `create` (default true), `leaseTtlMs` (how long a run's lease lasts unless renewed; default
 * 30,000: a crashed process's runs on SQLite or PostgreSQL are recoverable that long after it
 * died), `owner` (the holder of the runs' leases; default `host:pid:random`), `snapshotEvery`
 * (how many committed steps lie between two `snapshot` events a run writes; default 32, 0 for
 * none but those `run.snapshot()` writes), `snapshotAfterBytes` (bytes of text after the last
 * snapshot that make the next step commit carry one; default 1 MiB, 0 weighs none),
 * `retainEndedForMs` (sessions whose last run ended completed, failed or stopped longer ago are
 * deleted by the journal; default: kept), `trimKeepTurns` (after a run ends with a snapshot in
 * its view, its session is trimmed keeping this many last turns whole; default: never),
 * `operator` (`{ name, reason }`: who begins this journal's runs and why, recorded on each run).
 *
 * @param {string} url
 * @param {import('../index.js').OpenOptions} [options]
 */
export async function openJournal(url, options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('openJournal: options must be an object');
  const unknown = Object.keys(options).filter((k) => !OPTIONS.includes(k));
  if (unknown.length > 0) throw new TypeError(`openJournal: unknown option ${unknown.map((k) => `\`${k}\``).join(', ')} (the options are ${OPTIONS.join(', ')})`);
  const { tools = [], durability, maxBodies, create, leaseTtlMs, owner, snapshotEvery, snapshotAfterBytes, retainEndedForMs, trimKeepTurns, operator } = options;
  if (retainEndedForMs !== undefined && (!Number.isSafeInteger(retainEndedForMs) || retainEndedForMs < 1)) {
    throw new TypeError(`openJournal: retainEndedForMs must be a whole number of milliseconds, at least 1 (got ${retainEndedForMs})`);
  }
  if (operator !== undefined) {
    const fields = operator !== null && typeof operator === 'object' ? Object.keys(operator) : null;
    if (fields === null || fields.some((k) => k !== 'name' && k !== 'reason') || !['name', 'reason'].every((k) => operator[k] === undefined || typeof operator[k] === 'string')) {
      throw new TypeError('openJournal: operator must be { name?: string, reason?: string }');
    }
  }
  if (leaseTtlMs !== undefined && (!Number.isInteger(leaseTtlMs) || leaseTtlMs < 1 || leaseTtlMs > 0xffffffff)) {
    throw new TypeError(`openJournal: leaseTtlMs must be a whole number of milliseconds, at least 1 (got ${leaseTtlMs})`);
  }
  if (owner !== undefined && (typeof owner !== 'string' || owner.trim() === '')) {
    throw new TypeError('openJournal: owner must be a non-empty string');
  }
  if (snapshotEvery !== undefined && (!Number.isInteger(snapshotEvery) || snapshotEvery < 0 || snapshotEvery > 0xffffffff)) {
    throw new TypeError(`openJournal: snapshotEvery must be a whole number of steps, 0 or more (got ${snapshotEvery})`);
  }
  if (snapshotAfterBytes !== undefined && (!Number.isSafeInteger(snapshotAfterBytes) || snapshotAfterBytes < 0)) {
    throw new TypeError(`openJournal: snapshotAfterBytes must be a whole number of bytes, 0 or more (got ${snapshotAfterBytes})`);
  }
  if (trimKeepTurns !== undefined && (!Number.isInteger(trimKeepTurns) || trimKeepTurns < 0 || trimKeepTurns > 0xffffffff)) {
    throw new TypeError(`openJournal: trimKeepTurns must be a whole number of turns, 0 or more (got ${trimKeepTurns})`);
  }
  const defs = await nativeTools(tools);
  const config = { durability, maxBodies, create, leaseTtlMs, owner, snapshotEvery, snapshotAfterBytes, retainEndedForMs, trimKeepTurns, operator };
  return new Journal(await wrap(native.open(String(url), defs, abortBody, config)), zodSchemas(tools));
}
