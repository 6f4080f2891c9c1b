// The work API: domains, missions, Kanban tasks (kind=assigned) and claimable tasks
// with leases (kind=claimable). Plain functions over the store; every edge calls these.
import { RUNTIME_KINDS } from "../../common/runtimes.js";
import { create } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { iso } from "../../common/clock.js";
import { EpError, invalidField } from "../../common/errors.js";
import { newId } from "../../common/ids.js";
import * as pb from "../../gen/ep/tower/v1/work_pb.js";
import type { AgentRow, Store, TaskRow, UsageRow } from "../store/store.js";
import { authorize, scopeDomains, type Caller } from "./caller.js";
import { domainMsg, missionMsg, taskMsg, usageMsg } from "./convert.js";
import type { TaskResult } from "../../gen/ep/tower/v1/resources_pb.js";
import type { Deps } from "./deps.js";
import { commit, type Emit } from "./event-hub.js";

export const CLAIM_POLICIES = ["first_claim", "assigned", "broadcast"] as const;
export const CLAIMABLE_STATES = ["queued", "claimed", "running", "succeeded", "failed", "cancelled"] as const;
export const KANBAN_STATES = ["todo", "in_progress", "blocked", "review", "done"] as const;
export const RUNTIMES = RUNTIME_KINDS;
const FINAL = ["succeeded", "failed", "cancelled"];
const HELD = ["claimed", "running"];
const MAX_TEXT = 100_000;
/**
 * How long the work path reuses what it read of an agent or a mission. It keeps only what
 * never changes once written (an agent's domain, node, runtime and capabilities; a
 * mission's domain), so the expiry only bounds staleness should that ever change.
 */
export const WORK_CACHE_MS = 10_000;
const WORK_CACHE_MAX = 10_000;

/** The fields of an agent the claim loop acts on; fixed at enrollment. */
type ActingAgent = Pick<AgentRow, "id" | "domainId" | "nodeId" | "runtime" | "capabilities">;

/** A small read-through cache of immutable rows, with expiry on the injected clock. */
function immutableCache<T>(clock: { now(): number }) {
  const entries = new Map<string, { value: T; untilMs: number }>();
  return {
    get(id: string): T | undefined {
      const e = entries.get(id);
      if (!e) return undefined;
      if (e.untilMs > clock.now()) return e.value;
      entries.delete(id);
      return undefined;
    },
    set(id: string, value: T): void {
      if (entries.size >= WORK_CACHE_MAX) entries.clear();
      entries.set(id, { value, untilMs: clock.now() + WORK_CACHE_MS });
    },
  };
}

function text(field: string, value: string, { required = false, max = 500 } = {}): string {
  const v = value.trim();
  if (required && !v) throw invalidField(field, "is required");
  if (v.length > max) throw invalidField(field, `is longer than ${max} characters`);
  return v;
}

function oneOf<T extends string>(field: string, value: string, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) throw invalidField(field, `must be one of ${allowed.join(", ")} (got ${JSON.stringify(value)})`);
  return value as T;
}

function taskEvent(emit: Emit, t: TaskRow, name: string, extra: JsonObject = {}): void {
  emit({
    type: "matrix",
    name,
    domainId: t.domainId,
    missionId: t.missionId,
    agentId: t.claimedBy || t.assigneeAgentId,
    taskId: t.id,
    status: t.status,
    payload: {
      task_id: t.id,
      kind: t.kind,
      title: t.title,
      status: t.status,
      attempts: t.attempts,
      claimed_by: t.claimedBy,
      ...(t.parentTaskId ? { parent_task_id: t.parentTaskId } : {}),
      // what a claimer needs, so a node wakes one agent that can take it (fleet task_ready)
      ...(t.status === "queued" ? { runtime: t.runtime, capabilities: t.capabilities, claim_policy: t.claimPolicy } : {}),
      ...extra,
    },
  });
}

/** An assignment is a message to the agent: it goes to the agent's inbox (SPEC §5). */
function assignmentEvent(emit: Emit, t: TaskRow): void {
  if (!t.assigneeAgentId) return;
  emit({
    type: "inbox",
    name: "task.assigned",
    domainId: t.domainId,
    missionId: t.missionId,
    agentId: t.assigneeAgentId,
    taskId: t.id,
    status: t.status,
    payload: { task_id: t.id, kind: t.kind, title: t.title, agent_id: t.assigneeAgentId, ...(t.parentTaskId ? { parent_task_id: t.parentTaskId } : {}) },
  });
}

