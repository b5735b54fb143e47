// StepjournalError: every error the engine reports, with its code and the Rust message.
//
// The native module throws errors whose message is `SJ:<code>:<message>`, the codes being the
// engine's own (index.d.ts lists them, tested against the engine's list); the code of a refusal
// is `refused/<which>`. Each is turned into a StepjournalError here, in one place.

const CODED = /^SJ:([a-z_]+)(?:\/([a-z_]+))?:([\s\S]*)$/;

export class StepjournalError extends Error {
  /**
   * @param {string} code `fenced`, `conflict`, `outcome_unknown`, `poisoned`, `validation_error`,
   *   `refused`, `locked`, `invalid_url`, `malformed_scenario`, ...
   * @param {string} message the engine's message
   * @param {{ refusal?: string, cause?: unknown }} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'StepjournalError';
    this.code = code;
    if (extra.refusal !== undefined) this.refusal = extra.refusal;
  }
}

/** The error `e` as a StepjournalError when the engine threw it; anything else unchanged. */
export function toError(e) {
  if (e instanceof StepjournalError) return e;
  const m = e instanceof Error ? CODED.exec(e.message) : null;
  if (!m) return e;
  const [, code, refusal, message] = m;
  return new StepjournalError(code, message, refusal ? { refusal } : {});
}

/** Awaits `promise`, turning the engine's errors into StepjournalErrors. */
export async function wrap(promise) {
  try {
    return await promise;
  } catch (e) {
    throw toError(e);
  }
}

/** Calls `f`, turning the engine's errors into StepjournalErrors. */
export function call(f) {
  try {
    return f();
  } catch (e) {
    throw toError(e);
  }
}
