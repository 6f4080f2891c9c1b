// Run directories (work/<task_id>/, one per run, and the signal runs' work/<run_id>/) are kept
// after the run for the operator to look into, and collected once untouched for WORK_KEEP_MS:
// without this a node's disk filled with one directory per task it ever ran. A directory of a
// run still held (running, or its outcome not yet acknowledged) is never collected. A process
// run's record (runs/<task_id>.out and .exit, run-record.ts) goes the same way.
import { readdir, rm, stat, unlink } from "node:fs/promises";
import { join } from "node:path";

/** How long a run's directory is kept after it was last changed (the default keep_failed of worktrees). */
export const WORK_KEEP_MS = 7 * 86_400_000;

/**
 * Removes run directories under `home`/work and run records under `home`/runs untouched for `keepMs`; returns the names
 * removed.
 */
export async function gcWorkDirs(
  home: string,
  nowMs: number,
  held: ReadonlySet<string>,
  keepMs = WORK_KEEP_MS,
): Promise<string[]> {
  const removed = await gcRunDirs(home, nowMs, held, keepMs);
  for (const name of await names(join(home, "runs"))) {
    const task = name.replace(/\.(out|exit)$/, "");
    if (task === name || held.has(task)) continue;
    const path = join(home, "runs", name);
    const st = await stat(path).catch(() => undefined);
    if (!st?.isFile() || nowMs - st.mtimeMs < keepMs) continue;
    await unlink(path).catch(() => undefined); // gone meanwhile: a new run of the task cleared it
    removed.push(name);
  }
  return removed;
}

async function names(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

async function gcRunDirs(home: string, nowMs: number, held: ReadonlySet<string>, keepMs: number): Promise<string[]> {
  const dir = join(home, "work");
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const removed: string[] = [];
  for (const name of names) {
    if (held.has(name)) continue;
    const path = join(dir, name);
    const st = await stat(path).catch(() => undefined);
    if (!st?.isDirectory() || nowMs - st.mtimeMs < keepMs) continue;
    await rm(path, { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}
