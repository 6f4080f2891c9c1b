// The tower's `merge` link command (WorkService.MergeTask): merge a task's branch into its base
// branch here, where the repository is, and answer with a `workspace.merged` or
// `workspace.merge_refused` event naming the request. Merges into one repository run one at a time.
import type { JsonObject } from "@bufbuild/protobuf";
import { EpError, toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { MergeBranch } from "../../gen/ep/tower/v1/fleet_pb.js";
import type { TowerClients } from "../link/tower-client.js";
import { commitAuthor, loadWorkspaces } from "./workspace.js";
import { mergeBranch } from "./workspace-merge.js";

export interface MergeRequestDeps {
  home: string;
  /** the daemon's environment: EP_GIT_AUTHOR */
  baseEnv: Record<string, string>;
  tower: Pick<TowerClients, "nodes">;
  log: Logger;
}

export function createMergeRequests(deps: MergeRequestDeps) {
  const queues = new Map<string, Promise<void>>();

  async function mergeOne(d: MergeBranch): Promise<void> {
    let name = "workspace.merged";
    let payload: JsonObject;
    try {
      if (!d.repo || !d.branch || !d.into)
        throw new EpError("invalid_argument", "the merge command names no repo, branch or into");
      // the merge commit is by the run's author (the workspace's `author`, EP_GIT_AUTHOR, or the agent)
      const setting = (d.workspace && loadWorkspaces(deps.home).get(d.workspace)?.author) || deps.baseEnv.EP_GIT_AUTHOR;
      const who = commitAuthor(setting, d.agentName || d.agentId);
      const done = await mergeBranch({
        repo: d.repo,
        branch: d.branch,
        head: d.head,
        into: d.into,
        taskId: d.taskId,
        taskTitle: d.title,
        by: d.by,
        who,
      });
      payload = {
        outcome: done.outcome,
        into: done.into,
        branch: done.branch,
        merged: done.merged,
        previous: done.previous,
        tip: done.tip,
        checkout: done.checkout,
      };
    } catch (err) {
      const e = toEpError(err);
      name = "workspace.merge_refused";
      const details = (e.details ?? {}) as { reason?: string; files?: string[] };
      payload = {
        reason: e.code === "merge_refused" ? (details.reason ?? "") : e.code,
        files: details.files ?? [],
        message: e.message,
        into: d.into,
        branch: d.branch,
      };
    }
    deps.log.info(name === "workspace.merged" ? "task branch merged" : "task branch not merged", {
      task_id: d.taskId,
      repo: d.repo,
      ...payload,
    });
    const event = {
      type: "matrix",
      name,
      status: name === "workspace.merged" ? "merged" : "refused",
      domainId: d.domainId,
      missionId: d.missionId,
      agentId: d.agentId,
      taskId: d.taskId,
    };
    await deps.tower.nodes
      .publishEvents({
        events: [
          { ...event, payload: { ...payload, request_id: d.requestId, task_id: d.taskId, repo: d.repo, by: d.by } },
        ],
      })
      // the tower's caller then hears no answer and is told to look for the event or ask again (already merged)
      .catch((err: unknown) =>
        deps.log.warn("merge outcome not delivered to the tower", { task_id: d.taskId, error: toEpError(err).message }),
      );
  }

  return {
    /** Runs a `merge` link command, one at a time per repository. */
    handle(d: MergeBranch): Promise<void> {
      const repo = d.repo;
      const next = (queues.get(repo) ?? Promise.resolve()).then(() => mergeOne(d));
      queues.set(repo, next);
      void next.finally(() => {
        if (queues.get(repo) === next) queues.delete(repo);
      });
      return next;
    },
  };
}
