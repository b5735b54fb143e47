// Types of the stepjournal package (hand-written; the JavaScript is index.js and lib/).

/** JSON as it crosses into the journal. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A zod 4 schema (zod is an optional peer dependency; its `toJSONSchema` turns it into JSON Schema). */
export interface ZodLike<T = unknown> {
  readonly _zod: unknown;
  parse(data: unknown): T;
}

/** A plain JSON Schema object. */
export type JsonSchema = { [key: string]: unknown };

/** What a running call's body is handed. */
export interface CallContext {
  readonly sessionId: string;
  readonly callId: string;
  readonly tool: string;
  /** The same on every attempt, in every run: key external effects on it. */
  readonly dispatchId: string;
  /** 1, 2, ... */
  readonly attempt: number;
  /** `session:dispatch`, the same on every attempt. */
  readonly idempotencyKey: string;
  /** Aborted once the run can no longer write (a newer run or a stop fenced it, a shutdown). */
  readonly signal: AbortSignal;
  /** Output the tool produced while running: committed at most once per output interval, and at least once per interval while text is pending. */
  output(text: string): Promise<void>;
}

export type Replay = 'safe' | 'unsafe';
export type ToolKind = 'tool' | 'client' | 'approval' | 'local_agent' | 'remote_agent' | 'companion';

type ArgsOf<S> = S extends ZodLike<infer T> ? T : any;

export interface ToolDefinition<S = ZodLike | JsonSchema, R = unknown> {
  name: string;
  inputSchema?: S;
  /** Default 'unsafe': 'safe' only if two runs of a body, even overlapping, leave what one leaves. */
  replay?: Replay;
  /** Default 'tool'. */
  kind?: ToolKind;
  /** Shorthand for kind 'approval'. */
  approval?: boolean;
  execute?: (args: ArgsOf<S>, ctx: CallContext) => Promise<R> | R;
  /** remote_agent and companion: starts the call's child (keyed on ctx.dispatchId) and settles with its session id. */
  start?: (args: ArgsOf<S>, ctx: CallContext) => Promise<string> | string;
  /** remote_agent: waits for the child's result, the call's output; after a crash it is called again, start is not. */
  attach?: (child: string, ctx: CallContext) => Promise<R> | R;
  /** companion: enters, or after a crash re-enters, the child's phase; what it settles with answers the call. */
  reenter?: (child: string, ctx: CallContext) => Promise<R> | R;
  /**
   * How long one body may run, in milliseconds: past it the run is let go as after a crash
   * (`run.drive()` rejects with code `deadline`; `run.driveWithin()` wakes and goes on by the
   * rules) and the late body's result is never recorded.
   */
  timeoutMs?: number;
}

export interface Tool {
  readonly name: string;
  readonly kind: ToolKind;
  readonly replay: Replay;
}

export function defineTool<S extends ZodLike | JsonSchema, R>(def: ToolDefinition<S, R>): Tool;
export function defineClientTool(def: { name: string; inputSchema?: ZodLike | JsonSchema }): Tool;

export type Entry =
  | { kind: 'wake' }
  | { kind: 'resume'; mode: 'continue' }
  | { kind: 'resume'; mode: 'with_message'; message: string }
  | { kind: 'resume'; mode: 'from_checkpoint'; checkpoint: string }
  | { kind: 'resume'; mode: 'from_checkpoint'; checkpointId: string }
  | { kind: 'retry'; checkpoint?: string; message?: string }
  | { kind: 'retry'; checkpointId?: string; message?: string }
  | { kind: 'new_turn'; message: string }
  | { kind: 'stop' }
  | 'wake'
  | 'resume'
  | 'continue'
  | 'retry'
  | 'stop';

export interface CallIn {
  call: string;
  tool: string;
  args?: Json | object;
  group?: string;
  sequential?: boolean;
}

export interface ReplyIn {
  text: string;
  calls?: CallIn[];
  metadata?: Json;
}

