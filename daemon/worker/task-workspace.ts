// A run's workspace (daemon/worker/workspace.ts) seen from the task run: opened before the
// runtime starts (the worktree, then the setup command with its output as progress), closed after
// it ends (the change summarized into the result, the whole patch as an artifact when the result
// holds only its head, the worktree removed or kept), each step an event on the stream.
import { createClient } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import { EpError, toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { ToolService } from "../../gen/ep/tower/v1/tools_pb.js";
import type { ProgressFrame } from "../runtimes/runtime.js";
import type { Run, WorkerDeps } from "./worker-types.js";
import {
  authorEnv,
  commitAuthor,
  createWorktree,
  finishWorktree,
  runSetup,
  saveUncommitted,
  summarize,
  workspaceSpecOf,
  type RunIdentity,
  type WorkspaceOutcome,
  type WorktreeRecord,
} from "./workspace.js";

export interface Workspace {
  record: WorktreeRecord;
  /** the setup command failed: the run fails with this, the worktree is kept */
  setupFailed?: EpError;
}

/** The largest artifact the tower takes (put_artifact's content limit). */
const ARTIFACT_LIMIT = 1_000_000;

function publish(deps: WorkerDeps, run: Run, name: string, payload: JsonObject): void {
  const { task, agent } = run;
  void deps.tower.nodes
    .publishEvents({
      events: [
        {
          type: "matrix",
          name,
          domainId: agent.domainId,
          missionId: task.missionId,
          agentId: agent.id,
          taskId: task.id,
          payload,
        },
      ],
    })
    .catch((err: unknown) => deps.log.debug("workspace event not delivered", { name, error: toEpError(err).message }));
}

const described = (r: WorktreeRecord): JsonObject => ({
  task_id: r.taskId,
  repo: r.repo,
  name: r.name,
  branch: r.branch,
  base: r.base,
  base_branch: r.baseBranch ?? "",
  worktree: r.path,
});

/** The run's task and agent, and who its commits are by (the workspace's author, EP_GIT_AUTHOR, or the agent). */
function identityOf(deps: WorkerDeps, run: Run, record: WorktreeRecord): RunIdentity {
  const agentName = run.agent.name || run.agent.id;
  return {
    taskTitle: run.task.title,
    agentId: run.agent.id,
    agentName,
    who: commitAuthor(record.author ?? deps.baseEnv.EP_GIT_AUTHOR, agentName),
  };
}

/**
 * The run's worktree when its task names a workspace (and the setup's outcome); undefined when it
 * names none. `env` (the run's) gains the git author and committer, so the agent's commits name it.
 */
export async function openWorkspace(
  deps: WorkerDeps,
  run: Run,
  push: (f: ProgressFrame) => void,
  env: Record<string, string>,
): Promise<Workspace | undefined> {
  // the task's own workspace, else its profile's (agents.toml `workspace = "..."`)
  const profileRepo = run.agent.profile ? deps.profiles?.place(run.agent.profile)?.workspace : undefined;
  const spec =
    workspaceSpecOf(run.task.input as Record<string, unknown> | undefined) ??
    (profileRepo ? { repo: profileRepo } : undefined);
  if (!spec) return undefined;
  const { record, setup } = await createWorktree(deps.home, run.task.id, spec, new Date(deps.clock.now()));
  Object.assign(env, authorEnv(identityOf(deps, run, record).who));
  publish(deps, run, "workspace.created", described(record));
  push({
    kind: "status",
    text: `workspace: branch ${record.branch} from ${record.base.slice(0, 12)} in ${record.path}`,
    data: { workspace: described(record) },
  });
  if (!setup) return { record };
  push({ kind: "status", text: `setup: ${setup}`, data: { setup: { command: setup } } });
  const code = await runSetup(setup, record.path, env, (line) =>
    push({ kind: "text", text: line, data: { source: "setup" } }),
  );
  push({ kind: "status", text: `setup exited ${code}`, data: { setup: { command: setup, exit_code: code } } });
  return code === 0
    ? { record }
    : {
        record,
        setupFailed: new EpError(
          "invalid_argument",
          `the workspace setup \`${setup}\` exited ${code}; its output is in the task's progress`,
        ),
      };
}

/** Summarizes the change, stores the whole patch as an artifact when needed, removes or keeps the worktree. */
export async function closeWorkspace(
  deps: WorkerDeps,
  run: Run,
  ws: Workspace,
  ok: boolean,
  tlog: Logger,
): Promise<WorkspaceOutcome | undefined> {
  const { record } = ws;
  // a successful run's worktree goes: what the agent left uncommitted is committed on its branch
  // first (the commit names the task and agent, and is marked as epd's), so nothing is lost with it
  let saved: string | undefined;
  if (ok) {
    const done = await saveUncommitted(record, identityOf(deps, run, record)).catch((err: unknown) => {
      tlog.warn("uncommitted changes not saved; the worktree is kept", {
        worktree: record.path,
        error: toEpError(err).message,
      });
      return null;
    });
    if (done === null) ok = false;
    else saved = done;
  }
  let change: Awaited<ReturnType<typeof summarize>> | undefined;
  try {
    change = await summarize(record, saved);
  } catch (err) {
    tlog.warn("workspace not summarized", { worktree: record.path, error: toEpError(err).message });
  }
  const { fullPatch, ...outcome } = change ?? {
    fullPatch: "",
    repo: record.repo,
    name: record.name,
    branch: record.branch,
    base: record.base,
    head: "",
    committed: false,
    stat: "",
    patch: "",
    patchTruncated: false,
    patchArtifact: "",
    worktree: "",
    filesChanged: 0,
    baseBranch: record.baseBranch ?? "",
    commits: [],
  };
  if (outcome.patchTruncated) {
    const name = "workspace.patch";
    await createClient(ToolService, deps.tower.transport)
      .callTool({
        tool: "put_artifact",
        agentId: run.agent.id,
        arguments: {
          task_id: run.task.id,
          name,
          content: fullPatch.slice(0, ARTIFACT_LIMIT),
          content_type: "text/x-diff",
        },
      })
      .then(() => (outcome.patchArtifact = name))
      .catch((err: unknown) =>
        tlog.warn("the whole patch was not stored as an artifact", { error: toEpError(err).message }),
      );
  }
  const kept =
    (await finishWorktree(deps.home, record, ok, ok ? "succeeded" : "failed", new Date(deps.clock.now()))) === "kept";
  if (kept) outcome.worktree = record.path;
  else publish(deps, run, "workspace.removed", { ...described(record), reason: "the run succeeded; the branch stays" });
  return outcome;
}
