// Work the tower hands to a node itself: for an agent it knows to be idle on a node whose link
// takes tasks (LinkRequest.take_tasks), it claims and starts the next task and sends it with the
// wake-up (fleet-links.ts), so the daemon needs no ClaimTask of its own. A task that cannot be
// handed over goes back to the queue without counting an attempt (docs/daemon.md, "Pushed work").
import { EpError } from "../../common/errors.js";
import type { Store, TaskRow } from "../store/store.js";
import { commit, type Emit } from "./event-hub.js";
import type { WorkContext } from "./work-context.js";
import { HELD, taskEvent, type ActingAgent } from "./work-support.js";

/** A held task back to the queue as if never claimed: the attempt is not counted. */
export async function releaseIn(ctx: WorkContext, tx: Store, emit: Emit, t: TaskRow, reason: string): Promise<TaskRow> {
  const updated = await tx.updateTask(
    t.id,
    { status: "queued", claimedBy: "", leaseExpiresMs: null, attempts: Math.max(0, t.attempts - 1), updatedAt: ctx.now() },
    { status: HELD, claimedBy: t.claimedBy, attempts: t.attempts },
  );
  if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed while being given back`);
  taskEvent(emit, updated, "task.requeued", { reason });
  await ctx.settleBroadcast(tx, emit, updated.parentTaskId);
  return updated;
}

/**
 * ClaimTask with resume: the oldest task the agent still holds with a live lease, its lease renewed
 * (and started, with `start`), as if claimed now; any other it holds goes back uncounted. Undefined
 * when it holds none (the claim then looks in the queue). For a daemon that lost a claim's answer
 * or a pushed task: nothing in the queue is touched, no attempt is counted.
 */
export async function resumeIn(ctx: WorkContext, tx: Store, emit: Emit, agent: ActingAgent, start: boolean): Promise<TaskRow | undefined> {
  const nowMs = ctx.clock.now();
  // in the agent's domain, the one its caller was just authorized for
  const held = (await tx.listTasks({ claimedBy: agent.id, domainId: agent.domainId, held: true, kind: "claimable" })).filter((t) => t.leaseExpiresMs === null || t.leaseExpiresMs > nowMs);
  if (!held.length) return undefined;
  for (const extra of held.slice(1)) await releaseIn(ctx, tx, emit, extra, "its agent took up another task it held");
  const t = held[0]!;
  const starting = start && t.status === "claimed";
  const updated = await tx.updateTask(
    t.id,
    { leaseExpiresMs: nowMs + ctx.limits.leaseMs, ...(starting ? { status: "running", updatedAt: ctx.now() } : {}) },
    { status: [t.status], claimedBy: agent.id, attempts: t.attempts },
  );
  if (!updated) return undefined;
  if (starting) taskEvent(emit, updated, "task.running");
  if (start) await ctx.markAgent(tx, emit, agent.id, "idle", "busy");
  return updated;
}

export function createWorkPush(ctx: WorkContext) {
  return {
    /**
     * Claims and starts the agent's next task for it (the tower pushing work over a node's link),
     * only while the agent is idle: a claim of its node's own that won the race (the agent is busy
     * now) makes this one claim nothing and throw AgentNotIdle, rather than send a task the node
     * would give back.
     */
    claimStarted: (agent: ActingAgent): Promise<TaskRow | undefined> => ctx.claimOnce(agent, true, true),

    /**
     * Gives back a task the tower claimed for an agent but could not hand over (its link went
     * away): queued again, the attempt not counted, the agent idle again.
     */
    async releaseClaimed(agent: ActingAgent, taskId: string): Promise<void> {
      await commit(ctx.deps, async (tx, emit) => {
        const t = await tx.getTask(taskId);
        if (!t || !HELD.includes(t.status) || t.claimedBy !== agent.id) return;
        await releaseIn(ctx, tx, emit, t, "not delivered to its node");
        await ctx.markAgent(tx, emit, agent.id, "busy", "idle");
      });
    },
  };
}
