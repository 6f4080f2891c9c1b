// The journal (inflight.json and inflight.log): the tasks this daemon holds, so a restarted daemon
// can end what the last one left running and report what it could not deliver. No task stays
// `running` forever.
import { ftruncateSync, mkdirSync, openSync, readFileSync, truncateSync, writeSync } from "node:fs";
import { join } from "node:path";
import { EpError } from "../../common/errors.js";
import { readJsonFileSync, writeJsonFileSync } from "./json-file.js";
import type { WorkspaceOutcome } from "./workspace.js";
import type { Denial } from "../runtimes/denials.js";

export interface TaskOutcome {
  ok: boolean;
  output: string;
  exitCode?: number;
  error?: string;
  /** for failures: may the tower requeue it (attempts permitting) */
  retryable: boolean;
  /** tokens and cost the runtime reported */
  usage?: { input_tokens: number; output_tokens: number; cached_input_tokens: number; cost_usd: number; model: string };
  /** the run's worktree and its change (TaskResult.workspace) */
  workspace?: WorkspaceOutcome;
  /** tool calls the agent was refused (TaskResult.denials) */
  denials?: Denial[];
}

export interface InflightEntry {
  taskId: string;
  agentId: string;
  /** the claim's lease (Task.lease_id): the outcome is the tower's only under it */
  leaseId?: string;
  /** running: a subprocess was (or is being) started; reporting: the outcome waits for the tower's acknowledgement */
  state: "running" | "reporting";
  startedAt: string;
  /** leader of the run's process group and its start time (from /proc), to end orphans safely */
  pid?: number;
  pidStart?: string;
  outcome?: TaskOutcome;
}

export interface Journal {
  readonly path: string;
  load(): Promise<InflightEntry[]>;
  put(entry: InflightEntry): Promise<void>;
  remove(taskId: string): Promise<void>;
  entries(): InflightEntry[];
  /** Writes the snapshot and empties the log (on close; load does it too). */
  compact(): void;
}

/** Log lines after which the journal is compacted into inflight.json. */
const COMPACT_EVERY = 256;

type LogLine = { put: InflightEntry } | { remove: string };

/**
 * The journal is inflight.json (a snapshot, written atomically) plus inflight.log (one JSON line
 * per change since it, appended). A change is one append to an open file (~4 µs here) instead of
 * an atomic rewrite of the whole file (~350 µs): three per task, on every task (docs/PERFORMANCE.md,
 * "Lean Connect paths and epd's per-task files"). Like the rewrite, an append is in the kernel's
 * hands when it returns (no fsync): it survives epd dying, not the machine. A torn last line (epd
 * killed mid-write) is skipped on load; every other line is whole.
 */
export function createJournal(daemonHome: string): Journal {
  const path = join(daemonHome, "inflight.json");
  const logPath = join(daemonHome, "inflight.log");
  const entries = new Map<string, InflightEntry>();
  let fd: number | undefined;
  let lines = 0;

  function compact(): void {
    mkdirSync(daemonHome, { recursive: true, mode: 0o700 });
    writeJsonFileSync(path, { version: 1, tasks: [...entries.values()] });
    if (fd !== undefined) ftruncateSync(fd, 0);
    else truncateQuietly(logPath);
    lines = 0;
  }

  function append(line: LogLine): Promise<void> {
    try {
      if (fd === undefined) {
        mkdirSync(daemonHome, { recursive: true, mode: 0o700 });
        fd = openSync(logPath, "a", 0o600);
      }
      writeSync(fd, JSON.stringify(line) + "\n");
      if (++lines >= COMPACT_EVERY) compact();
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(
        new EpError("internal", `${logPath}: cannot write the journal: ${(err as Error).message}`, undefined, {
          cause: err,
        }),
      );
    }
  }

  return {
    path,
    async load() {
      entries.clear();
      for (const e of readJournal(daemonHome)) entries.set(e.taskId, e);
      compact();
      return [...entries.values()];
    },
    put(entry) {
      entries.set(entry.taskId, entry);
      return append({ put: entry });
    },
    remove(taskId) {
      if (!entries.delete(taskId)) return Promise.resolve();
      return append({ remove: taskId });
    },
    entries: () => [...entries.values()],
    compact,
  };
}

/** Applies the log's lines in order; a line that is not a whole change (a torn write) is skipped. */
function replay(entries: Map<string, InflightEntry>, text: string): void {
  for (const raw of text.split("\n")) {
    if (!raw) continue;
    let line: Partial<{ put: InflightEntry; remove: string }>;
    try {
      line = JSON.parse(raw);
    } catch {
      continue;
    }
    if (line.put && typeof line.put.taskId === "string") entries.set(line.put.taskId, line.put);
    else if (typeof line.remove === "string") entries.delete(line.remove);
  }
}

/** The journal's entries as a new daemon loads them: the snapshot, then the log's changes in order. */
export function readJournal(daemonHome: string): InflightEntry[] {
  const entries = new Map<string, InflightEntry>();
  const doc = readJsonFileSync<{ tasks?: InflightEntry[] }>(join(daemonHome, "inflight.json"), {});
  for (const e of Array.isArray(doc.tasks) ? doc.tasks : [])
    if (e && typeof e.taskId === "string") entries.set(e.taskId, e);
  let log = "";
  try {
    log = readFileSync(join(daemonHome, "inflight.log"), "utf8");
  } catch (err) {
    // no log yet: the snapshot is everything; a log that cannot be read must not pass for an empty one
    if ((err as NodeJS.ErrnoException).code !== "ENOENT")
      throw new EpError(
        "internal",
        `${join(daemonHome, "inflight.log")}: cannot read the journal: ${(err as Error).message}`,
        undefined,
        { cause: err },
      );
  }
  replay(entries, log);
  return [...entries.values()];
}

function truncateQuietly(p: string): void {
  try {
    truncateSync(p, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}
