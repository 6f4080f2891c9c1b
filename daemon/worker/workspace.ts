// Workspaces: a task that names a git repository (`input.workspace = {repo, ref?, branch?}`) runs
// in a git worktree of its own, on a new branch (ep/<task_id>) from the base commit, so several
// agents work on one repository without touching each other's files. When the run ends, what it
// did (branch, base and head, committed or not, `diff --stat`, the patch) goes into the task's
// result; a successful run's worktree is removed (its branch stays), a failed or cancelled one is
// kept for inspection until `ep workspace rm|gc` (or the daemon's gc) removes it.
//
// `repo` is an absolute path of a repository on the node, or a name from workspaces.toml in the
// daemon home (docs/workspaces.md):
//   [web]
//   path = "/srv/repos/web"
//   ref = "main"            # the default base
//   setup = "npm ci"        # run in the worktree before the agent; its output is progress
//   keep_failed = "7d"      # how long gc keeps a failed run's worktree (default 7d)
//   author = "{agent} <bots@example.com>"   # who the run's commits are by (default: EP_GIT_AUTHOR, else "EP agent
//     {agent} <ep@localhost>")
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { parse, TomlError } from "smol-toml";
import { EpError, invalidField } from "../../common/errors.js";
import { create } from "@bufbuild/protobuf";
import { WorkspaceCommitSchema, type WorkspaceResult } from "../../gen/ep/tower/v1/resources_pb.js";
import {
  git,
  gitResult,
  recordFile,
  removeWorktreeDir,
  saveRecord,
  worktreesDir,
  type WorktreeRecord,
} from "../../common/worktrees.js";

// the records and their housekeeping are shared with `ep workspace` (common/worktrees.ts)
export {
  gcWorktrees,
  git,
  gitResult,
  listWorktrees,
  removeWorktree,
  type WorktreeRecord,
} from "../../common/worktrees.js";

/** The patch kept in the task's result; the whole patch is the task's artifact. */
export const PATCH_LIMIT = 64 * 1024;
const DEFAULT_KEEP_FAILED_MS = 7 * 24 * 3600_000;

export interface WorkspaceSpec {
  repo: string;
  ref?: string;
  branch?: string;
}

export interface WorkspaceConfig {
  name: string;
  path: string;
  ref?: string;
  setup?: string;
  keepFailedMs: number;
  author?: string;
}

/** What the run did: TaskResult.workspace as a plain object (it is journaled as JSON). */
export type WorkspaceOutcome = Omit<WorkspaceResult, "$typeName" | "$unknown">;

/** The task's `input.workspace`, checked; undefined when the task names none. */
export function workspaceSpecOf(input: Record<string, unknown> | undefined): WorkspaceSpec | undefined {
  const w = input?.workspace;
  if (w === undefined || w === null) return undefined;
  if (typeof w === "string") return workspaceSpecOf({ workspace: { repo: w } });
  if (typeof w !== "object" || Array.isArray(w))
    throw invalidField("input.workspace", 'must be {"repo": "<path or name>", "ref"?: "...", "branch"?: "..."}');
  const o = w as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!["repo", "ref", "branch"].includes(k))
      throw invalidField(`input.workspace.${k}`, "no such field (repo, ref, branch)");
  if (typeof o.repo !== "string" || !o.repo.trim())
    throw invalidField(
      "input.workspace.repo",
      "is required: a repository path on the node or a name from workspaces.toml",
    );
  for (const k of ["ref", "branch"] as const)
    if (o[k] !== undefined && typeof o[k] !== "string") throw invalidField(`input.workspace.${k}`, "must be a string");
  if (typeof o.branch === "string" && !/^[A-Za-z0-9][A-Za-z0-9._/-]{0,200}$/.test(o.branch))
    throw invalidField("input.workspace.branch", "is not a branch name this daemon creates (letters, digits, . _ / -)");
  return { repo: o.repo.trim(), ref: o.ref as string | undefined, branch: o.branch as string | undefined };
}

