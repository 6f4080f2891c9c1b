// The model a codex run used. `codex exec --json` names none in its events; codex writes each
// session to `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, whose
// `turn_context` line carries the model the turn ran with.
import { closeSync, openSync, readdirSync, readSync } from "node:fs";
import { join } from "node:path";

/** How much of a rollout file is read for its turn_context (it comes within the first lines). */
const HEAD_BYTES = 1024 * 1024;
/** Day folders searched, newest first (a run that crossed midnight is in yesterday's). */
const DAYS = 2;

/** The model of thread `threadId` from its rollout file, or undefined when there is none to read. */
export function rolloutModel(env: Record<string, string | undefined>, threadId: string): string | undefined {
  const home = env.CODEX_HOME || (env.HOME ? join(env.HOME, ".codex") : undefined);
  if (!home || !/^[\w-]+$/.test(threadId)) return undefined;
  const file = findRollout(join(home, "sessions"), threadId);
  if (!file) return undefined;
  for (const line of readHead(file).split("\n")) {
    if (!line.includes('"turn_context"')) continue;
    try {
      const entry = JSON.parse(line) as { type?: string; payload?: { model?: unknown } };
      if (entry.type === "turn_context" && typeof entry.payload?.model === "string") return entry.payload.model;
    } catch {
      return undefined; // a line cut by HEAD_BYTES: no model rather than a guess
    }
  }
  return undefined;
}

function findRollout(sessions: string, threadId: string): string | undefined {
  const newest = (dir: string) => list(dir).filter((n) => /^\d+$/.test(n)).sort().reverse().map((n) => join(dir, n));
  const days = newest(sessions).flatMap(newest).flatMap(newest).slice(0, DAYS);
  for (const dir of days) {
    const name = list(dir).find((n) => n.startsWith("rollout-") && n.endsWith(`-${threadId}.jsonl`));
    if (name) return join(dir, name);
  }
  return undefined;
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return []; // no such folder: codex wrote no session there
  }
}

function readHead(file: string): string {
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.alloc(HEAD_BYTES);
    const n = readSync(fd, buf, 0, HEAD_BYTES, 0);
    return buf.subarray(0, n).toString("utf8");
  } finally {
    closeSync(fd);
  }
}
