// defineTool and the bridge from a tool to the native module: the input schema as JSON Schema
// (a zod schema through zod's own toJSONSchema), and the body the engine calls on the event loop.

import { StepjournalError, wrap } from './errors.js';
import { settledJson } from './result.js';

/**
 * The kinds whose call holds a child session: `start` it, then `attach` (or `reenter`) to it.
 * (The kinds and replay policies themselves are checked by the engine, by its own names, when
 * the journal opens.)
 */
const CHILD = { remote_agent: 'attach', companion: 'reenter' };
const TOOL = Symbol('stepjournal.tool');

/**
 * Defines a tool once: its name, input schema (zod or a plain JSON Schema object), replay policy
 * (`safe` only if two runs of a body, even overlapping, leave what one leaves; default `unsafe`),
 * kind (`tool`, `client`, `approval`, `local_agent`, `remote_agent`, `companion`; default `tool`),
 * body (`execute`; for `remote_agent`, `start(args, ctx)` settling with the child's session id,
 * keyed on `ctx.dispatchId`, and `attach(child, ctx)` settling with the call's output; for
 * `companion`, `start` and `reenter(child, ctx)`: after a crash only the second is called
 * again), and `timeoutMs`: how
 * long one body may run before its run is let go as after a crash (`run.drive()` then rejects
 * with code `deadline`; `run.driveWithin()` wakes the session and goes on by the rules: an
 * unsafe call `outcome_unknown`, a safe one run again), its late result never recorded.
 */
export function defineTool(def) {
  if (def === null || typeof def !== 'object') throw new TypeError('defineTool takes an object');
  const { name, inputSchema, execute } = def;
  const kind = def.kind ?? (def.approval ? 'approval' : 'tool');
  const replay = def.replay ?? 'unsafe';
  if (typeof name !== 'string' || name === '') throw new TypeError('a tool needs a non-empty string `name`');
  if (typeof kind !== 'string') throw new TypeError(`tool \`${name}\`: kind must be a string`);
  if (typeof replay !== 'string') throw new TypeError(`tool \`${name}\`: replay must be a string ('safe' or 'unsafe')`);
  if (kind === 'client') {
    if (execute !== undefined) throw new TypeError(`tool \`${name}\`: a client tool has no \`execute\` (the client answers)`);
  } else if (kind in CHILD) {
    const wait = CHILD[kind];
    if (execute !== undefined) throw new TypeError(`tool \`${name}\`: a ${kind} has \`start\` and \`${wait}\`, not \`execute\``);
    if (typeof def.start !== 'function' || typeof def[wait] !== 'function') {
      throw new TypeError(`tool \`${name}\`: a ${kind} needs \`start\` and \`${wait}\` functions`);
    }
  } else if (typeof execute !== 'function') {
    throw new TypeError(`tool \`${name}\` needs an \`execute\` function`);
  }
  const { timeoutMs } = def;
  if (timeoutMs !== undefined) {
    if (kind === 'client') throw new TypeError(`tool \`${name}\`: a client tool has no body to time out`);
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 0xffffffff) {
      throw new TypeError(`tool \`${name}\`: timeoutMs must be a whole number of milliseconds, at least 1`);
    }
  }
  const child = kind in CHILD ? { start: def.start, attach: def[CHILD[kind]] } : {};
  return Object.freeze({ [TOOL]: true, name, kind, replay, inputSchema, execute, timeoutMs, ...child });
}

/** A tool the client executes: the run suspends until `step.answerClient` / `journal.answerClient`. */
export function defineClientTool({ name, inputSchema }) {
  return defineTool({ name, inputSchema, kind: 'client' });
}

function isZod(schema) {
  return schema !== null && typeof schema === 'object' && '_zod' in schema;
}

let zodModule;
async function zod() {
  if (zodModule === undefined) {
    try {
      zodModule = await import('zod');
    } catch (e) {
      throw new StepjournalError('invalid_tool', 'a zod input schema needs the `zod` package (version 4) installed', { cause: e });
    }
  }
  return zodModule;
}

/** The tool's input schema as JSON Schema: zod's own toJSONSchema for a zod schema. */
async function jsonSchema(tool) {
  const schema = tool.inputSchema;
  if (schema === undefined) return {};
  if (isZod(schema)) {
    const z = await zod();
    const toJSONSchema = z.toJSONSchema ?? z.z?.toJSONSchema;
    if (typeof toJSONSchema !== 'function') {
      throw new StepjournalError('invalid_tool', `tool \`${tool.name}\`: the installed zod has no toJSONSchema (zod 4 is needed)`);
    }
    try {
      return toJSONSchema(schema, { io: 'input' });
    } catch (e) {
      // z.date(), z.bigint(), z.map(), ...: arguments arrive as JSON, which cannot hold them.
      throw new StepjournalError('invalid_tool', `tool \`${tool.name}\`: its zod input schema cannot be written as JSON Schema (${e.message}); arguments arrive as JSON: use a schema of JSON values`, { cause: e });
    }
  }
  if (schema === null || typeof schema !== 'object') {
    throw new StepjournalError('invalid_tool', `tool \`${tool.name}\`: inputSchema must be a zod schema or a JSON Schema object`);
  }
  return schema;
}

