// codex's own record of a thread, `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`
// (CODEX_HOME defaults to ~/.codex). codex 0.169's `exec --json` prints no item for its
// `exec_command` tool, so what a sandboxed command answered ("Read-only file system") is only
// there: its `function_call` and `function_call_output` response items. Read once, when the turn
// ends.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { refusalIn, refusalLine, triedOf, type Denial } from "./denials.js";

/** A rollout larger than this is not read (a thread that long is not a one-task run). */
const ROLLOUT_LIMIT = 32 * 1024 * 1024;
/** How many of the newest day folders are searched for the thread's file. */
const DAYS_SEARCHED = 3;

/** codex's home for a run's environment: CODEX_HOME, else ~/.codex. */
export function codexHome(env: Record<string, string | undefined>): string | undefined {
  return env.CODEX_HOME || (env.HOME ? join(env.HOME, ".codex") : undefined);
}

/** The rollout file of a thread, searched in the newest day folders under `<home>/sessions`. */
export function rolloutFile(home: string, threadId: string): string | undefined {
  const newest = (dir: string) =>
    readdirSafe(dir)
      .filter((n) => /^\d+$/.test(n))
      .map((n) => join(dir, n));
  const days = newest(join(home, "sessions")).flatMap(newest).flatMap(newest).sort().reverse().slice(0, DAYS_SEARCHED);
  for (const day of days) {
    const name = readdirSafe(day).find((n) => n.startsWith("rollout-") && n.endsWith(`-${threadId}.jsonl`));
    if (name) return join(day, name);
  }
  return undefined;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return []; // no sessions yet (or not readable): nothing to read
  }
}

/**
 * The refused calls a rollout records: a tool call whose output reads as a refusal (a command's only when it exited
 * non-zero).
 */
export function rolloutRefusals(text: string): Denial[] {
  const calls = new Map<string, { name: string; args: unknown }>();
  const out: Denial[] = [];
  for (const line of text.split("\n")) {
    if (!line.includes('"response_item"')) continue;
    let item: Record<string, unknown> | undefined;
    try {
      item = (JSON.parse(line) as { payload?: Record<string, unknown> }).payload;
    } catch {
      continue; // a torn last line while codex writes
    }
    if (!item || typeof item.call_id !== "string") continue;
    if (item.type === "function_call" || item.type === "custom_tool_call") {
      calls.set(item.call_id, { name: String(item.name ?? "tool"), args: parseArgs(item.arguments ?? item.input) });
      continue;
    }
    if (item.type !== "function_call_output" && item.type !== "custom_tool_call_output") continue;
    const output = typeof item.output === "string" ? item.output : JSON.stringify(item.output ?? "");
    const exit = /Process exited with code (\d+)/.exec(output);
    if (exit && exit[1] === "0") continue;
    const said = output.includes("\nOutput:\n") ? output.slice(output.indexOf("\nOutput:\n") + 9) : output;
    const source = refusalIn(said);
    if (!source) continue;
    const call = calls.get(item.call_id);
    out.push({
      tool: call?.name ?? "tool",
      tried: triedOf(call?.args),
      reason: refusalLine(said),
      source,
      callId: item.call_id,
    });
  }
  return out;
}

function parseArgs(raw: unknown): unknown {
  if (typeof raw !== "string") return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return raw; // a custom tool's input is plain text (apply_patch's patch)
  }
}

/**
 * A thread's rollout text, or undefined when the file is not there (or too large). Both readers
 * (the refusals, the model) ask at the end of the same turn: the last thread's text is kept, so
 * the file is found and read once.
 */
let last: { key: string; text: string | undefined } | undefined;
function rolloutText(env: Record<string, string | undefined>, threadId: string): string | undefined {
  const home = codexHome(env);
  if (!home || !/^[\w-]+$/.test(threadId)) return undefined;
  const key = `${home}\0${threadId}`;
  if (last?.key === key) return last.text;
  const file = rolloutFile(home, threadId);
  let text: string | undefined;
  try {
    text = file && statSync(file).size <= ROLLOUT_LIMIT ? readFileSync(file, "utf8") : undefined;
  } catch {
    text = undefined; // removed meanwhile: the stream's own items are all there is
  }
  last = { key, text };
  return text;
}

/** The refusals of a thread from its rollout, or none when the file is not there (or too large). */
export function threadRefusals(env: Record<string, string | undefined>, threadId: string): Denial[] {
  const text = rolloutText(env, threadId);
  return text ? rolloutRefusals(text) : [];
}

/**
 * The model a thread ran with: `codex exec --json` names none in its events, the rollout's `turn_context` line does.
 */
export function rolloutModel(env: Record<string, string | undefined>, threadId: string): string | undefined {
  for (const line of (rolloutText(env, threadId) ?? "").split("\n")) {
    if (!line.includes('"turn_context"')) continue;
    try {
      const entry = JSON.parse(line) as { type?: string; payload?: { model?: unknown } };
      if (entry.type === "turn_context" && typeof entry.payload?.model === "string") return entry.payload.model;
    } catch {
      // a torn line while codex writes: the next turn_context, if any
    }
  }
  return undefined;
}