/** One call of a plan: its action and the rule that decided it (FORMAT.md's plan). */
export interface PlannedCall {
  call: string;
  action: 'keep' | 'run' | 'pair' | 'await' | 'reattach' | 'start_child' | 'reenter_child' | string;
  rule: string;
  why?: string;
  dispatch?: string;
  attempt?: number;
  reason?: string;
  [member: string]: unknown;
}

export interface Plan {
  error: null | { kind: string; message: string };
  step: number | null;
  calls: PlannedCall[];
  appends: Array<{ type: string; [member: string]: unknown }>;
  [member: string]: unknown;
}

export type TranscriptItem =
  | { type: 'message'; seq: number; text: string }
  | { type: 'reply'; seq: number; step: number; text: string; calls: Array<CallIn & { kind: ToolKind; replay: Replay }> }
  | { type: 'tool_result'; seq: number; call: string; output: Json; isError: boolean }
  | { type: 'client_answer'; seq: number; call: string; output: Json }
  | { type: 'approval_denied'; seq: number; call: string }
  | { type: 'paired'; seq: number; call: string; reason: string; message: string; partial: string }
  /** First in a trimmed session's transcript: `turns` earlier turns are no longer in the log. */
  | { type: 'trimmed'; seq: number; turns: number }
  /** A cut-off model answer; `continuation`, when the run recorded the provider's handle, resumes it. */
  | { type: 'aborted'; seq: number; partial: string; continuation?: string };

export type StepOutcome =
  | { status: 'committed'; checkpoint: string; answers: TranscriptItem[] }
  | { status: 'suspended'; awaiting: string[] };

export type RunStatus =
  | { state: 'open' }
  | { state: 'ended'; outcome: 'completed' | 'failed' | 'stopped' | 'suspended'; error: string | null }
  | { state: 'fenced'; by: string }
  | { state: 'broken'; error: string }
  /** This process let go of the run (a dropped call, a shutdown, a deadline, a lost body). */
  | { state: 'interrupted'; why: string };

export class Step {
  readonly number: number;
  readonly sessionId: string;
  readonly checkpoint: string;
  readonly isOpen: boolean;
  openCalls(): string[];
  /** Runs the step by the rules and commits it (or suspends for client answers and approvals). */
  drive(): Promise<StepOutcome>;
  answerClient(call: string, output: Json | object): Promise<Run>;
  decideApproval(call: string, approved: boolean): Promise<Run>;
}

export class Run {
  readonly id: string;
  readonly sessionId: string;
  /** The entry's plan: each call of a recovered step, its action and rule. */
  readonly plan: Plan;
  readonly status: RunStatus;
  /** The step the run has open (a recovered step), or null. */
  readonly step: Step | null;
  /** What the model is shown up to the run's tail, read from the store; with `since`, only the items whose events lie at or after that seq (what is new since a turn). */
  transcript(since?: number): Promise<TranscriptItem[]>;
  /**
   * Writes a `snapshot` of the session now (the journal writes one every `snapshotEvery` steps):
   * the seq where it landed, or null, nothing written, when the run's view cannot make one.
   * Rejects with code `refused`, refusal `step_open`, while a step is open.
   */
  snapshot(): Promise<number | null>;
  /**
   * Trims the session through this run, keeping its last `keepTurns` turns whole (default 1; a run
   * that is one long turn passes 0); never fences the run.
   */
  trim(options?: { keepTurns?: number }): Promise<
    | { trimmed: true; before: number; from: number; at: number; turns: number }
    | { trimmed: false; why: string }
  >;
  commitReply(reply: ReplyIn): Promise<Step>;
  /** Drives the recovered step; null when the run has none. */
  drive(): Promise<StepOutcome | null>;
  /** Drives with the tools' deadlines, waking past one and going on by the rules. */
  driveWithin(): Promise<{ run: Run; outcome: StepOutcome | null }>;
  /**
   * Records that a model request was cut off, with its partial answer and the provider's
   * handle to go on with it (`continuation`, a background job id), which the transcript's
   * `aborted` item gives back, after a crash too. Rejects with refusal `step_open` while a
   * step is open, with `invalid_id` for a continuation that is empty, over 1024 bytes or holds
   * a control character.
   */
  modelAborted(partial: string, options?: { continuation?: string }): Promise<void>;
  end(outcome?: 'completed' | 'failed' | 'stopped'): Promise<void>;
  fail(error?: string): Promise<void>;
}