/** "7d", "12h", "30m", "0" → milliseconds. */
function parseAge(v: unknown, where: string): number {
  const m = typeof v === "string" ? /^(\d+)\s*([dhm]?)$/.exec(v.trim()) : null;
  if (!m) throw new EpError("config_invalid", `${where}: must be a duration like "7d", "12h" or "30m"`);
  return (
    Number(m[1]) * ({ d: 86_400_000, h: 3_600_000, m: 60_000, "": 3_600_000 } as const)[m[2] as "d" | "h" | "m" | ""]
  );
}

/** workspaces.toml in the daemon home: name → repository (absent file: no names). */
export function loadWorkspaces(home: string): Map<string, WorkspaceConfig> {
  const file = join(home, "workspaces.toml");
  const out = new Map<string, WorkspaceConfig>();
  if (!existsSync(file)) return out;
  let doc: Record<string, unknown>;
  try {
    doc = parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (err) {
    const line = err instanceof TomlError ? ` (line ${err.line})` : "";
    throw new EpError("config_invalid", `workspaces.toml${line}: ${(err as Error).message.split("\n")[0]}`);
  }
  for (const [name, raw] of Object.entries(doc)) {
    if (!raw || typeof raw !== "object" || Array.isArray(raw))
      throw new EpError("config_invalid", `workspaces.toml [${name}]: must be a table with path = "..."`);
    const t = raw as Record<string, unknown>;
    for (const k of Object.keys(t))
      if (!["path", "ref", "setup", "keep_failed", "author"].includes(k))
        throw new EpError(
          "config_invalid",
          `workspaces.toml [${name}].${k}: no such key (path, ref, setup, keep_failed, author)`,
        );
    if (typeof t.path !== "string" || !isAbsolute(t.path))
      throw new EpError(
        "config_invalid",
        `workspaces.toml [${name}].path: must be an absolute path of a git repository`,
      );
    for (const k of ["ref", "setup"] as const)
      if (t[k] !== undefined && typeof t[k] !== "string")
        throw new EpError("config_invalid", `workspaces.toml [${name}].${k}: must be a string`);
    if (t.author !== undefined && (typeof t.author !== "string" || !AUTHOR.test(t.author)))
      throw new EpError(
        "config_invalid",
        `workspaces.toml [${name}].author: must be "Name <email>" ({agent} stands for the agent's name)`,
      );
    out.set(name, {
      name,
      path: t.path,
      ref: t.ref as string | undefined,
      setup: t.setup as string | undefined,
      author: t.author as string | undefined,
      keepFailedMs:
        t.keep_failed === undefined
          ? DEFAULT_KEEP_FAILED_MS
          : parseAge(t.keep_failed, `workspaces.toml [${name}].keep_failed`),
    });
  }
  return out;
}

/** "Name <email>", the form of `author` settings. */
const AUTHOR = /^([^<>\n]+?)\s*<([^<>\s]+)>$/;

/**
 * Who a run's commits are by: the workspace's `author`, else EP_GIT_AUTHOR, else "EP agent <name>"; `{agent}` is the
 * agent's name.
 */
export function commitAuthor(setting: string | undefined, agentName: string): { name: string; email: string } {
  const m = setting ? AUTHOR.exec(setting.replaceAll("{agent}", agentName).trim()) : null;
  if (setting && !m)
    throw new EpError(
      "config_invalid",
      `EP_GIT_AUTHOR: must be "Name <email>" ({agent} stands for the agent's name), not ${JSON.stringify(setting)}`,
    );
  return m ? { name: m[1]!, email: m[2]! } : { name: `EP agent ${agentName}`, email: "ep@localhost" };
}

/** The git environment that makes commits by `who` (author and committer): the run's, and epd's own commits. */
export const authorEnv = (who: { name: string; email: string }): Record<string, string> => ({
  GIT_AUTHOR_NAME: who.name,
  GIT_AUTHOR_EMAIL: who.email,
  GIT_COMMITTER_NAME: who.name,
  GIT_COMMITTER_EMAIL: who.email,
});

/** Creates the run's worktree on a new branch from the base; the record says where it is. */
export async function createWorktree(
  home: string,
  taskId: string,
  spec: WorkspaceSpec,
  now: Date,
): Promise<{ record: WorktreeRecord; setup?: string }> {
  const named = loadWorkspaces(home).get(spec.repo);
  if (!named && !isAbsolute(spec.repo)) {
    throw invalidField(
      "input.workspace.repo",
      `"${spec.repo}" is neither an absolute path nor a workspace named in workspaces.toml`,
    );
  }
  const repo = named?.path ?? spec.repo;
  if (!existsSync(repo)) throw invalidField("input.workspace.repo", `${repo} does not exist on this node`);
  const top = (
    await git(repo, ["rev-parse", "--show-toplevel"]).catch(() => {
      throw invalidField("input.workspace.repo", `${repo} is not a git repository`);
    })
  ).trim();
  const ref = spec.ref ?? named?.ref ?? "HEAD";
  const base = (
    await git(top, ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`]).catch(() => {
      throw invalidField("input.workspace.ref", `${ref} is not a commit in ${top}`);
    })
  ).trim();
  // the branch the base came from is where `ep task merge` merges into
  // a ref git cannot name as a full ref (a commit, an ambiguous name) has no branch to merge into
  const full = (await gitResult(top, ["rev-parse", "--symbolic-full-name", ref])).stdout.trim();
  const baseBranch = full.startsWith("refs/heads/") ? full.slice("refs/heads/".length) : "";
  // a retried task's earlier branch stays: the new attempt gets the next free name
  const wanted = spec.branch ?? `ep/${taskId}`;
  let branch = wanted;
  for (let n = 2; (await git(top, ["branch", "--list", branch])).trim(); n++) branch = `${wanted}-${n}`;
  const path = join(worktreesDir(home), taskId);
  await mkdir(worktreesDir(home), { recursive: true, mode: 0o700 });
  if (existsSync(path)) await removeWorktreeDir(top, path);
  await git(top, ["worktree", "add", "--quiet", "-b", branch, path, base]);
  const record: WorktreeRecord = {
    taskId,
    repo: top,
    name: named?.name ?? "",
    path,
    branch,
    base,
    baseBranch,
    author: named?.author,
    createdAt: now.toISOString(),
    state: "active",
    keepFailedMs: named?.keepFailedMs ?? DEFAULT_KEEP_FAILED_MS,
  };
  await saveRecord(home, record);
  return { record, setup: named?.setup };
}

/** Runs the workspace's setup command in the worktree, each output line to `onLine`; its exit code. */
export function runSetup(
  command: string,
  cwd: string,
  env: Record<string, string>,
  onLine: (line: string) => void,
  signal?: AbortSignal,
): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn("sh", ["-c", command], { cwd, env, stdio: ["ignore", "pipe", "pipe"], signal });
    let rest = "";
    const take = (d: Buffer) => {
      const lines = (rest + d.toString("utf8")).split("\n");
      rest = lines.pop() ?? "";
      for (const l of lines) onLine(l);
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", () => resolve(127));
    child.on("close", (code) => {
      if (rest) onLine(rest);
      resolve(code ?? 1);
    });
  });
}

/** The most commits a result lists (the branch keeps them all). */
const COMMITS_LIMIT = 200;

/** The branch's commits from base to head, oldest first; `byEpd` marks epd's commit of what the run left. */
async function commitsOf(record: WorktreeRecord, epdCommit: string | undefined): Promise<WorkspaceOutcome["commits"]> {
  const log = await git(record.path, [
    "log",
    "--reverse",
    `--max-count=${COMMITS_LIMIT}`,
    "--format=%H%x00%s%x00%an <%ae>",
    `${record.base}..HEAD`,
  ]);
  return log
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [sha = "", subject = "", author = ""] = line.split("\0");
      return create(WorkspaceCommitSchema, { sha, subject, author, byEpd: sha === epdCommit });
    });
}

/**
 * What the run did in its worktree: head, its commits (the agent's, and `epdCommit`, epd's own of
 * what the run left), the stat and the patch from base (uncommitted changes included).
 */
export async function summarize(
  record: WorktreeRecord,
  epdCommit?: string,
): Promise<WorkspaceOutcome & { fullPatch: string }> {
  const wt = record.path;
  // new files count as changes: marked intent-to-add, they show in the diff
  await git(wt, ["add", "--all", "--intent-to-add"]);
  const head = (await git(wt, ["rev-parse", "HEAD"])).trim();
  const commits = await commitsOf(record, epdCommit);
  const stat = (await git(wt, ["diff", "--stat", record.base])).trimEnd();
  const files = (await git(wt, ["diff", "--name-only", record.base])).split("\n").filter(Boolean).length;
  const fullPatch = await git(wt, ["diff", "--no-color", record.base]);
  const truncated = Buffer.byteLength(fullPatch) > PATCH_LIMIT;
  return {
    repo: record.repo,
    name: record.name,
    branch: record.branch,
    base: record.base,
    head,
    committed: commits.some((c) => !c.byEpd),
    stat,
    patch: truncated ? Buffer.from(fullPatch).subarray(0, PATCH_LIMIT).toString("utf8") : fullPatch,
    patchTruncated: truncated,
    patchArtifact: "",
    worktree: "",
    filesChanged: files,
    baseBranch: record.baseBranch ?? "",
    commits,
    fullPatch,
  };
}

/** Whose run a commit of epd's is: the task and the agent, and who the commit is by. */
export interface RunIdentity {
  taskTitle: string;
  agentId: string;
  agentName: string;
  who: { name: string; email: string };
}

/** The subject, body and trailers of epd's commit of what a run left uncommitted. */
export function leftoverMessage(taskId: string, id: RunIdentity): string[] {
  const title = id.taskTitle.split("\n")[0]!.trim();
  const short = title.length > 60 ? `${title.slice(0, 59)}…` : title || "(untitled)";
  return [
    `ep: ${short} (task ${taskId}, agent ${id.agentName || id.agentId})`,
    "What the run left uncommitted when it ended, committed by epd.",
    `EP-Task: ${taskId}\nEP-Agent: ${id.agentId}`,
  ];
}

/**
 * Saves what the run left uncommitted as one commit on its branch, so removing the worktree loses
 * nothing; the new head, or undefined when there was nothing to save.
 */
export async function saveUncommitted(record: WorktreeRecord, id: RunIdentity): Promise<string | undefined> {
  if (!(await git(record.path, ["status", "--porcelain"])).trim()) return undefined;
  await git(record.path, ["add", "--all"]);
  const message = leftoverMessage(record.taskId, id).flatMap((m) => ["-m", m]);
  await git(record.path, ["-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", ...message], {
    env: authorEnv(id.who),
  });
  return (await git(record.path, ["rev-parse", "HEAD"])).trim();
}

/** The run is over: a success removes the worktree (the branch stays); otherwise it is kept. */
export async function finishWorktree(
  home: string,
  record: WorktreeRecord,
  ok: boolean,
  outcome: string,
  now: Date,
): Promise<"removed" | "kept"> {
  if (ok) {
    await removeWorktreeDir(record.repo, record.path);
    await rm(recordFile(home, record.taskId), { force: true });
    return "removed";
  }
  await saveRecord(home, { ...record, state: "kept", keptAt: now.toISOString(), outcome });
  return "kept";
}
