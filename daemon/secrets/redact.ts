// Redaction: every secret value the broker handed out (and still remembers) is replaced by
// `[redacted:NAME]` in text, in nested objects, and in a logger's lines, before anything leaves
// the daemon.
import type { Logger } from "../../common/log.js";

/** The values to hide, by name. */
export type ValueSource = () => Iterable<[name: string, value: string]>;

/** Replaces every occurrence of every value (longest first, so a value inside another is not split). */
export function redactText(text: string, values: readonly (readonly [string, string])[]): string {
  if (!text || !values.length) return text;
  let out = text;
  for (const [name, value] of values) {
    if (value && out.includes(value)) out = out.split(value).join(`[redacted:${name}]`);
  }
  return out;
}

/** Sorted (longest value first) snapshot of a source; empty values dropped. */
export function snapshot(source: ValueSource): [string, string][] {
  const seen = new Map<string, string>();
  for (const [name, value] of source()) if (value) seen.set(value, name);
  return [...seen].map(([value, name]) => [name, value] as [string, string]).sort((a, b) => b[1].length - a[1].length);
}

/** A copy of `v` with every string (and every object key) redacted; non-plain values are kept as they are. */
export function redactDeep<T>(v: T, values: readonly (readonly [string, string])[]): T {
  if (!values.length) return v;
  const walk = (x: unknown, depth: number): unknown => {
    if (typeof x === "string") return redactText(x, values);
    if (x === null || typeof x !== "object" || depth > 64) return x;
    if (Array.isArray(x)) return x.map((e) => walk(e, depth + 1));
    const proto = Object.getPrototypeOf(x);
    if (proto !== Object.prototype && proto !== null) return x;
    const out: Record<string, unknown> = {};
    for (const [k, e] of Object.entries(x)) out[redactText(k, values)] = walk(e, depth + 1);
    return out;
  };
  return walk(v, 0) as T;
}

/** A logger whose messages and fields are redacted against the source at each line. */
export function redactingLogger(log: Logger, source: ValueSource): Logger {
  const wrap =
    (fn: (msg: string, fields?: Record<string, unknown>) => void) =>
    (msg: string, fields?: Record<string, unknown>) => {
      const values = snapshot(source);
      if (!values.length) return fn(msg, fields);
      fn(redactText(msg, values), fields ? redactDeep(fields, values) : fields);
    };
  return {
    debug: wrap((m, f) => log.debug(m, f)),
    info: wrap((m, f) => log.info(m, f)),
    warn: wrap((m, f) => log.warn(m, f)),
    error: wrap((m, f) => log.error(m, f)),
    child: (fields) => redactingLogger(log.child(fields), source),
  };
}

/** Text that arrives in pieces, redacted as it goes: push() returns what is safe to let out now. */
export interface StreamRedactor {
  push(text: string): string;
  /** The rest, redacted (the stream ended). */
  end(): string;
}

/**
 * Redacts a stream (a run's stdout) piece by piece, finding a value also when it is cut across two
 * pieces: the end of what came in that could be the start of a value waits for the next piece. The
 * values are read at each piece (a run fetches secrets as it goes). Holds at most the longest
 * value's length, however long the stream's lines are.
 */
export function createStreamRedactor(values: () => readonly (readonly [string, string])[]): StreamRedactor {
  let held = "";
  return {
    push(text) {
      const vals = values();
      if (!vals.length) {
        const out = held + text;
        held = "";
        return out;
      }
      const all = held + text;
      let cut = all.length;
      for (const [, value] of vals) cut = Math.min(cut, all.length - partialAtEnd(all, value));
      cut = cutOutside(all, vals, cut);
      held = all.slice(cut);
      return redactText(all.slice(0, cut), vals);
    },
    end() {
      const out = redactText(held, values());
      held = "";
      return out;
    },
  };
}

/** Length of the longest end of `text` that is a proper start of `value` (a value cut by the piece's end). */
function partialAtEnd(text: string, value: string): number {
  if (value.length < 2) return 0;
  for (
    let i = text.indexOf(value[0]!, Math.max(0, text.length - value.length + 1));
    i !== -1;
    i = text.indexOf(value[0]!, i + 1)
  ) {
    if (value.startsWith(text.slice(i))) return text.length - i;
  }
  return 0;
}

/** Moves `cut` left until no whole occurrence of a value straddles it. */
function cutOutside(text: string, values: readonly (readonly [string, string])[], cut: number): number {
  for (let moved = true; moved; ) {
    moved = false;
    for (const [, value] of values) {
      if (!value) continue;
      for (
        let i = text.indexOf(value, Math.max(0, cut - value.length + 1));
        i !== -1 && i < cut;
        i = text.indexOf(value, i + 1)
      ) {
        if (i + value.length > cut) {
          cut = i;
          moved = true;
          break;
        }
      }
    }
  }
  return cut;
}