/** The usage a runtime reported, as stored in a task's result (none: no field). */
function usageOf(u: TaskResult["usage"] | undefined): { usage?: UsageRow } {
  if (!u) return {};
  const n = (v: bigint | number) => Math.max(0, Number(v));
  return { usage: { inputTokens: n(u.inputTokens), outputTokens: n(u.outputTokens), cachedInputTokens: n(u.cachedInputTokens), costUsd: Math.max(0, u.costUsd || 0), model: u.model.slice(0, 200) } };
}

/** The usage in a task event's payload (snake_case, as events are). */
function usageEvent(u: UsageRow | undefined): JsonObject {
  return u ? { usage: { input_tokens: u.inputTokens, output_tokens: u.outputTokens, cached_input_tokens: u.cachedInputTokens, cost_usd: u.costUsd, model: u.model } } : {};
}

/** The sum of the usage of tasks (a mission's total). */
export function sumUsage(rows: readonly { result: { usage?: UsageRow } | null }[]): UsageRow | undefined {
  let total: UsageRow | undefined;
  for (const r of rows) {
    const u = r.result?.usage;
    if (!u) continue;
    total ??= { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, costUsd: 0, model: "" };
    total.inputTokens += u.inputTokens;
    total.outputTokens += u.outputTokens;
    total.cachedInputTokens += u.cachedInputTokens;
    total.costUsd = Math.round((total.costUsd + u.costUsd) * 1e6) / 1e6;
  }
  return total;
}

/** The same sum split by the agent that ran each task (its last claimant), most expensive first. */
export function usageByAgent(rows: readonly { claimedBy: string; result: { usage?: UsageRow } | null }[]): { agentId: string; usage: UsageRow }[] {
  const byAgent = new Map<string, { claimedBy: string; result: { usage?: UsageRow } | null }[]>();
  for (const r of rows) {
    if (!r.result?.usage || !r.claimedBy) continue;
    const list = byAgent.get(r.claimedBy) ?? [];
    list.push(r);
    byAgent.set(r.claimedBy, list);
  }
  return [...byAgent]
    .map(([agentId, list]) => ({ agentId, usage: sumUsage(list)! }))
    .sort((a, b) => b.usage.costUsd - a.usage.costUsd || b.usage.outputTokens - a.usage.outputTokens || a.agentId.localeCompare(b.agentId));
}

function covers(agent: AgentRow, t: { capabilities: string[]; runtime: string }): boolean {
  return (!t.runtime || t.runtime === agent.runtime) && t.capabilities.every((c) => agent.capabilities.includes(c));
}

export type WorkService = ReturnType<typeof createWorkService>;

