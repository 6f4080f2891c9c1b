// The claim loop of claimable tasks: claim (long-polling for work in the agent's domain), start,
// heartbeat, complete, fail, progress. Cancel, retry and the lease sweep are work-control.ts.
import { create } from "@bufbuild/protobuf";
import { EpError, invalidField } from "../../../common/errors.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import type { Caller } from "../caller.js";
import { taskMsg, wordOf } from "../convert.js";
import { commit, type Emit } from "../event-hub.js";
import {
  denialsEvent,
  denialsOf,
  taskEvent,
  usageEvent,
  usageOf,
  workspaceOf,
  HELD,
  type ActingAgent,
} from "./support.js";
import type { Store, TaskRow } from "../../store/store.js";
import type { WorkContext } from "./context.js";
import { WorkWaiters } from "./waiters.js";
import { nextAfterOutcome, releaseIn, sendNext } from "./push.js";
import { settleDependents } from "./dependencies.js";
import { leaseOf } from "./context.js";
import { durationMs } from "@bufbuild/protobuf/wkt";

/**
 * The frames' kinds as the event stream speaks them ("text", "tool", "status", "json"); a number FrameKind does not
 * have is refused.
 */
const frameWords = (frames: readonly pb.ProgressFrame[]) =>
  frames.map((f, i) => wordOf(pb.FrameKindSchema, f.kind, `frames[${i}].kind`));

/** How long a claim may wait for a task, in ms: unset is at once; negative is refused. */
function claimWaitMs(req: pb.ClaimTaskRequest): number {
  const ms = req.wait ? durationMs(req.wait) : 0;
  if (ms < 0) throw invalidField("wait", "must not be negative");
  return ms;
}

