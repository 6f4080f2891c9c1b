// The worktrees a daemon made for its runs, as recorded in its home (worktrees/<task_id>.json):
// epd creates and finishes them (daemon/worker/workspace.ts); `ep workspace ls|rm|gc` reads and
// removes them on the same node without a running daemon, so the records and their git
// housekeeping live here, shared by both.
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { EpError } from "./errors.js";

const run = promisify(execFile);

/** A worktree as the daemon records it (worktrees/<task_id>.json). */
export interface WorktreeRecord {
  taskId: string;
  repo: string;
  name: string;
  path: string;
  branch: string;
  base: string;
  /** the local branch the base was taken from ("main"); empty when the ref was a tag, a commit or a remote branch */
  baseBranch?: string;
  /** the workspace's `author` setting (workspaces.toml), unresolved */
  author?: string;
  createdAt: string;
  /** active: a run is in it; kept: the run failed or was cancelled */
  state: "active" | "kept";
  keptAt?: string;
  keepFailedMs: number;
  outcome?: string;
}

/** Runs git in `cwd`: its exit code and output (merge-tree answers 1 for a conflict, merge-base 1 for "no"). */
export async function gitResult(
  cwd: string,
  args: string[],
  env?: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run("git", ["-C", cwd, ...args], {
      maxBuffer: 32 * 1024 * 1024,
      env: { ...process.env, ...env, GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string; code?: number | string };
    if (e.code === "ENOENT")
      throw new EpError("runtime_missing", "git is not installed on this node; workspaces need it");
    if (typeof e.code !== "number") throw new EpError("internal", `git ${args[0]} in ${cwd}: ${e.message}`);
    return { code: e.code, stdout: e.stdout ?? "", stderr: e.stderr || e.message };
  }
}

/** Runs git in `cwd`; a failure is an EpError with git's first line of complaint. */
export async function git(cwd: string, args: string[], opts: { env?: Record<string, string> } = {}): Promise<string> {
  const r = await gitResult(cwd, args, opts.env);
  if (r.code !== 0)
    throw new EpError("invalid_argument", `git ${args[0]} in ${cwd}: ${r.stderr.trim().split("\n")[0]}`);
  return r.stdout;
}

export const worktreesDir = (home: string) => join(home, "worktrees");
export const recordFile = (home: string, taskId: string) => join(worktreesDir(home), `${taskId}.json`);

export async function saveRecord(home: string, r: WorktreeRecord): Promise<void> {
  await writeFile(recordFile(home, r.taskId), JSON.stringify(r, null, 2) + "\n", { mode: 0o600 });
}

/** Removes a worktree's folder and git's note of it. */
export async function removeWorktreeDir(repo: string, path: string): Promise<void> {
  await git(repo, ["worktree", "remove", "--force", path]).catch(() => undefined);
  await rm(path, { recursive: true, force: true });
  await git(repo, ["worktree", "prune"]).catch(() => undefined);
}

/** Every worktree the daemon has made and not removed. */
export function listWorktrees(home: string): WorktreeRecord[] {
  const dir = worktreesDir(home);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .flatMap((f) => {
      try {
        return [JSON.parse(readFileSync(join(dir, f), "utf8")) as WorktreeRecord];
      } catch {
        return [];
      }
    })
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}

/** Removes one kept worktree (and its branch with `deleteBranch`); an active one is refused. */
export async function removeWorktree(
  home: string,
  taskId: string,
  opts: { deleteBranch?: boolean; force?: boolean } = {},
): Promise<WorktreeRecord> {
  const record = listWorktrees(home).find((r) => r.taskId === taskId);
  if (!record)
    throw new EpError("not_found", `no worktree for task ${taskId} on this node (list them with 'ep workspace ls')`);
  if (record.state === "active" && !opts.force)
    throw new EpError("conflict", `task ${taskId}'s run is still in its worktree; it is removed when the run ends`);
  await removeWorktreeDir(record.repo, record.path);
  if (opts.deleteBranch) await git(record.repo, ["branch", "-D", record.branch]).catch(() => undefined);
  await rm(recordFile(home, taskId), { force: true });
  return record;
}

/** Removes the kept worktrees older than their workspace's keep_failed (all kept ones with `all`). */
export async function gcWorktrees(home: string, now: Date, opts: { all?: boolean } = {}): Promise<WorktreeRecord[]> {
  const removed: WorktreeRecord[] = [];
  for (const r of listWorktrees(home)) {
    if (r.state !== "kept") continue;
    const age = now.getTime() - Date.parse(r.keptAt ?? r.createdAt);
    if (!opts.all && age < r.keepFailedMs) continue;
    await removeWorktree(home, r.taskId);
    removed.push(r);
  }
  return removed;
}