function messageOf(e) {
  if (e instanceof Error) return e.message || e.name;
  try {
    return typeof e === 'string' ? e : JSON.stringify(e) ?? String(e);
  } catch {
    return String(e);
  }
}

/**
 * The bodies' abort controllers by token, and the callback the engine calls when a body's run
 * can no longer write (fenced, stopped, shut down).
 */
const controllers = new Map();
export function abortBody(token) {
  const controller = controllers.get(token);
  if (controller !== undefined) {
    controller.abort(new StepjournalError('cancelled', 'the run can no longer write (a newer run or a stop fenced it, or the journal shut down): nothing more of this call will be recorded'));
  }
}

/**
 * The body the native module calls, running `fn` (`execute`, `start`, or with `takesArgs` false
 * `attach`, which is handed the child's session id): it never rejects; a throw is an error result.
 */
function body(tool, fn = tool.execute, takesArgs = true) {
  const zodSchema = isZod(tool.inputSchema) ? tool.inputSchema : undefined;
  // The engine hands one argument: [argsJson, nativeCtx].
  return ([argsJson, native]) => {
    const token = native.token;
    const controller = new AbortController();
    controllers.set(token, controller);
    if (native.cancelled) abortBody(token);
    const ctx = Object.freeze({
      sessionId: native.sessionId,
      callId: native.callId,
      tool: native.tool,
      dispatchId: native.dispatchId,
      attempt: native.attempt,
      idempotencyKey: native.idempotencyKey,
      signal: controller.signal,
      output: (text) => wrap(native.output(String(text))),
    });
    return (async () => {
      let result;
      try {
        let args = argsJson;
        if (takesArgs) {
          args = JSON.parse(argsJson);
          // Async rules (`.refine(async …)`) were checked before the reply was saved; the body
          // gets the parsed value (transforms and defaults applied) through the same parse.
          if (zodSchema !== undefined) args = await zodSchema.parseAsync(args);
        }
        result = await fn(args, ctx);
      } catch (e) {
        return JSON.stringify({ error: messageOf(e) });
      } finally {
        controllers.delete(token);
      }
      // The body succeeded: its result is recorded as it is, or not at all, never as an error.
      return settledJson(result);
    })();
  };
}

/** The tools as the native module takes them. */
export async function nativeTools(tools) {
  const defs = [];
  for (const tool of tools ?? []) {
    if (!tool || tool[TOOL] !== true) throw new TypeError('each of `tools` must come from defineTool');
    defs.push({
      name: tool.name,
      kind: tool.kind,
      replay: tool.replay,
      inputSchema: JSON.stringify(await jsonSchema(tool)),
      execute: tool.execute === undefined ? undefined : body(tool),
      start: tool.start === undefined ? undefined : body(tool, tool.start),
      attach: tool.attach === undefined ? undefined : body(tool, tool.attach, false),
      timeoutMs: tool.timeoutMs,
    });
  }
  return defs;
}

/** The zod input schemas of `tools` by tool name. */
export function zodSchemas(tools) {
  return new Map((tools ?? []).filter((t) => isZod(t?.inputSchema)).map((t) => [t.name, t.inputSchema]));
}

/**
 * Refuses a reply a call of which has arguments its tool's zod schema rejects: the rules JSON
 * Schema cannot carry (`.refine()`, `.superRefine()`, ...) are checked here, before the engine
 * saves the reply, so a reply is never saved with arguments its body would refuse.
 */
export async function checkReply(schemas, reply) {
  if (schemas.size === 0 || !Array.isArray(reply?.calls)) return;
  for (const c of reply.calls) {
    const schema = schemas.get(c?.tool);
    if (schema === undefined) continue;
    const parsed = await schema.safeParseAsync(c.args ?? {});
    if (parsed.success) continue;
    const issues = parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(the arguments)'}: ${i.message}`).join('; ');
    throw new StepjournalError('refused', `call \`${c.call}\`: the arguments fail tool \`${c.tool}\`'s schema: ${issues.slice(0, 500)}`, { refusal: 'invalid_arguments' });
  }
}