export function createWorkClaims(ctx: WorkContext) {
  const { deps, store, clock, limits, now, mustActingAgent, settleBroadcast, claimOnce, mustHeld, markAgent } = ctx;

  /**
   * After an outcome, in its commit, when the agent says it is idle (agent_idle): its next task
   * claimed for it, to go on its link once committed (work-push.ts), else the agent idle.
   */
  const afterOutcome = (
    tx: Store,
    emit: Emit,
    caller: Caller,
    agent: ActingAgent,
    req: { agentIdle: boolean },
    settled?: TaskRow,
  ): Promise<TaskRow | undefined> =>
    req.agentIdle ? nextAfterOutcome(ctx, tx, emit, caller, agent, settled) : Promise.resolve(undefined);
  // wake-ups for long-polling claimers: any task becoming queued in their domain
  const waiters = new WorkWaiters(deps.hub, clock);
  let closed = false;

  return {
    /** Releases long-polling claimers (they answer "no task") so shutdown never waits on them. */
    close() {
      closed = true;
      waiters.close();
    },

    async claimTask(caller: Caller, req: pb.ClaimTaskRequest): Promise<pb.ClaimTaskResponse> {
      const waitMs = claimWaitMs(req);
      const agent = await mustActingAgent(caller, req.agentId);
      const deadline = clock.now() + Math.min(waitMs, limits.maxClaimWaitMs);
      const t = await waiters.claimUntil(
        agent,
        deadline,
        () => claimOnce(agent, req.start),
        () => closed,
      );
      return create(pb.ClaimTaskResponseSchema, t ? { task: taskMsg(t) } : {});
    },

    async startTask(caller: Caller, req: pb.StartTaskRequest): Promise<pb.StartTaskResponse> {
      await mustActingAgent(caller, req.agentId);
      const leaseId = leaseOf(req.leaseId);
      return commit(deps, async (tx, emit) => {
        const t = await mustHeld(tx, req.taskId, req.agentId, leaseId);
        if (t.status === "running") return create(pb.StartTaskResponseSchema, { task: taskMsg(t) });
        const updated = await tx.updateTask(
          t.id,
          { status: "running", updatedAt: now() },
          { status: ["claimed"], claimedBy: req.agentId, leaseId: t.leaseId },
        );
        if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed while starting`);
        taskEvent(emit, updated, "task.running");
        return create(pb.StartTaskResponseSchema, { task: taskMsg(updated) });
      });
    },

    async heartbeatTask(caller: Caller, req: pb.HeartbeatTaskRequest): Promise<pb.HeartbeatTaskResponse> {
      await mustActingAgent(caller, req.agentId);
      const t = await mustHeld(store, req.taskId, req.agentId, leaseOf(req.leaseId));
      const updated = await store.updateTask(
        t.id,
        { leaseExpiresMs: clock.now() + limits.leaseMs },
        { status: HELD, claimedBy: req.agentId, leaseId: t.leaseId },
      );
      if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed during the heartbeat`);
      return create(pb.HeartbeatTaskResponseSchema, { task: taskMsg(updated) });
    },

    async completeTask(caller: Caller, req: pb.CompleteTaskRequest): Promise<pb.CompleteTaskResponse> {
      const agent = await mustActingAgent(caller, req.agentId);
      const leaseId = leaseOf(req.leaseId) || undefined;
      const { updated, next } = await commit(deps, async (tx, emit) => {
        const result = {
          output: req.result?.output ?? "",
          exitCode: req.result?.exitCode,
          error: req.result?.error ?? "",
          ...usageOf(req.result?.usage),
          ...workspaceOf(req.result?.workspace),
          ...denialsOf(req.result?.denials),
        };
        // One statement when the agent holds a live lease (the usual case); only when it does
        // not is the task read, to say why (finished, expired, taken, not there, Kanban).
        const updated = await tx.updateTask(
          req.taskId,
          { status: "succeeded", result, leaseExpiresMs: null, updatedAt: now() },
          leaseId
            ? { status: HELD, claimedBy: req.agentId, leaseId }
            : { status: HELD, claimedBy: req.agentId, leaseAfterMs: clock.now() },
        );
        if (!updated) {
          await mustHeld(tx, req.taskId, req.agentId, leaseId);
          throw new EpError("lease_not_held", `task ${req.taskId} changed while completing`);
        }
        taskEvent(emit, updated, "task.succeeded", { ...usageEvent(result.usage), ...denialsEvent(result.denials) });
        await settleDependents(tx, emit, updated, updated.updatedAt);
        await settleBroadcast(tx, emit, updated.parentTaskId);
        // the succeeded row: a child it queued and the agent takes next has it as its parent
        return { updated, next: await afterOutcome(tx, emit, caller, agent, req, updated) };
      });
      deps.meter?.reported(updated, "succeeded", clock.now());
      sendNext(ctx, agent, next);
      return create(pb.CompleteTaskResponseSchema, { task: taskMsg(updated) });
    },

    async failTask(caller: Caller, req: pb.FailTaskRequest): Promise<pb.FailTaskResponse> {
      const agent = await mustActingAgent(caller, req.agentId);
      const leaseId = leaseOf(req.leaseId);
      const { updated, next, outcome } = await commit(deps, async (tx, emit) => {
        const t = await mustHeld(tx, req.taskId, req.agentId, leaseId);
        if (req.release) {
          // given back: the agent idle as it says, never handed the same task straight back
          const released = await releaseIn(ctx, tx, emit, t, "given back by its agent");
          if (req.agentIdle) await markAgent(tx, emit, agent.id, "busy", "idle");
          return { updated: released, next: undefined, outcome: "released" as const };
        }
        const result = {
          output: req.result?.output ?? "",
          exitCode: req.result?.exitCode,
          error: req.result?.error || "failed",
          ...usageOf(req.result?.usage),
          ...workspaceOf(req.result?.workspace),
          ...denialsOf(req.result?.denials),
        };
        const requeue = req.retryable && t.attempts < t.maxAttempts;
        const updated = await tx.updateTask(
          t.id,
          requeue
            ? { status: "queued", claimedBy: "", leaseExpiresMs: null, result, updatedAt: now() }
            : { status: "failed", result, leaseExpiresMs: null, updatedAt: now() },
          { status: HELD, claimedBy: req.agentId, leaseId: t.leaseId },
        );
        if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed while failing`);
        taskEvent(emit, updated, requeue ? "task.requeued" : "task.failed", {
          reason: result.error,
          ...usageEvent(result.usage),
          ...denialsEvent(result.denials),
        });
        if (!requeue) await settleDependents(tx, emit, updated, updated.updatedAt);
        await settleBroadcast(tx, emit, updated.parentTaskId);
        return {
          updated,
          next: await afterOutcome(tx, emit, caller, agent, req),
          outcome: requeue ? ("requeued" as const) : ("failed" as const),
        };
      });
      deps.meter?.reported(updated, outcome, clock.now());
      sendNext(ctx, agent, next);
      return create(pb.FailTaskResponseSchema, { task: taskMsg(updated) });
    },

    async reportProgress(caller: Caller, req: pb.ReportProgressRequest): Promise<pb.ReportProgressResponse> {
      await mustActingAgent(caller, req.agentId);
      if (req.frames.length > 500) throw invalidField("frames", "at most 500 frames per call");
      const kinds = frameWords(req.frames);
      const leaseId = leaseOf(req.leaseId);
      await commit(deps, async (tx, emit) => {
        const t = await mustHeld(tx, req.taskId, req.agentId, leaseId);
        const at = {
          type: "progress",
          name: "task.progress",
          domainId: t.domainId,
          missionId: t.missionId,
          agentId: req.agentId,
          taskId: t.id,
          status: t.status,
        } as const;
        for (const [i, f] of req.frames.entries())
          emit({
            ...at,
            payload: { task_id: t.id, kind: kinds[i], text: f.text, ...(f.data ? { data: f.data } : {}) },
          });
      });
      return create(pb.ReportProgressResponseSchema, {});
    },

    /** Requeues (or fails, past max_attempts) tasks whose lease expired. Returns how many. */
  };
}
