// What the work services share: the store and clock, the caches, and the lookups and state
// changes both the catalog (domains, missions, tasks) and the claim loop use.
import { randomFillSync } from "node:crypto";
import { iso } from "../../../common/clock.js";
import { EpError, invalidField } from "../../../common/errors.js";
import type { Store, TaskRow } from "../../store/store.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { commit, type Emit } from "../event-hub.js";
import { FINAL, HELD, immutableCache, taskEvent, type ActingAgent } from "./support.js";
import type { Handoff } from "./types.js";
import { settleDependents } from "./dependencies.js";

export type WorkContext = ReturnType<typeof createWorkContext>;

export function createWorkContext(deps: Deps) {
  const { store, clock, limits } = deps;
  const now = () => iso(clock.now());
  // Every claim, heartbeat and completion names its agent, every submit its mission: one
  // statement each saved on the hot path (a round trip on PostgreSQL).
  const agents = immutableCache<ActingAgent>(clock);
  const missions = immutableCache<{ id: string; domainId: string }>(clock);

  /** A mission's id and domain (what creating a task needs), from the cache when it can. */
  async function missionDomain(s: Store, id: string): Promise<{ id: string; domainId: string }> {
    const hit = id ? missions.get(id) : undefined;
    if (hit) return hit;
    const m = await mustMission(s, id);
    const value = { id: m.id, domainId: m.domainId };
    missions.set(id, value);
    return value;
  }

  /** The agent a work-loop call acts for; a node may act only for its own agents. */
  async function mustActingAgent(caller: Caller, agentId: string): Promise<ActingAgent> {
    if (!agentId) throw invalidField("agent_id", "is required");
    let agent = agents.get(agentId);
    if (!agent) {
      const row = await store.getAgent(agentId);
      if (!row) throw new EpError("agent_not_found", `agent ${agentId} does not exist`);
      agent = {
        id: row.id,
        domainId: row.domainId,
        nodeId: row.nodeId,
        runtime: row.runtime,
        capabilities: row.capabilities,
      };
      agents.set(agentId, agent);
    }
    authorize(caller, "work", { domainId: agent.domainId });
    if (caller.role === "node" && agent.nodeId !== caller.nodeId) {
      throw new EpError("forbidden", `agent ${agentId} runs on another node`);
    }
    return agent;
  }

  /** Recomputes a broadcast task from its runs: succeeded when all succeed, failed if any fails. */
  async function settleBroadcast(tx: Store, emit: Emit, parentId: string): Promise<void> {
    if (!parentId) return;
    const parent = await tx.getTask(parentId);
    if (!parent) return;
    const runs = await tx.listTasks({ parentTaskId: parentId });
    let status = "queued";
    if (runs.some((r) => r.status === "failed")) status = "failed";
    else if (runs.length && runs.every((r) => r.status === "succeeded")) status = "succeeded";
    else if (runs.length && runs.every((r) => FINAL.includes(r.status))) status = "cancelled";
    else if (runs.length && runs.every((r) => r.status === "waiting")) status = "waiting";
    else if (runs.some((r) => r.status !== "queued")) status = "running";
    if (status === parent.status) return;
    const result =
      status === "failed" || status === "succeeded"
        ? {
            output: "",
            error:
              status === "failed"
                ? `runs failed: ${runs
                    .filter((r) => r.status === "failed")
                    .map((r) => r.id)
                    .join(", ")}`
                : "",
          }
        : null;
    const updated = await tx.updateTask(parentId, { status, result, updatedAt: now() });
    if (!updated) return;
    taskEvent(emit, updated, `task.${status}`);
    if (FINAL.includes(status)) await settleDependents(tx, emit, updated, now());
  }

  async function requeueOrFail(tx: Store, emit: Emit, t: TaskRow, reason: string): Promise<TaskRow | undefined> {
    const exhausted = t.attempts >= t.maxAttempts;
    const updated = await tx.updateTask(
      t.id,
      exhausted
        ? {
            status: "failed",
            claimedBy: "",
            leaseExpiresMs: null,
            result: { output: t.result?.output ?? "", error: `${reason} (attempt ${t.attempts} of ${t.maxAttempts})` },
            updatedAt: now(),
          }
        : { status: "queued", claimedBy: "", leaseExpiresMs: null, updatedAt: now() },
      { status: HELD, claimedBy: t.claimedBy, attempts: t.attempts },
    );
    if (updated) {
      taskEvent(emit, updated, exhausted ? "task.failed" : "task.requeued", { reason });
      if (exhausted) await settleDependents(tx, emit, updated, now());
      await settleBroadcast(tx, emit, updated.parentTaskId);
    }
    return updated;
  }

  async function claimOnce(agent: ActingAgent, start = false, onlyIfIdle = false): Promise<TaskRow | undefined> {
    const t = await commit(deps, (tx, emit) => claimIn(tx, emit, agent, start, onlyIfIdle));
    if (t) deps.meter?.claimed(t, clock.now());
    return t;
  }

  /**
   * The agent's next task claimed in the caller's commit (with its events), or undefined. With
   * `onlyIfIdle` (and `start`) an agent that is not idle any more claims nothing: AgentNotIdle is
   * thrown, which rolls the commit back.
   */
  async function claimIn(
    tx: Store,
    emit: Emit,
    agent: ActingAgent,
    start: boolean,
    onlyIfIdle = false,
    /** the caller moved the agent idle → busy itself (claimForNew) */
    marked = false,
  ): Promise<TaskRow | undefined> {
    const t = await tx.claimTask(
      {
        agentId: agent.id,
        domainId: agent.domainId,
        runtime: agent.runtime,
        capabilities: agent.capabilities,
        start,
        leaseId: newLeaseId(),
      },
      clock.now(),
      limits.leaseMs,
    );
    if (t) {
      // a claim that is also the start says both, in order, as the two calls would have, and
      // the agent is busy from now on
      taskEvent(emit, start ? { ...t, status: "claimed" } : t, "task.claimed");
      if (start) {
        taskEvent(emit, t, "task.running");
        if (!marked && !(await markAgent(tx, emit, agent.id, "idle", "busy", now())) && onlyIfIdle)
          throw new AgentNotIdle(agent.id);
      }
      if (t.parentTaskId) await settleBroadcast(tx, emit, t.parentTaskId);
    }
    return t;
  }

  /**
   * Loads a task the agent holds, under `leaseId` when one is given; distinguishes finished,
   * expired and taken leases, and a claim that is not the task's current one.
   */
  async function mustHeld(tx: Store, taskId: string, agentId: string, leaseId = ""): Promise<TaskRow> {
    const t = await mustTask(tx, taskId);
    if (t.kind !== "claimable")
      throw new EpError("task_wrong_kind", `task ${taskId} is a Kanban task; the claim loop does not apply`);
    if (leaseId && t.leaseId !== leaseId) {
      throw new EpError(
        "lease_not_held",
        `lease ${leaseId} is not task ${taskId}'s current claim (the task was claimed again, or never under it)`,
        { status: t.status },
      );
    }
    if (FINAL.includes(t.status))
      throw new EpError("task_finished", `task ${taskId} is already ${t.status}`, { status: t.status });
    if (!HELD.includes(t.status) || t.claimedBy !== agentId) {
      throw new EpError(
        "lease_not_held",
        `agent ${agentId} does not hold the lease on task ${taskId} (status ${t.status})`,
        { status: t.status },
      );
    }
    // a call naming the current lease holds it until the sweep has requeued the task: past its
    // time, nobody else can have it yet (the fencing token says whose it is)
    if (!leaseId && t.leaseExpiresMs !== null && t.leaseExpiresMs <= clock.now()) {
      throw new EpError("lease_expired", `the lease on task ${taskId} expired; it goes back to the queue`);
    }
    return t;
  }

  const ctx = {
    deps,
    store,
    clock,
    limits,
    now,
    agents,
    missions,
    mustDomain,
    mustMission,
    mustTask,
    missionDomain,
    mustActingAgent,
    settleBroadcast,
    requeueOrFail,
    claimOnce,
    claimIn,
    mustHeld,
    markAgent: (tx: Store, emit: Emit, agentId: string, from: string, to: string) =>
      markAgent(tx, emit, agentId, from, to, now()),
    handoff: undefined as Handoff | undefined,
  };
  return ctx;
}

