// Work the tower hands to a node: for an agent it knows to be idle on a linked node, it claims and
// starts the next task and sends it over the link (fleet-push.ts), its lease in the task. This is
// the one way work reaches a node (docs/daemon.md, "How work reaches a node"). A task that cannot
// be handed over goes back to the queue without counting an attempt.
import { EpError } from "../../../common/errors.js";
import type { Store, TaskRow } from "../../store/store.js";
import type { Caller } from "../caller.js";
import { taskMsg } from "../convert.js";
import { commit, type Emit } from "../event-hub.js";
import { agentStateEvent, type WorkContext } from "./context.js";
import { HELD, taskEvent, type ActingAgent } from "./support.js";
import type { ClaimedTask, Handoff } from "./types.js";

/**
 * The task's parents, in depends_on order, read in the claim's commit (by primary key, O(parents)),
 * so the assignment carries them and the daemon reads none of them itself (one GetTask per parent
 * was most of what a chained task cost the tower more than an independent one: docs/perf-history.md,
 * "Pipelines").
 */
async function withParents(tx: Store, t: TaskRow | undefined, known?: TaskRow): Promise<ClaimedTask | undefined> {
  if (!t?.dependsOn.length) return t;
  const parents: TaskRow[] = [];
  for (const id of t.dependsOn) {
    // `known`: a row this commit wrote (the outcome that queued the child), not read again
    const p = known?.id === id ? known : await tx.getTask(id);
    if (p) parents.push(p);
  }
  return { ...t, parents };
}

/** The link's assignment of a claimed task to its agent: the task and its parents. */
export const assignment = (agentId: string, t: ClaimedTask) => ({
  agentId,
  task: taskMsg(t),
  parents: (t.parents ?? []).map((p) => taskMsg(p)),
});

/** A held task back to the queue as if never claimed: the attempt is not counted. */
export async function releaseIn(ctx: WorkContext, tx: Store, emit: Emit, t: TaskRow, reason: string): Promise<TaskRow> {
  const updated = await tx.updateTask(
    t.id,
    {
      status: "queued",
      claimedBy: "",
      leaseExpiresMs: null,
      attempts: Math.max(0, t.attempts - 1),
      updatedAt: ctx.now(),
    },
    { status: HELD, claimedBy: t.claimedBy, leaseId: t.leaseId },
  );
  if (!updated) throw new EpError("lease_not_held", `task ${t.id} changed while being given back`);
  taskEvent(emit, updated, "task.requeued", { reason });
  await ctx.settleBroadcast(tx, emit, updated.parentTaskId);
  return updated;
}

/**
 * A task claimed for an agent but not handed over (its link went away): queued again, uncounted, the agent idle again.
 */
async function releaseClaimed(ctx: WorkContext, agent: ActingAgent, taskId: string): Promise<void> {
  await commit(ctx.deps, async (tx, emit) => {
    const t = await tx.getTask(taskId);
    if (!t || !HELD.includes(t.status) || t.claimedBy !== agent.id) return;
    await releaseIn(ctx, tx, emit, t, "not delivered to its node");
    await ctx.markAgent(tx, emit, agent.id, "busy", "idle");
  });
}

/**
 * After an outcome that says its agent is idle, in the outcome's commit: the agent's next task,
 * claimed and started for it when its node is linked here (Handoff), else the agent idle. The
 * task comes back to be sent with sendNext() once the commit is done. `settled`: the task whose
 * outcome this is, as the commit wrote it.
 */
export async function nextAfterOutcome(
  ctx: WorkContext,
  tx: Store,
  emit: Emit,
  caller: Caller,
  agent: ActingAgent,
  settled?: TaskRow,
): Promise<ClaimedTask | undefined> {
  // only the node's own outcome: a script completing for an agent does not claim for its node
  const mark = caller.role === "node" ? ctx.handoff?.mark(agent) : undefined;
  const next = mark === undefined ? undefined : await ctx.claimIn(tx, emit, agent, true);
  if (next) return withParents(tx, next, settled);
  if (mark !== undefined) ctx.handoff!.lookedEmpty(agent.id, mark);
  await ctx.markAgent(tx, emit, agent.id, "busy", "idle");
  return undefined;
}

