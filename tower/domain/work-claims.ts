// The claim loop of claimable tasks: claim (long-polling for work in the agent's domain), start,
// heartbeat, complete, fail, cancel, retry, progress, and the sweep of expired leases.
import { create } from "@bufbuild/protobuf";
import { EpError, invalidField } from "../../common/errors.js";
import * as pb from "../../gen/ep/tower/v1/work_pb.js";
import { authorize, type Caller } from "./caller.js";
import { taskMsg } from "./convert.js";
import { commit } from "./event-hub.js";
import { taskEvent, text, usageEvent, usageOf, FINAL, HELD } from "./work-support.js";
import type { WorkContext } from "./work-context.js";

export function createWorkClaims(ctx: WorkContext) {
  const { deps, store, clock, limits, now, mustTask, mustActingAgent, settleBroadcast, requeueOrFail, claimOnce, mustHeld } = ctx;
  // ---- wake-ups for long-polling claimers: any task becoming queued in a domain
  const waiters = new Map<string, Set<() => void>>();
  let closed = false;
  const unsubscribe = deps.hub.subscribe((events) => {
    for (const e of events) {
      if (e.type !== "matrix" || e.status !== "queued" || !e.taskId) continue;
      const set = waiters.get(e.domainId);
      if (!set) continue;
      waiters.delete(e.domainId);
      for (const wake of set) wake();
    }
  });

  function waitForWork(domainId: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let set = waiters.get(domainId);
      if (!set) waiters.set(domainId, (set = new Set()));
      const wake = () => {
        clock.clearTimeout(timer);
        set!.delete(wake);
        resolve();
      };
      const timer = clock.setTimeout(wake, ms);
      set.add(wake);
    });
  }

  return {
    /** Releases long-polling claimers (they answer "no task") so shutdown never waits on them. */
    close() {
      closed = true;
      unsubscribe();
      for (const set of waiters.values()) for (const wake of set) wake();
      waiters.clear();
    },

    async claimTask(caller: Caller, req: pb.ClaimTaskRequest): Promise<pb.ClaimTaskResponse> {
      if (req.waitMs < 0) throw invalidField("wait_ms", "must not be negative");
      const agent = await mustActingAgent(caller, req.agentId);
      const deadline = clock.now() + Math.min(req.waitMs, limits.maxClaimWaitMs);
      for (;;) {
        const t = await claimOnce(agent);
        if (t) return create(pb.ClaimTaskResponseSchema, { task: taskMsg(t) });
        const left = deadline - clock.now();
        if (left <= 0 || closed) return create(pb.ClaimTaskResponseSchema, {});
        await waitForWork(agent.domainId, left);
      }
    },

    async startTask(caller: Caller, req: pb.StartTaskRequest): Promise<pb.StartTaskResponse> {
      await mustActingAgent(caller, req.agentId);
      return commit(deps, async (tx, emit) => {
        const t = await mustHeld(tx, req.taskId, req.agentId);
        if (t.status === "running") return create(pb.StartTaskResponseSchema, { task: taskMsg(t) });
        const updated = await tx.updateTask(t.id, { status: "running", updatedAt: now() }, { status: ["claimed"], claimedBy: req.agentId });
        if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed while starting`);
        taskEvent(emit, updated, "task.running");
        return create(pb.StartTaskResponseSchema, { task: taskMsg(updated) });
      });
    },

    async heartbeatTask(caller: Caller, req: pb.HeartbeatTaskRequest): Promise<pb.HeartbeatTaskResponse> {
      await mustActingAgent(caller, req.agentId);
      const t = await mustHeld(store, req.taskId, req.agentId);
      const updated = await store.updateTask(t.id, { leaseExpiresMs: clock.now() + limits.leaseMs }, { status: HELD, claimedBy: req.agentId });
      if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed during the heartbeat`);
      return create(pb.HeartbeatTaskResponseSchema, { task: taskMsg(updated) });
    },

    async completeTask(caller: Caller, req: pb.CompleteTaskRequest): Promise<pb.CompleteTaskResponse> {
      await mustActingAgent(caller, req.agentId);
      return commit(deps, async (tx, emit) => {
        const result = { output: req.result?.output ?? "", exitCode: req.result?.exitCode, error: req.result?.error ?? "", ...usageOf(req.result?.usage) };
        // One statement when the agent holds a live lease (the usual case); only when it does
        // not is the task read, to say why (finished, expired, taken, not there, Kanban).
        const updated = await tx.updateTask(
          req.taskId,
          { status: "succeeded", result, leaseExpiresMs: null, updatedAt: now() },
          { status: HELD, claimedBy: req.agentId, leaseAfterMs: clock.now() },
        );
        if (!updated) {
          await mustHeld(tx, req.taskId, req.agentId);
          throw new EpError("lease_not_held", `task ${req.taskId} changed while completing`);
        }
        taskEvent(emit, updated, "task.succeeded", usageEvent(result.usage));
        await settleBroadcast(tx, emit, updated.parentTaskId);
        return create(pb.CompleteTaskResponseSchema, { task: taskMsg(updated) });
      });
    },

    async failTask(caller: Caller, req: pb.FailTaskRequest): Promise<pb.FailTaskResponse> {
      await mustActingAgent(caller, req.agentId);
      return commit(deps, async (tx, emit) => {
        const t = await mustHeld(tx, req.taskId, req.agentId);
        const result = { output: req.result?.output ?? "", exitCode: req.result?.exitCode, error: req.result?.error || "failed", ...usageOf(req.result?.usage) };
        const requeue = req.retryable && t.attempts < t.maxAttempts;
        const updated = await tx.updateTask(
          t.id,
          requeue
            ? { status: "queued", claimedBy: "", leaseExpiresMs: null, result, updatedAt: now() }
            : { status: "failed", result, leaseExpiresMs: null, updatedAt: now() },
          { status: HELD, claimedBy: req.agentId },
        );
        if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed while failing`);
        taskEvent(emit, updated, requeue ? "task.requeued" : "task.failed", { reason: result.error, ...usageEvent(result.usage) });
        await settleBroadcast(tx, emit, updated.parentTaskId);
        return create(pb.FailTaskResponseSchema, { task: taskMsg(updated) });
      });
    },

    async cancelTask(caller: Caller, req: pb.CancelTaskRequest): Promise<pb.CancelTaskResponse> {
      return commit(deps, async (tx, emit) => {
        const t = await mustTask(tx, req.taskId);
        authorize(caller, "operate", { domainId: t.domainId });
        if (t.kind !== "claimable") throw new EpError("task_wrong_kind", "Kanban tasks are moved with update, not cancelled");
        if (FINAL.includes(t.status)) throw new EpError("task_finished", `task ${t.id} is already ${t.status}`, { status: t.status });
        const reason = text("reason", req.reason, { max: 1000 }) || "cancelled by operator";
        const updated = await tx.updateTask(t.id, { status: "cancelled", leaseExpiresMs: null, result: { output: "", error: reason }, updatedAt: now() }, { status: ["queued", ...HELD] });
        if (!updated) throw new EpError("conflict", `task ${t.id} changed while cancelling; try again`);
        // the holder's node is told through the link (it listens for task.cancelled)
        taskEvent(emit, { ...updated, claimedBy: t.claimedBy }, "task.cancelled", { reason });
        if (t.claimPolicy === "broadcast") {
          for (const r of await tx.listTasks({ parentTaskId: t.id })) {
            if (FINAL.includes(r.status)) continue;
            const u = await tx.updateTask(r.id, { status: "cancelled", leaseExpiresMs: null, result: { output: "", error: reason }, updatedAt: now() });
            if (u) taskEvent(emit, { ...u, claimedBy: r.claimedBy }, "task.cancelled", { reason });
          }
        }
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
          throw new EpError("task_not_retryable", `task ${t.id} is ${t.status}; only failed or cancelled tasks can be retried`, { status: t.status });
        }
        const reset = { status: "queued", attempts: 0, claimedBy: "", leaseExpiresMs: null, result: null, updatedAt: now() };
        const updated = await tx.updateTask(t.id, reset, { status: ["failed", "cancelled"] });
        if (!updated) throw new EpError("conflict", `task ${t.id} changed while retrying; try again`);
        taskEvent(emit, updated, "task.retried");
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

    async reportProgress(caller: Caller, req: pb.ReportProgressRequest): Promise<pb.ReportProgressResponse> {
      await mustActingAgent(caller, req.agentId);
      if (req.frames.length > 500) throw invalidField("frames", "at most 500 frames per call");
      await commit(deps, async (tx, emit) => {
        const t = await mustHeld(tx, req.taskId, req.agentId);
        for (const f of req.frames) {
          emit({
            type: "progress",
            name: "task.progress",
            domainId: t.domainId,
            missionId: t.missionId,
            agentId: req.agentId,
            taskId: t.id,
            status: t.status,
            payload: { task_id: t.id, kind: f.kind, text: f.text, ...(f.data ? { data: f.data } : {}) },
          });
        }
      });
      return create(pb.ReportProgressResponseSchema, {});
    },

    /** Requeues (or fails, past max_attempts) tasks whose lease expired. Returns how many. */
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
