// Work the tower hands to a node: for an agent it knows to be idle on a linked node, it claims and
// starts the next task and sends it over the link (fleet-push.ts), its lease in the task. This is
// the one way work reaches a node (docs/daemon.md, "How work reaches a node"). A task that cannot
// be handed over goes back to the queue without counting an attempt.
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
    { status: HELD, claimedBy: t.claimedBy, leaseId: t.leaseId },
  );
  if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed while being given back`);
  taskEvent(emit, updated, "task.requeued", { reason });
  await ctx.settleBroadcast(tx, emit, updated.parentTaskId);
  return updated;
}

export function createWorkPush(ctx: WorkContext) {
  return {
    /**
     * Claims and starts the agent's next task for it, only while the agent is idle: one that is not
     * (an outcome or a claim of its own made it busy meanwhile) claims nothing and throws AgentNotIdle.
     */
    claimStarted: (agent: ActingAgent): Promise<TaskRow | undefined> => ctx.claimOnce(agent, true, true),

    /** Gives back a task claimed for an agent but not handed over (its link went away): queued again, uncounted, the agent idle again. */
    async releaseClaimed(agent: ActingAgent, taskId: string): Promise<void> {
      await commit(ctx.deps, async (tx, emit) => {
        const t = await tx.getTask(taskId);
        if (!t || !HELD.includes(t.status) || t.claimedBy !== agent.id) return;
        await releaseIn(ctx, tx, emit, t, "not delivered to its node");
        await ctx.markAgent(tx, emit, agent.id, "busy", "idle");
      });
    },

    /**
     * A link opened: the node's agents as its daemon has them. A task an agent holds under a lease
     * the daemon does not name was handed over and lost with the last link (the daemon never ran
     * it): back to the queue, uncounted. Each agent is then idle or busy as the daemon says (an
     * agent in another state — paused, restarting — is left as it is).
     */
    async reconcile(nodeId: string, agents: readonly { agentId: string; leaseIds: readonly string[]; idle: boolean }[]): Promise<void> {
      if (!agents.length) return;
      await commit(ctx.deps, async (tx, emit) => {
        for (const a of agents) {
          const row = await tx.getAgent(a.agentId);
          if (!row || row.nodeId !== nodeId) continue;
          const known = new Set(a.leaseIds);
          for (const t of await tx.listTasks({ claimedBy: row.id, held: true, kind: "claimable" })) {
            if (!known.has(t.leaseId)) await releaseIn(ctx, tx, emit, t, "handed to its node and lost with the link");
          }
          const to = a.idle ? "idle" : "busy";
          if (row.state === to || !["idle", "busy", "offline", "starting"].includes(row.state)) continue;
          await ctx.markAgent(tx, emit, row.id, row.state, to);
        }
      });
    },
  };
}