/**
 * A task the caller's commit creates, claimed and started in that commit for an idle agent of a node linked here that
 * can take it (Handoff.pick): the agent and the task to send with sendNext() once committed, or undefined (no such
 * agent, or the task is not for the first claimer: its offer is then made from its event, fleet/push.ts). One commit
 * where the offer would have taken a second; the claim is the one the offer makes (the domain's order, the agent idle
 * the longest), so it may take an older or higher-priority task than this one.
 */
export async function claimForNew(
  ctx: WorkContext,
  tx: Store,
  emit: Emit,
  t: TaskRow,
): Promise<{ agent: ActingAgent; next: ClaimedTask } | undefined> {
  if (t.status !== "queued" || t.kind !== "claimable" || t.claimPolicy !== "first_claim" || !ctx.handoff) return;
  const agent = ctx.handoff.pick(t.domainId, t.runtime, t.capabilities);
  if (!agent) return;
  // the agent busy first: one that is not idle any more (its own claim, elsewhere) is left alone, and the create
  // commits without a claim; its agent.state event is said after the task's, as claimIn() orders them
  try {
    if (!(await tx.moveAgentState(agent.id, "idle", "busy", ctx.now()))) return void ctx.handoff.unpick(agent.id, true);
    const next = await ctx.claimIn(tx, emit, agent, true, false, true);
    if (!next) {
      await tx.moveAgentState(agent.id, "busy", "idle", ctx.now());
      return void ctx.handoff.unpick(agent.id);
    }
    agentStateEvent(emit, agent.domainId, agent.id, "idle", "busy");
    return { agent, next: (await withParents(tx, next)) ?? next };
  } catch (err) {
    ctx.handoff.unpick(agent.id); // the commit rolls back: the agent is as it was
    throw err;
  }
}

/** The task nextAfterOutcome() claimed, on the agent's link; back to the queue when the link went away meanwhile. */
export function sendNext(ctx: WorkContext, agent: ActingAgent, next: ClaimedTask | undefined): void {
  if (!next) return;
  // counted once on its way: one not delivered goes back to the queue uncounted
  if (ctx.handoff?.send(agent, next)) return void ctx.deps.meter?.claimed(next, ctx.clock.now());
  void releaseClaimed(ctx, agent, next.id).catch((err: Error) =>
    ctx.deps.log.warn("a task claimed for a node that went away could not be given back (its lease expires)", {
      task_id: next.id,
      error: err.message,
    }),
  );
}

export function createWorkPush(ctx: WorkContext) {
  return {
    /** The fleet's way to the links this replica holds (fleet-links.ts); unset, outcomes claim nothing. */
    setHandoff(h: Handoff): void {
      ctx.handoff = h;
    },

    /**
     * Claims and starts the agent's next task for it, only while the agent is idle: one that is not
     * (an outcome or a claim of its own made it busy meanwhile) claims nothing and throws AgentNotIdle.
     */
    async claimStarted(agent: ActingAgent): Promise<ClaimedTask | undefined> {
      const t = await commit(ctx.deps, async (tx, emit) =>
        withParents(tx, await ctx.claimIn(tx, emit, agent, true, true)),
      );
      if (t) ctx.deps.meter?.claimed(t, ctx.clock.now());
      return t;
    },

    /**
     * Gives back a task claimed for an agent but not handed over (its link went away): queued again, uncounted, the
     * agent idle again.
     */
    releaseClaimed: (agent: ActingAgent, taskId: string): Promise<void> => releaseClaimed(ctx, agent, taskId),

    /**
     * A link opened: the node's agents as its daemon has them. A task an agent holds under a lease
     * the daemon does not name was handed over and lost with the last link (the daemon never ran
     * it): back to the queue, uncounted. Each agent is then idle or busy as the daemon says (an
     * agent in another state — paused, restarting — is left as it is).
     */
    async reconcile(
      nodeId: string,
      agents: readonly { agentId: string; leaseIds: readonly string[]; idle: boolean }[],
    ): Promise<void> {
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
