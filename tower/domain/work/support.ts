// The work API's vocabulary and small pieces: states, input checks, task events, usage sums,
// and a short cache of rows that never change (an agent's domain, a mission's domain).
import { RUNTIME_KINDS } from "../../../common/runtimes.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { invalidField } from "../../../common/errors.js";
import type { AgentRow, DenialRow, TaskRow, UsageRow, WorkspaceRow } from "../../store/store.js";
import { DenialSourceSchema, type TaskResult } from "../../../gen/ep/tower/v1/resources_pb.js";
import { enumWord } from "../../../common/vocab.js";
import { DENIAL_FIELD_LIMIT, DENIAL_LIMIT } from "../../../common/denials.js";
import type { Emit } from "../event-hub.js";

export const CLAIM_POLICIES = ["first_claim", "assigned", "broadcast"] as const;
export const CLAIMABLE_STATES = [
  "waiting",
  "queued",
  "claimed",
  "running",
  "succeeded",
  "failed",
  "cancelled",
] as const;
export const KANBAN_STATES = ["todo", "in_progress", "blocked", "review", "done"] as const;
export const RUNTIMES = RUNTIME_KINDS;
export const FINAL = ["succeeded", "failed", "cancelled"];
export const HELD = ["claimed", "running"];
export const MAX_TEXT = 100_000;
/**
 * How long the work path reuses what it read of an agent or a mission. It keeps only what
 * never changes once written (an agent's domain, node, runtime and capabilities; a
 * mission's domain), so the expiry only bounds staleness should that ever change.
 */
export const WORK_CACHE_MS = 10_000;
const WORK_CACHE_MAX = 10_000;

/** The fields of an agent the claim loop acts on; fixed at enrollment. */
export type ActingAgent = Pick<AgentRow, "id" | "domainId" | "nodeId" | "runtime" | "capabilities">;

/** A small read-through cache of immutable rows, with expiry on the injected clock. */
export function immutableCache<T>(clock: { now(): number }) {
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

export function text(field: string, value: string, { required = false, max = 500 } = {}): string {
  const v = value.trim();
  if (required && !v) throw invalidField(field, "is required");
  if (v.length > max) throw invalidField(field, `is longer than ${max} characters`);
  return v;
}

export function oneOf<T extends string>(field: string, value: string, allowed: readonly T[]): T {
  if (!allowed.includes(value as T))
    throw invalidField(field, `must be one of ${allowed.join(", ")} (got ${JSON.stringify(value)})`);
  return value as T;
}

export function taskEvent(emit: Emit, t: TaskRow, name: string, extra: JsonObject = {}): void {
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
      // what handing it over needs: an idle agent that can take it (fleet/push.ts)
      ...(t.status === "queued"
        ? { runtime: t.runtime, capabilities: t.capabilities, claim_policy: t.claimPolicy }
        : {}),
      ...extra,
    },
  });
}

/** An assignment is a message to the agent: it goes to the agent's inbox (SPEC §5). */
export function assignmentEvent(emit: Emit, t: TaskRow): void {
  if (!t.assigneeAgentId) return;
  emit({
    type: "inbox",
    name: "task.assigned",
    domainId: t.domainId,
    missionId: t.missionId,
    agentId: t.assigneeAgentId,
    taskId: t.id,
    status: t.status,
    payload: {
      task_id: t.id,
      kind: t.kind,
      title: t.title,
      agent_id: t.assigneeAgentId,
      ...(t.parentTaskId ? { parent_task_id: t.parentTaskId } : {}),
    },
  });
}

/** The usage a runtime reported, as stored in a task's result (none: no field). */
export function usageOf(u: TaskResult["usage"] | undefined): { usage?: UsageRow } {
  if (!u) return {};
  const n = (v: bigint | number) => Math.max(0, Number(v));
  return {
    usage: {
      inputTokens: n(u.inputTokens),
      outputTokens: n(u.outputTokens),
      cachedInputTokens: n(u.cachedInputTokens),
      costUsd: Math.max(0, u.costUsd || 0),
      model: u.model.slice(0, 200),
    },
  };
}