/** What `recoverAll` did, session by session. */
export interface Recovered {
  /** Woken, their step driven and handed to `onRecovered`. */
  recovered: Array<{ session: string; run: Run; outcome: StepOutcome | null }>;
  /** Another owner's run holds a live lease on them (judged by the store's clock): left to it. */
  skipped: Array<{ session: string; owner: string; run: string; expiresAtMs: number }>;
  /** Another actor wrote to them after they were listed: nothing written, left to it. */
  changed: string[];
  /** Suspended on client answers or approvals not given yet, with the calls they wait for. */
  waiting: Array<{ session: string; calls: string[] }>;
  /** Their wake or drive failed, or `onRecovered` threw (then `run` and `outcome` are given). */
  failed: Array<{ session: string; error: unknown; run?: Run; outcome?: StepOutcome | null }>;
}

export class Journal {
  plan(scenario: object | string): Plan;
  beginRun(session: string, entry: Entry): Promise<Run>;
  stop(session: string): Promise<Plan>;
  sessionsToRecover(): Promise<string[]>;
  recoverAll(options?: { concurrency?: number; onRecovered?: (run: Run, outcome: StepOutcome | null) => unknown }): Promise<Recovered>;
  answerClient(session: string, call: string, output: Json | object): Promise<Run>;
  decideApproval(session: string, call: string, approved: boolean): Promise<Run>;
  /**
   * Forks `session` at `checkpointId` (a step commit's checkpoint, see `steps`) into `newSession`,
   * which must not exist; the new session's events as written (`forked_from`, then `snapshot`).
   * Refused (nothing written): a saved step with calls still open, any other checkpoint, an
   * existing or invalid new session.
   */
  fork(session: string, checkpointId: string, newSession: string): Promise<Array<{ type: string; session: string; seq: number; at: number; [member: string]: unknown }>>;
  /** What the model is shown for the session now (a fork's begins with the original's turns up to the fork). */
  transcript(session: string): Promise<TranscriptItem[]>;
  /** The session's steps, oldest first: each step's checkpoint (what from_checkpoint and retry take) and, once committed, its commit checkpoint. */
  steps(session: string): Promise<{ step: number; checkpoint: string; committed: boolean; commitCheckpoint: string | null }[]>;
  /** The session's log as `stepjournal export` writes it. */
  exportLines(session: string): Promise<string[]>;
  toolsJson(): { [tool: string]: { replay: Replay; input_schema: JsonSchema } };
  /** Who owns the runs this journal begins: the holder of their leases. */
  readonly owner: string;
  metrics(): { appends: number; groups: number; maxGroup: number; syncs: number; bytes: number; runsBegun: number; fencedWritesRefused: number };
  /**
   * Refuses new runs; open runs get `deadlineMs` to end; then closes the store (a file journal's
   * lock is released and its threads stop) so it can be opened again at once, here or in another
   * process. Later calls through this journal reject with code `closed`. Resolves to the sessions
   * left for recovery.
   */
  close(options?: { deadlineMs?: number }): Promise<string[]>;
  /**
   * One retention pass: deletes the sessions whose last run ended more than `ageMs` ago (never
   * an open, crashed or suspended one); a session resumed since it was listed is kept, in `changed`.
   */
  retain(ageMs: number): Promise<{ deleted: string[]; changed: string[] }>;
  /**
   * Drops the session's events before a kept snapshot, keeping the last `keepTurns` turns whole
   * (default 1); never the newest snapshot alone, never what an open call needs. Rejects with
   * `lease_held` while a run of the session is live, `conflict` when another actor wrote meanwhile.
   */
  trim(session: string, options?: { keepTurns?: number }): Promise<
    | { trimmed: true; before: number; from: number; at: number; turns: number }
    | { trimmed: false; why: string }
  >;
}

