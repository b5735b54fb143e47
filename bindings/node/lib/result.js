// A tool body's result as JSON text, or why it cannot be recorded. JSON.stringify would write
// `null` for NaN, drop functions and `undefined` members of arrays, write a Map as `{}`, escape a
// lone surrogate the engine's JSON reader refuses, and throw on a BigInt or a cycle: each of those
// is named here instead, so the result recorded is the one the body returned or none at all.

/** Why `value` is not JSON, as a path and a reason, or null when it is. */
export function whyNotJson(value, path = '$', seen = new Set()) {
  switch (typeof value) {
    case 'string':
      return hasLoneSurrogate(value) ? `${path} is a string with a lone surrogate (not Unicode text)` : null;
    case 'number':
      return Number.isFinite(value) ? null : `${path} is ${value} (JSON numbers are finite)`;
    case 'boolean':
      return null;
    case 'bigint':
      return `${path} is a BigInt (${value}n): give it as a string or a number`;
    case 'undefined':
      return `${path} is undefined`;
    case 'function':
      return `${path} is a function`;
    case 'symbol':
      return `${path} is a symbol`;
  }
  if (value === null) return null;
  if (typeof value.toJSON === 'function') {
    const json = value.toJSON();
    if (json !== value) return whyNotJson(json, path, seen);
  }
  if (seen.has(value)) return `${path} refers back to an object that holds it (a cycle)`;
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const why = whyNotJson(value[i], `${path}[${i}]`, seen);
        if (why) return why;
      }
      return null;
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      return `${path} is a ${value.constructor?.name ?? 'non-plain object'}, not a plain object (JSON would write it as {})`;
    }
    for (const [key, member] of Object.entries(value)) {
      if (hasLoneSurrogate(key)) return `${path} has a key with a lone surrogate`;
      // An undefined member is absent, as in JSON.stringify: the object has no such key.
      if (member === undefined) continue;
      const why = whyNotJson(member, `${path}.${key}`, seen);
      if (why) return why;
    }
    return null;
  } finally {
    seen.delete(value);
  }
}

function hasLoneSurrogate(text) {
  return typeof text.isWellFormed === 'function' ? !text.isWellFormed() : /\p{Surrogate}/u.test(text);
}

/**
 * What the native module records for a body that returned `result`: `{"ok": result}` (a body that
 * returned nothing records null), or `{"unrecordable": why}`, which lets go of the run: the
 * body ran, so neither an error nor a made-up value is written, and the next wake decides the
 * call by the rules.
 */
export function settledJson(result) {
  if (result === undefined) return '{"ok":null}';
  try {
    const why = whyNotJson(result);
    return why === null ? JSON.stringify({ ok: result }) : JSON.stringify({ unrecordable: `the result is not JSON: ${why}` });
  } catch (e) {
    return JSON.stringify({ unrecordable: `the result could not be written as JSON: ${e?.message ?? e}` });
  }
}