/** The largest patch kept in a task's result (the node sends at most 64 KiB; the rest is an artifact). */
const PATCH_LIMIT = 80 * 1024;

/** A run's workspace as the node reported it, bounded. */
export function workspaceOf(w: TaskResult["workspace"] | undefined): { workspace?: WorkspaceRow } {
  if (!w) return {};
  const cut = (v: string, n = 1000) => v.slice(0, n);
  return {
    workspace: {
      repo: cut(w.repo, 4096),
      name: cut(w.name),
      branch: cut(w.branch),
      base: cut(w.base, 64),
      head: cut(w.head, 64),
      committed: w.committed,
      stat: cut(w.stat, 16 * 1024),
      patch: cut(w.patch, PATCH_LIMIT),
      patchTruncated: w.patchTruncated || w.patch.length > PATCH_LIMIT,
      patchArtifact: cut(w.patchArtifact),
      worktree: cut(w.worktree, 4096),
      filesChanged: Math.max(0, w.filesChanged),
      baseBranch: cut(w.baseBranch),
      commits: w.commits
        .slice(0, 200)
        .map((c) => ({ sha: cut(c.sha, 64), subject: cut(c.subject), author: cut(c.author), byEpd: c.byEpd })),
    },
  };
}

/** The tool calls a run was refused, as the node reported them, bounded (none: no field). */
export function denialsOf(list: TaskResult["denials"] | undefined): { denials?: DenialRow[] } {
  if (!list?.length) return {};
  // a little slack over the limit for the node's own "…" after a clipped field
  const cut = (v: string) => (v.length > DENIAL_FIELD_LIMIT + 1 ? `${v.slice(0, DENIAL_FIELD_LIMIT)}…` : v);
  return {
    denials: list.slice(0, DENIAL_LIMIT).map((d) => ({
      tool: cut(d.tool),
      tried: cut(d.tried),
      reason: cut(d.reason),
      source: enumWord(DenialSourceSchema, d.source),
      callId: cut(d.callId),
    })),
  };
}

/** The denial count in a task event's payload (none: no field). */
export function denialsEvent(d: readonly DenialRow[] | undefined): JsonObject {
  return d?.length ? { denials: d.length } : {};
}

/** The usage in a task event's payload (snake_case, as events are). */
export function usageEvent(u: UsageRow | undefined): JsonObject {
  return u
    ? {
        usage: {
          input_tokens: u.inputTokens,
          output_tokens: u.outputTokens,
          cached_input_tokens: u.cachedInputTokens,
          cost_usd: u.costUsd,
          model: u.model,
        },
      }
    : {};
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
export function usageByAgent(
  rows: readonly { claimedBy: string; result: { usage?: UsageRow } | null }[],
): { agentId: string; usage: UsageRow }[] {
  const byAgent = new Map<string, { claimedBy: string; result: { usage?: UsageRow } | null }[]>();
  for (const r of rows) {
    if (!r.result?.usage || !r.claimedBy) continue;
    const list = byAgent.get(r.claimedBy) ?? [];
    list.push(r);
    byAgent.set(r.claimedBy, list);
  }
  return [...byAgent]
    .map(([agentId, list]) => ({ agentId, usage: sumUsage(list)! }))
    .sort(
      (a, b) =>
        b.usage.costUsd - a.usage.costUsd ||
        b.usage.outputTokens - a.usage.outputTokens ||
        a.agentId.localeCompare(b.agentId),
    );
}

export function covers(agent: AgentRow, t: { capabilities: string[]; runtime: string }): boolean {
  return (!t.runtime || t.runtime === agent.runtime) && t.capabilities.every((c) => agent.capabilities.includes(c));
}
