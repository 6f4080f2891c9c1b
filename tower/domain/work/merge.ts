// MergeTask: a succeeded task's branch merged into its base branch. The repository is on the node
// that ran the task, so the node merges (link command `merge`, daemon/worker/merge-requests.ts)
// and answers with a workspace.merged or workspace.merge_refused event; the caller waits for it.
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { EpError, invalidField } from "../../../common/errors.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { askNode, type Deliver } from "../node-ask.js";

/** How long MergeTask waits for the node's answer. */
export const MERGE_WAIT_MS = 30_000;

/** A branch name the merge may move (git check-ref-format's rules, narrowed). */
const BRANCH = /^(?!.*\.\.)(?!.*\/\/)(?!\/)(?!.*\/$)(?!.*\.lock$)[A-Za-z0-9._/-]{1,200}$/;

const OUTCOMES: Record<string, pb.MergeOutcome> = {
  fast_forward: pb.MergeOutcome.FAST_FORWARD,
  merge_commit: pb.MergeOutcome.MERGE_COMMIT,
  already_merged: pb.MergeOutcome.ALREADY_MERGED,
};

export type TaskMerge = ReturnType<typeof createTaskMerge>;

export function createTaskMerge(deps: Deps, deliver: Deliver, opts: { waitMs?: number } = {}) {
  const { store } = deps;
  const waitMs = opts.waitMs ?? MERGE_WAIT_MS;
  return {
    async mergeTask(caller: Caller, req: pb.MergeTaskRequest): Promise<pb.MergeTaskResponse> {
      if (!req.taskId) throw invalidField("task_id", "is required");
      const t = await store.getTask(req.taskId);
      if (!t) throw new EpError("task_not_found", `task ${req.taskId} does not exist`);
      authorize(caller, "operate", { domainId: t.domainId });
      // like deciding an approval, merging into a base branch is a person's call, not an agent's
      if (caller.role === "agent" || caller.role === "node")
        throw new EpError("forbidden", `role ${caller.role} may not merge a task's branch; an operator or admin does`, {
          role: caller.role,
        });
      const ws = t.result?.workspace;
      if (t.status !== "succeeded")
        throw new EpError(
          "task_not_mergeable",
          `task ${t.id} is ${t.status}; only a succeeded task's branch is merged`,
          { status: t.status },
        );
      if (!ws?.branch && t.claimPolicy === "broadcast" && !t.parentTaskId)
        throw new EpError(
          "task_not_mergeable",
          `task ${t.id} is a broadcast: each of its runs has its ` +
            `own branch; merge a run ('ep task get ${t.id}' lists them)`,
        );
      if (!ws?.branch)
        throw new EpError(
          "task_not_mergeable",
          `task ${t.id} ran without a workspace (no input.workspace): there is no branch to merge`,
        );
      const into = req.into || ws.baseBranch || "";
      if (!into)
        throw invalidField(
          "into",
          `task ${t.id}'s base ${ws.base.slice(0, 12)} was not taken from a branch; name the branch to merge into`,
        );
      if (!BRANCH.test(into)) throw invalidField("into", `"${into}" is not a branch name`);
      const agent = t.claimedBy ? await store.getAgent(t.claimedBy) : undefined;
      if (!agent?.nodeId)
        throw new EpError(
          "task_not_mergeable",
          `task ${t.id}'s agent ${t.claimedBy || "(none)"} is not on ` +
            `a node any more; merge ${ws.branch} with git in ${ws.repo}`,
        );

      const requestId = `mrg_${randomBytes(8).toString("hex")}`;
      const e = await askNode(deps, deliver, {
        nodeId: agent.nodeId,
        msg: {
          command: {
            case: "merge",
            value: {
              requestId,
              taskId: t.id,
              agentId: agent.id,
              repo: ws.repo,
              workspace: ws.name,
              branch: ws.branch,
              head: ws.head,
              into,
              title: t.title,
              by: caller.principal || caller.subject,
              agentName: agent.name,
              domainId: t.domainId,
              missionId: t.missionId,
            },
          },
        },
        // the answer comes from that node only (PublishEvents stamps node_id)
        answers: (x) =>
          x.payload.request_id === requestId &&
          x.payload.node_id === agent.nodeId &&
          (x.name === "workspace.merged" || x.name === "workspace.merge_refused"),
        waitMs,
        undone: `task ${t.id}'s branch was not merged`,
      });
      if (!e) {
        const why =
          `node ${agent.nodeId} did not answer within ${Math.round(waitMs / 1000)} s; the merge ` +
          `may still happen: look for workspace.merged (ep events tail --type matrix), or ask again`;
        throw new EpError("unavailable", why, { node_id: agent.nodeId });
      }
      const p = e.payload;
      if (e.name === "workspace.merge_refused") {
        const files = Array.isArray(p.files) ? p.files.map(String) : [];
        throw new EpError("merge_refused", String(p.message ?? "refused"), {
          reason: String(p.reason ?? ""),
          files,
          into,
          branch: ws.branch,
          event_id: e.id,
        });
      }
      const str = (k: string) => (typeof p[k] === "string" ? (p[k] as string) : "");
      return create(pb.MergeTaskResponseSchema, {
        outcome: OUTCOMES[str("outcome")] ?? pb.MergeOutcome.UNSPECIFIED,
        into: str("into"),
        branch: str("branch"),
        merged: str("merged"),
        previous: str("previous"),
        tip: str("tip"),
        checkout: str("checkout"),
        eventId: BigInt(e.id),
      });
    },
  };
}