async function mustDomain(s: Store, id: string) {
  if (!id) throw invalidField("domain_id", "is required");
  const d = await s.getDomain(id);
  if (!d) throw new EpError("domain_not_found", `domain ${id} does not exist`);
  return d;
}

async function mustMission(s: Store, id: string) {
  if (!id) throw invalidField("mission_id", "is required");
  const m = await s.getMission(id);
  if (!m) throw new EpError("mission_not_found", `mission ${id} does not exist`);
  return m;
}

async function mustTask(s: Store, id: string) {
  if (!id) throw invalidField("task_id", "is required");
  const t = await s.getTask(id);
  if (!t) throw new EpError("task_not_found", `task ${id} does not exist`);
  return t;
}

/**
 * A fresh lease id: what tells one claim of a task from every other. 96 random bits, cut from a
 * pool filled 128 ids at a time: one randomFillSync per claim cost ~25 µs of the tower's CPU per
 * task (docs/perf-history.md, "Delivery cost").
 */
export function newLeaseId(): string {
  if (leasePoolAt === LEASE_POOL.length) {
    randomFillSync(LEASE_POOL);
    leasePoolAt = 0;
  }
  const id = `ls_${LEASE_POOL.toString("base64url", leasePoolAt, leasePoolAt + 12)}`;
  leasePoolAt += 12;
  return id;
}
const LEASE_POOL = Buffer.alloc(12 * 128);
let leasePoolAt = LEASE_POOL.length;

/** The lease id a call names, checked for shape (empty: the call names none). */
export function leaseOf(leaseId: string): string {
  if (leaseId.length > 64 || /[^A-Za-z0-9_-]/.test(leaseId))
    throw invalidField("lease_id", "is not a lease id (at most 64 letters, digits, _ or -)");
  return leaseId;
}

/** A claim for an agent the tower believed idle found it busy (or paused, offline…): nothing was claimed. */
export class AgentNotIdle extends Error {
  constructor(agentId: string) {
    super(`agent ${agentId} is not idle`);
    this.name = "AgentNotIdle";
  }
}

/**
 * Moves an agent from one state to another in the caller's commit (a claim that starts: idle →
 * busy; an outcome sent with agent_idle: busy → idle), with the agent.state event
 * UpdateAgentState emits. An agent in any other state (paused, restarting, …) is left as it is:
 * false then.
 */
async function markAgent(
  tx: Store,
  emit: Emit,
  agentId: string,
  from: string,
  to: string,
  at: string,
): Promise<boolean> {
  const a = await tx.moveAgentState(agentId, from, to, at);
  if (!a) return false;
  agentStateEvent(emit, a.domainId, agentId, from, to);
  return true;
}

/** The agent.state event of a move markAgent() made (or a caller made with tx.moveAgentState). */
export function agentStateEvent(emit: Emit, domainId: string, agentId: string, from: string, to: string): void {
  emit({
    type: "matrix",
    name: "agent.state",
    domainId,
    agentId,
    status: to,
    payload: { agent_id: agentId, from, to, reason: "epd" },
  });
}