export function createWorkService(deps: Deps) {
  const { store, clock, limits } = deps;
  const now = () => iso(clock.now());
  // Every claim, heartbeat and completion names its agent, every submit its mission: one
  // statement each saved on the hot path (a round trip on PostgreSQL).
  const agents = immutableCache<ActingAgent>(clock);
  const missions = immutableCache<{ id: string; domainId: string }>(clock);

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
      agent = { id: row.id, domainId: row.domainId, nodeId: row.nodeId, runtime: row.runtime, capabilities: row.capabilities };
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
    else if (runs.some((r) => r.status !== "queued")) status = "running";
    if (status === parent.status) return;
    const result =
      status === "failed" || status === "succeeded"
        ? {
            output: "",
            error: status === "failed" ? `runs failed: ${runs.filter((r) => r.status === "failed").map((r) => r.id).join(", ")}` : "",
          }
        : null;
    const updated = await tx.updateTask(parentId, { status, result, updatedAt: now() });
    if (updated) taskEvent(emit, updated, `task.${status}`);
  }

  async function requeueOrFail(tx: Store, emit: Emit, t: TaskRow, reason: string): Promise<TaskRow | undefined> {
    const exhausted = t.attempts >= t.maxAttempts;
    const updated = await tx.updateTask(
      t.id,
      exhausted
        ? { status: "failed", claimedBy: "", leaseExpiresMs: null, result: { output: t.result?.output ?? "", error: `${reason} (attempt ${t.attempts} of ${t.maxAttempts})` }, updatedAt: now() }
        : { status: "queued", claimedBy: "", leaseExpiresMs: null, updatedAt: now() },
      { status: HELD, claimedBy: t.claimedBy, attempts: t.attempts },
    );
    if (updated) {
      taskEvent(emit, updated, exhausted ? "task.failed" : "task.requeued", { reason });
      await settleBroadcast(tx, emit, updated.parentTaskId);
    }
    return updated;
  }

  async function claimOnce(agent: ActingAgent): Promise<TaskRow | undefined> {
    return commit(deps, async (tx, emit) => {
      const t = await tx.claimTask(
        { agentId: agent.id, domainId: agent.domainId, runtime: agent.runtime, capabilities: agent.capabilities },
        clock.now(),
        limits.leaseMs,
      );
      if (t) {
        taskEvent(emit, t, "task.claimed");
        if (t.parentTaskId) await settleBroadcast(tx, emit, t.parentTaskId);
      }
      return t;
    });
  }

  /** Loads a task the agent holds; distinguishes finished, expired and taken leases. */
  async function mustHeld(tx: Store, taskId: string, agentId: string): Promise<TaskRow> {
    const t = await mustTask(tx, taskId);
    if (t.kind !== "claimable") throw new EpError("task_wrong_kind", `task ${taskId} is a Kanban task; the claim loop does not apply`);
    if (FINAL.includes(t.status)) throw new EpError("task_finished", `task ${taskId} is already ${t.status}`, { status: t.status });
    if (!HELD.includes(t.status) || t.claimedBy !== agentId) {
      throw new EpError("lease_not_held", `agent ${agentId} does not hold the lease on task ${taskId} (status ${t.status})`, { status: t.status });
    }
    if (t.leaseExpiresMs !== null && t.leaseExpiresMs <= clock.now()) {
      throw new EpError("lease_expired", `the lease on task ${taskId} expired; it goes back to the queue`);
    }
    return t;
  }

  return {
    /** Releases long-polling claimers (they answer "no task") so shutdown never waits on them. */
    close() {
      closed = true;
      unsubscribe();
      for (const set of waiters.values()) for (const wake of set) wake();
      waiters.clear();
    },

    // ---- domains

    async createDomain(caller: Caller, req: pb.CreateDomainRequest): Promise<pb.CreateDomainResponse> {
      authorize(caller, "operate");
      if (caller.role === "agent") throw new EpError("forbidden", "agents cannot create domains");
      const name = text("name", req.name, { required: true, max: 200 });
      return commit(deps, async (tx, emit) => {
        if (await tx.getDomainByName(name)) throw new EpError("already_exists", `a domain named ${JSON.stringify(name)} exists already`);
        const row = { id: newId("dom", clock.now()), name, createdAt: now() };
        await tx.insertDomain(row);
        emit({ type: "matrix", name: "domain.created", domainId: row.id, payload: { domain_id: row.id, name } });
        return create(pb.CreateDomainResponseSchema, { domain: domainMsg(row) });
      });
    },

    async listDomains(caller: Caller, _req: pb.ListDomainsRequest): Promise<pb.ListDomainsResponse> {
      authorize(caller, "read");
      const rows = await store.listDomains();
      const scope = scopeDomains(caller);
      const visible = scope ? rows.filter((d) => scope.includes(d.id)) : rows;
      return create(pb.ListDomainsResponseSchema, { domains: visible.map(domainMsg) });
    },

    async getDomain(caller: Caller, req: pb.GetDomainRequest): Promise<pb.GetDomainResponse> {
      const d = await mustDomain(store, req.domainId);
      authorize(caller, "read", { domainId: d.id });
      return create(pb.GetDomainResponseSchema, { domain: domainMsg(d) });
    },

    // ---- missions

    async createMission(caller: Caller, req: pb.CreateMissionRequest): Promise<pb.CreateMissionResponse> {
      const title = text("title", req.title, { required: true });
      const description = text("description", req.description, { max: MAX_TEXT });
      return commit(deps, async (tx, emit) => {
        const d = await mustDomain(tx, req.domainId);
        authorize(caller, "operate", { domainId: d.id });
        const ts = now();
        const row = { id: newId("msn", clock.now()), domainId: d.id, title, description, status: "open", createdAt: ts, updatedAt: ts };
        await tx.insertMission(row);
        emit({ type: "matrix", name: "mission.created", domainId: d.id, missionId: row.id, status: "open", payload: { mission_id: row.id, title } });
        return create(pb.CreateMissionResponseSchema, { mission: missionMsg(row) });
      });
    },

    async listMissions(caller: Caller, req: pb.ListMissionsRequest): Promise<pb.ListMissionsResponse> {
      if (req.domainId) await mustDomain(store, req.domainId);
      const scope = scopeDomains(caller);
      if (req.domainId) authorize(caller, "read", { domainId: req.domainId });
      else authorize(caller, "read");
      const rows = await store.listMissions(req.domainId || (scope?.length === 1 ? scope[0] : undefined));
      return create(pb.ListMissionsResponseSchema, { missions: rows.filter((m) => !scope || scope.includes(m.domainId)).map(missionMsg) });
    },

    async getMission(caller: Caller, req: pb.GetMissionRequest): Promise<pb.GetMissionResponse> {
      const m = await mustMission(store, req.missionId);
      authorize(caller, "read", { domainId: m.domainId });
      // what the mission's runs cost so far, as their runtimes reported it
      const tasks = await store.listTasks({ missionId: m.id, limit: 100_000 });
      const usage = sumUsage(tasks);
      const usageByAgentMsg = usageByAgent(tasks).map((a) => ({ agentId: a.agentId, usage: usageMsg(a.usage) }));
      return create(pb.GetMissionResponseSchema, { mission: missionMsg(m), usage: usage && usageMsg(usage), usageByAgent: usageByAgentMsg });
    },

    // ---- tasks

    async createTask(caller: Caller, req: pb.CreateTaskRequest): Promise<pb.CreateTaskResponse> {
      const kind = oneOf("kind", req.kind || "claimable", ["assigned", "claimable"] as const);
      const title = text("title", req.title, { required: true });
      const description = text("description", req.description, { max: MAX_TEXT });
      const runtime = req.runtime ? oneOf("runtime", req.runtime, RUNTIMES) : "";
      // a shell task runs input.command: without one it could only fail when it runs
      if (runtime === "shell") {
        const command = (req.input as JsonObject | undefined)?.command;
        if (command === undefined) throw invalidField("input.command", "is required for runtime shell (the command to run; ep task submit --command '…')");
        if (typeof command !== "string" || !command.trim()) throw invalidField("input.command", "must be a non-empty string");
      }
      const capabilities = req.capabilities.map((c, i) => text(`capabilities[${i}]`, c, { required: true, max: 100 }));
      if (req.maxAttempts < 0 || req.maxAttempts > 100) throw invalidField("max_attempts", "must be between 1 and 100");
      if (req.input && JSON.stringify(req.input).length > 256 * 1024) throw invalidField("input", "is larger than 256 KiB");
      let claimPolicy = "";
      let status: string;
      if (kind === "claimable") {
        claimPolicy = oneOf("claim_policy", req.claimPolicy || "first_claim", CLAIM_POLICIES);
        if (req.status && req.status !== "queued") throw invalidField("status", "a new claimable task is always queued");
        if (claimPolicy === "assigned" && !req.assigneeAgentId) throw invalidField("assignee_agent_id", "is required when claim_policy is assigned");
        status = "queued";
      } else {
        if (req.claimPolicy) throw invalidField("claim_policy", "applies only to claimable tasks");
        status = oneOf("status", req.status || "todo", KANBAN_STATES);
      }

      return commit(deps, async (tx, emit) => {
        const mission = await missionDomain(tx, req.missionId);
        authorize(caller, "operate", { domainId: mission.domainId });
        if (req.assigneeAgentId) {
          const a = await tx.getAgent(req.assigneeAgentId);
          if (!a || a.domainId !== mission.domainId) {
            throw new EpError("agent_not_found", `agent ${req.assigneeAgentId} is not enrolled in domain ${mission.domainId}`, { field: "assignee_agent_id" });
          }
        }
        const ts = now();
        const base: TaskRow = {
          id: newId("tsk", clock.now()),
          domainId: mission.domainId,
          missionId: mission.id,
          kind,
          title,
          description,
          status,
          claimPolicy,
          priority: req.priority,
          capabilities,
          assigneeAgentId: req.assigneeAgentId,
          attempts: 0,
          maxAttempts: req.maxAttempts || limits.maxAttempts,
          runtime,
          input: (req.input as JsonObject | undefined) ?? null,
          result: null,
          claimedBy: "",
          leaseExpiresMs: null,
          parentTaskId: "",
          createdAt: ts,
          updatedAt: ts,
        };
        const runs: TaskRow[] = [];
        if (claimPolicy === "broadcast") {
          const agents = (await tx.listAgents({ domainId: mission.domainId })).filter((a) => covers(a, base));
          if (!agents.length) throw new EpError("no_matching_agents", `no agent in domain ${mission.domainId} matches this task`);
          for (const a of agents) {
            runs.push({ ...base, id: newId("tsk", clock.now()), claimPolicy: "assigned", assigneeAgentId: a.id, parentTaskId: base.id });
          }
        }
        await tx.insertTask(base);
        taskEvent(emit, base, "task.created");
        assignmentEvent(emit, base);
        for (const r of runs) {
          await tx.insertTask(r);
          taskEvent(emit, r, "task.created");
          assignmentEvent(emit, r);
        }
        return create(pb.CreateTaskResponseSchema, { task: taskMsg(base), runs: runs.map(taskMsg) });
      });
    },

    async getTask(caller: Caller, req: pb.GetTaskRequest): Promise<pb.GetTaskResponse> {
      const t = await mustTask(store, req.taskId);
      authorize(caller, "read", { domainId: t.domainId });
      const runs = t.claimPolicy === "broadcast" ? await store.listTasks({ parentTaskId: t.id }) : [];
      return create(pb.GetTaskResponseSchema, { task: taskMsg(t), runs: runs.map(taskMsg) });
    },

    async listTasks(caller: Caller, req: pb.ListTasksRequest): Promise<pb.ListTasksResponse> {
      if (req.kind) oneOf("kind", req.kind, ["assigned", "claimable"] as const);
      if (req.limit < 0) throw invalidField("limit", "must not be negative");
      let domainId = req.domainId;
      if (req.missionId) domainId = (await mustMission(store, req.missionId)).domainId;
      else if (domainId) await mustDomain(store, domainId);
      // a caller confined to some domains lists only there
      const scope = domainId ? undefined : scopeDomains(caller);
      if (domainId) authorize(caller, "read", { domainId });
      else authorize(caller, "read");
      const rows = await store.listTasks({ missionId: req.missionId, domainId, domainIds: scope, kind: req.kind, status: req.status, limit: req.limit || 1000 });
      return create(pb.ListTasksResponseSchema, { tasks: rows.map(taskMsg) });
    },

    async updateTask(caller: Caller, req: pb.UpdateTaskRequest): Promise<pb.UpdateTaskResponse> {
      return commit(deps, async (tx, emit) => {
        const t = await mustTask(tx, req.taskId);
        authorize(caller, "operate", { domainId: t.domainId });
        if (t.kind === "claimable" && req.status !== undefined) {
          throw new EpError("task_wrong_kind", "a claimable task's status moves through claim, complete, fail, cancel and retry", { field: "status" });
        }
        if (t.kind === "claimable" && req.assigneeAgentId !== undefined) {
          throw new EpError("task_wrong_kind", "a claimable task's assignee is fixed at creation", { field: "assignee_agent_id" });
        }
        if (req.assigneeAgentId) {
          const a = await tx.getAgent(req.assigneeAgentId);
          if (!a || a.domainId !== t.domainId) throw new EpError("agent_not_found", `agent ${req.assigneeAgentId} is not enrolled in domain ${t.domainId}`);
        }
        const updated = await tx.updateTask(t.id, {
          title: req.title === undefined ? undefined : text("title", req.title, { required: true }),
          description: req.description === undefined ? undefined : text("description", req.description, { max: MAX_TEXT }),
          status: req.status === undefined ? undefined : oneOf("status", req.status, KANBAN_STATES),
          priority: req.priority,
          assigneeAgentId: req.assigneeAgentId,
          updatedAt: now(),
        });
        taskEvent(emit, updated!, "task.updated");
        if (req.assigneeAgentId && req.assigneeAgentId !== t.assigneeAgentId) assignmentEvent(emit, updated!);
        return create(pb.UpdateTaskResponseSchema, { task: taskMsg(updated!) });
      });
    },

    async deleteTask(caller: Caller, req: pb.DeleteTaskRequest): Promise<pb.DeleteTaskResponse> {
      return commit(deps, async (tx, emit) => {
        const t = await mustTask(tx, req.taskId);
        authorize(caller, "operate", { domainId: t.domainId });
        if (t.kind !== "assigned") throw new EpError("task_wrong_kind", "claimable tasks are cancelled, not deleted; use cancel");
        await tx.deleteTask(t.id);
        emit({ type: "matrix", name: "task.deleted", domainId: t.domainId, missionId: t.missionId, taskId: t.id, payload: { task_id: t.id } });
        return create(pb.DeleteTaskResponseSchema, {});
      });
    },

    // ---- the claim loop

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
