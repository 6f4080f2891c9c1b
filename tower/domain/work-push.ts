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

export function createWorkPush(ctx: WorkContext) {
  return {
    /** Claims and starts the agent's next task for it (the tower pushing work over a node's link). */
    claimStarted: (agent: ActingAgent): Promise<TaskRow | undefined> => ctx.claimOnce(agent, true),

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