export interface OpenOptions {
  tools?: Tool[];
  durability?: 'synced' | 'buffered';
  maxBodies?: number;
  create?: boolean;
  /** How long a run's lease lasts unless renewed (default 30,000 ms): a crashed process's runs are recoverable elsewhere that long after it died. */
  leaseTtlMs?: number;
  /** The holder of the runs' leases (default `host:pid:random`); one per process. */
  owner?: string;
  /**
   * How many committed steps lie between two `snapshot` events a run writes (default 32; 0 for
   * none but those `run.snapshot()` writes): a run begins by reading the session from its newest
   * snapshot, so at most that many steps' events are folded however long the session.
   */
  snapshotEvery?: number;
  /**
   * How many bytes of text (tool outputs, replies and their arguments, answers, messages) after
   * the last snapshot make the next step commit carry one, whatever `snapshotEvery` says
   * (default 1 MiB; 0 weighs no bytes).
   */
  snapshotAfterBytes?: number;
  /**
   * Retention: sessions whose last run ended (completed, failed, stopped) more than this many
   * milliseconds ago are deleted by a thread of the journal's, a pass every tenth of the age
   * (default: sessions are kept). Open, crashed and suspended sessions are never deleted.
   */
  retainEndedForMs?: number;
  /**
   * Trim policy: after a run ends (completed or stopped) with a snapshot in its view, its session
   * is trimmed keeping this many last turns whole (default: never trimmed; see `journal.trim`).
   */
  trimKeepTurns?: number;
  /** Who begins this journal's runs, and why: recorded on each entry's `run_started` (a stop's `run_ended`). */
  operator?: { name?: string; reason?: string };
}

/** Opens `file:PATH`, `sqlite:PATH` or `postgres://...`. */
export function openJournal(url: string, options?: OpenOptions): Promise<Journal>;

/** Plans a conformance scenario as `stepjournal plan --scenario` does. */
export function planScenario(scenario: object | string): Plan;

/** What kind of failure a StepjournalError is: the engine's list of codes, exactly. */
export type ErrorCode =
  | 'conflict'
  | 'outcome_unknown'
  | 'encode'
  | 'store'
  | 'corrupt'
  | 'newer_format'
  | 'poisoned'
  | 'read_only'
  | 'closed'
  | 'store_contract'
  | 'invalid_url'
  | 'locked'
  | 'not_a_journal'
  | 'invalid_options'
  | 'validation_error'
  | 'shutting_down'
  | 'store_in_use'
  | 'lease_held'
  | 'fenced'
  | 'ended'
  | 'broken'
  | 'interrupted'
  | 'deadline'
  | 'refused'
  | 'malformed_scenario'
  | 'invalid_id'
  | 'invalid_json'
  | 'invalid_entry'
  | 'invalid_reply'
  | 'invalid_tool'
  | 'invalid_answer'
  | 'invalid_outcome'
  | 'cancelled';

/** For code 'refused': which protocol rule refused. */
export type RefusalCode =
  | 'repeated_call'
  | 'step_open'
  | 'step_closed'
  | 'unknown_call'
  | 'resolved'
  | 'paired_by_plan'
  | 'client_call'
  | 'awaiting_approval'
  | 'body_started'
  | 'max_bodies'
  | 'no_child'
  | 'no_body_started'
  | 'behind'
  | 'behind_blocked'
  | 'attempt_mismatch'
  | 'wrong_kind'
  | 'already_decided'
  | 'child_attached'
  | 'may_have_run'
  | 'nothing_to_await'
  | 'not_awaitable'
  | 'bodies_running'
  | 'open_calls'
  | 'unknown_tool'
  | 'invalid_arguments'
  | 'use_suspend'
  | 'not_waiting';

export class StepjournalError extends Error {
  readonly code: ErrorCode;
  /** For code 'refused': which refusal (`unknown_tool`, `invalid_arguments`, `step_open`, ...). */
  readonly refusal?: RefusalCode;
  constructor(code: ErrorCode, message: string, extra?: { refusal?: RefusalCode; cause?: unknown });
}
