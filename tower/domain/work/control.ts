// What people and the sweeper do to tasks in flight: cancel (the holder hears it over its link),
// retry a failed or cancelled task, and the sweep of expired leases.
import { create } from "@bufbuild/protobuf";
import { EpError } from "../../../common/errors.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import { authorize, type Caller } from "../caller.js";
import { taskMsg } from "../convert.js";
import { commit } from "../event-hub.js";
import { taskEvent, text, FINAL, HELD } from "./support.js";
import { restoreDependents, retryStatus, settleDependents } from "./dependencies.js";
import type { WorkContext } from "./context.js";

export function createTaskControls(ctx: WorkContext) {
  const { deps, store, clock, now, mustTask, settleBroadcast, requeueOrFail } = ctx;
  return {
    async cancelTask(caller: Caller, req: pb.CancelTaskRequest): Promise<pb.CancelTaskResponse> {
      return commit(deps, async (tx, emit) => {
        const t = await mustTask(tx, req.taskId);
        authorize(caller, "operate", { domainId: t.domainId });
        if (t.kind !== "claimable")
          throw new EpError("task_wrong_kind", "Kanban tasks are moved with update, not cancelled");
        if (FINAL.includes(t.status))
          throw new EpError("task_finished", `task ${t.id} is already ${t.status}`, { status: t.status });
        const reason = text("reason", req.reason, { max: 1000 }) || "cancelled by operator";
        const updated = await tx.updateTask(
          t.id,
          { status: "cancelled", leaseExpiresMs: null, result: { output: "", error: reason }, updatedAt: now() },
          { status: ["waiting", "queued", ...HELD] },
        );
        if (!updated) throw new EpError("conflict", `task ${t.id} changed while cancelling; try again`);
        // the holder's node is told through the link (it listens for task.cancelled)
        taskEvent(emit, { ...updated, claimedBy: t.claimedBy }, "task.cancelled", { reason });
        if (t.claimPolicy === "broadcast") {
          for (const r of await tx.listTasks({ parentTaskId: t.id })) {
            if (FINAL.includes(r.status)) continue;
            const u = await tx.updateTask(r.id, {
              status: "cancelled",
              leaseExpiresMs: null,
              result: { output: "", error: reason },
              updatedAt: now(),
            });
            if (u) taskEvent(emit, { ...u, claimedBy: r.claimedBy }, "task.cancelled", { reason });
          }
        }
        await settleDependents(tx, emit, updated, updated.updatedAt);
        await settleBroadcast(tx, emit, updated.parentTaskId);
        return create(pb.CancelTaskResponseSchema, { task: taskMsg(updated) });
      });
    },

    async retryTask(caller: Caller, req: pb.RetryTaskRequest): Promise<pb.RetryTaskResponse> {
      return commit(deps, async (tx, emit) => {
        const t = await mustTask(tx, req.taskId);
        authorize(caller, "operate", { domainId: t.domainId });
        if (t.kind !== "claimable") throw new EpError("task_wrong_kind", "only claimable tasks are retried");
        if (t.status !== "failed" && t.status !== "cancelled") {
          throw new EpError(
            "task_not_retryable",
            `task ${t.id} is ${t.status}; only failed or cancelled tasks can be retried`,
            { status: t.status },
          );
        }
        const reset = {
          status: await retryStatus(tx, t),
          attempts: 0,
          claimedBy: "",
          leaseExpiresMs: null,
          result: null,
          updatedAt: now(),
        };
        const updated = await tx.updateTask(t.id, reset, { status: ["failed", "cancelled"] });
        if (!updated) throw new EpError("conflict", `task ${t.id} changed while retrying; try again`);
        taskEvent(emit, updated, "task.retried");
        await restoreDependents(tx, emit, updated, updated.updatedAt);
        if (t.claimPolicy === "broadcast") {
          for (const r of await tx.listTasks({ parentTaskId: t.id })) {
            if (r.status !== "failed" && r.status !== "cancelled") continue;
            const u = await tx.updateTask(r.id, reset);
            if (u) taskEvent(emit, u, "task.retried");
          }
          await settleBroadcast(tx, emit, t.id);
        }
        return create(pb.RetryTaskResponseSchema, { task: taskMsg((await tx.getTask(t.id))!) });
      });
    },

    async sweepExpiredLeases(): Promise<number> {
      let count = 0;
      for (;;) {
        const expired = await store.listExpiredLeases(clock.now(), 100);
        if (!expired.length) return count;
        for (const t of expired) {
          await commit(deps, (tx, emit) => requeueOrFail(tx, emit, t, "lease expired"));
          count++;
        }
      }
    },
  };
}
