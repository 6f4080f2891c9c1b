// inflight.json: the tasks this daemon holds, so a restarted daemon can end what the last one
// left running and report what it could not deliver. No task stays `running` forever.
import { join } from "node:path";
import { createJsonFileWriter, readJsonFile } from "./json-file.js";
import type { WorkspaceOutcome } from "./workspace.js";

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
}

export interface InflightEntry {
  taskId: string;
  agentId: string;
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
}

export function createJournal(daemonHome: string): Journal {
  const path = join(daemonHome, "inflight.json");
  const entries = new Map<string, InflightEntry>();
  const writer = createJsonFileWriter(path, () => ({ version: 1, tasks: [...entries.values()] }));
  return {
    path,
    async load() {
      const doc = await readJsonFile<{ tasks?: InflightEntry[] }>(path, {});
      entries.clear();
      for (const e of Array.isArray(doc.tasks) ? doc.tasks : []) if (e && typeof e.taskId === "string") entries.set(e.taskId, e);
      return [...entries.values()];
    },
    put(entry) {
      entries.set(entry.taskId, entry);
      return writer.save();
    },
    remove(taskId) {
      if (!entries.delete(taskId)) return Promise.resolve();
      return writer.save();
    },
    entries: () => [...entries.values()],
  };
}
