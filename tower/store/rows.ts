// Row <-> record mapping shared by both dialects: column names, JSON columns
// (stored as text in both) and BIGINT columns read back as numbers.
import type {
  AgentRow,
  DomainRow,
  EventRow,
  MissionRow,
  NewEvent,
  NodeRow,
  SigningKeyRow,
  TaskPatch,
  TaskRow,
  TicketRow,
  TokenRow,
} from "./store.js";

export type Row = Record<string, unknown>;

export const TASK_COLUMNS: Record<keyof TaskPatch, string> = {
  title: "title",
  description: "description",
  status: "status",
  claimPolicy: "claim_policy",
  priority: "priority",
  capabilities: "capabilities",
  assigneeAgentId: "assignee_agent_id",
  attempts: "attempts",
  maxAttempts: "max_attempts",
  runtime: "runtime",
  input: "input",
  result: "result",
  claimedBy: "claimed_by",
  leaseExpiresMs: "lease_expires_ms",
  leaseId: "lease_id",
  parentTaskId: "parent_task_id",
  updatedAt: "updated_at",
};

export const JSON_TASK_FIELDS = new Set(["capabilities", "input", "result"]);

/** The columns a new task row is written with, in the order of taskInsertValues(). */
export const TASK_INSERT_COLUMNS =
  "id, domain_id, mission_id, kind, title, description, status, claim_policy, priority, capabilities, " +
  ("assignee_agent_id, attempts, max_attempts, runtime, input, result, claimed_by, " +
    "lease_expires_ms, parent_task_id, created_at, updated_at, lease_id, depends_on, step");

export function taskInsertValues(row: TaskRow): unknown[] {
  return [
    row.id,
    row.domainId,
    row.missionId,
    row.kind,
    row.title,
    row.description,
    row.status,
    row.claimPolicy,
    row.priority,
    JSON.stringify(row.capabilities),
    row.assigneeAgentId,
    row.attempts,
    row.maxAttempts,
    row.runtime,
    row.input == null ? null : JSON.stringify(row.input),
    row.result == null ? null : JSON.stringify(row.result),
    row.claimedBy,
    row.leaseExpiresMs,
    row.parentTaskId,
    row.createdAt,
    row.updatedAt,
    row.leaseId,
    JSON.stringify(row.dependsOn),
    row.step,
  ];
}

export function toTask(r: Row): TaskRow {
  return {
    id: r.id as string,
    domainId: r.domain_id as string,
    missionId: r.mission_id as string,
    kind: r.kind as TaskRow["kind"],
    title: r.title as string,
    description: r.description as string,
    status: r.status as string,
    claimPolicy: r.claim_policy as string,
    priority: r.priority as number,
    capabilities: JSON.parse(r.capabilities as string) as string[],
    assigneeAgentId: r.assignee_agent_id as string,
    attempts: r.attempts as number,
    maxAttempts: r.max_attempts as number,
    runtime: r.runtime as string,
    input: r.input == null ? null : (JSON.parse(r.input as string) as TaskRow["input"]),
    result: r.result == null ? null : (JSON.parse(r.result as string) as TaskRow["result"]),
    claimedBy: r.claimed_by as string,
    leaseExpiresMs: r.lease_expires_ms == null ? null : Number(r.lease_expires_ms),
    parentTaskId: r.parent_task_id as string,
    createdAt: r.created_at as string,
    updatedAt: r.updated_at as string,
    leaseId: (r.lease_id as string | undefined) ?? "",
    // most tasks have no parents: "[]" is not parsed on the claim path
    dependsOn: r.depends_on && r.depends_on !== "[]" ? (JSON.parse(r.depends_on as string) as string[]) : [],
    step: (r.step as string | undefined) ?? "",
    // undefined rather than false: a row nobody depends on reads as one written without it
    hasDependents: r.has_dependents ? true : undefined,
  };
}

export const toDomain = (r: Row): DomainRow => ({
  id: r.id as string,
  name: r.name as string,
  createdAt: r.created_at as string,
});

export const toMission = (r: Row): MissionRow => ({
  id: r.id as string,
  domainId: r.domain_id as string,
  title: r.title as string,
  description: r.description as string,
  status: r.status as string,
  createdAt: r.created_at as string,
  updatedAt: r.updated_at as string,
});

export const toNode = (r: Row): NodeRow => ({
  id: r.id as string,
  hostname: r.hostname as string,
  status: r.status as string,
  lastSeenAt: r.last_seen_at as string,
  createdAt: r.created_at as string,
  domains: nodeDomains(r.domains as string | undefined),
});

/** nodes.domains: '*' or ids joined by commas. */
export const nodeDomains = (v: string | undefined): string[] =>
  !v || v === "*" ? ["*"] : v.split(",").filter(Boolean);
export const nodeDomainsText = (d: readonly string[]): string => (d.includes("*") ? "*" : d.join(","));

export const toAgent = (r: Row): AgentRow => ({
  id: r.id as string,
  domainId: r.domain_id as string,
  nodeId: r.node_id as string,
  name: r.name as string,
  runtime: r.runtime as string,
  capabilities: JSON.parse(r.capabilities as string) as string[],
  state: r.state as string,
  lastSeenAt: r.last_seen_at as string,
  createdAt: r.created_at as string,
  supervised: r.supervised === true || r.supervised === 1,
});

export const toToken = (r: Row): TokenRow => ({
  id: r.id as string,
  name: r.name as string,
  role: r.role as string,
  domainId: r.domain_id as string,
  hash: r.hash as string,
  expiresAt: r.expires_at as string,
  createdAt: r.created_at as string,
  revokedAt: r.revoked_at as string,
  lastUsedAt: r.last_used_at as string,
});

export const toEvent = (r: Row): EventRow => ({
  id: Number(r.id),
  type: r.type as string,
  name: r.name as string,
  domainId: r.domain_id as string,
  missionId: r.mission_id as string,
  agentId: r.agent_id as string,
  taskId: r.task_id as string,
  sessionId: r.session_id as string,
  status: r.status as string,
  payload: JSON.parse(r.payload as string) as EventRow["payload"],
  createdAt: r.created_at as string,
});

export const toSigningKey = (r: Row): SigningKeyRow => ({
  kid: r.kid as string,
  alg: r.alg as string,
  privateJwk: r.private_jwk as string,
  publicJwk: r.public_jwk as string,
  createdAt: r.created_at as string,
  retiredAt: r.retired_at as string,
});

export const toTicket = (r: Row): TicketRow => ({
  hash: r.hash as string,
  purpose: r.purpose as string,
  subject: r.subject as string,
  role: r.role as string,
  agentId: r.agent_id as string,
  expiresMs: Number(r.expires_ms),
  scope: (r.scope as string | undefined) ?? "{}",
});

/** The stored event a NewEvent became, with its id (both dialects return it from their inserts). */
export function eventRowOf(e: NewEvent, id: number, createdAt: string): EventRow {
  return {
    id,
    type: e.type,
    name: e.name,
    domainId: e.domainId ?? "",
    missionId: e.missionId ?? "",
    agentId: e.agentId ?? "",
    taskId: e.taskId ?? "",
    sessionId: e.sessionId ?? "",
    status: e.status ?? "",
    payload: e.payload ?? {},
    createdAt,
  };
}
