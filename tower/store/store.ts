// The one store interface. Every query the tower makes goes through it, so SQLite
// (embedded default) and PostgreSQL (scale-out) pass the same test suite.

import type { AiStore } from "./ai-store.js";
import type { ApprovalStore } from "./approval-store.js";
import type { IdempotencyStore } from "./idempotency-store.js";
import type { MetricsStore } from "./metrics-store.js";
import type { NodeStateStore } from "./node-state-store.js";
import type { SecretStore } from "./secret-store.js";
import type { WebhookStore } from "./webhook-store.js";

import type { JsonObject } from "./json-types.js";
export type { JsonObject } from "./json-types.js";

export interface DomainRow {
  id: string;
  name: string;
  createdAt: string;
}

export interface MissionRow {
  id: string;
  domainId: string;
  title: string;
  description: string;
  status: string;
  createdAt: string;
  updatedAt: string;
}

export interface TaskResultRow {
  output: string;
  exitCode?: number;
  error: string;
  /** tokens and cost the runtime reported (proto Usage field names) */
  usage?: UsageRow;
  /** the run's git worktree and its change (proto WorkspaceResult field names) */
  workspace?: WorkspaceRow;
  /** tool calls the agent was refused (proto Denial field names; source as its lowercase word) */
  denials?: DenialRow[];
}

export interface DenialRow {
  tool: string;
  tried: string;
  reason: string;
  source: string;
  callId: string;
}

export interface WorkspaceRow {
  repo: string;
  name: string;
  branch: string;
  base: string;
  head: string;
  committed: boolean;
  stat: string;
  patch: string;
  patchTruncated: boolean;
  patchArtifact: string;
  worktree: string;
  filesChanged: number;
  /** absent in results reported before they were recorded */
  baseBranch?: string;
  commits?: { sha: string; subject: string; author: string; byEpd: boolean }[];
}

export interface UsageRow {
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  costUsd: number;
  model: string;
}

export interface TaskRow {
  id: string;
  domainId: string;
  missionId: string;
  kind: "assigned" | "claimable";
  title: string;
  description: string;
  status: string;
  claimPolicy: string;
  priority: number;
  capabilities: string[];
  assigneeAgentId: string;
  attempts: number;
  maxAttempts: number;
  runtime: string;
  input: JsonObject | null;
  result: TaskResultRow | null;
  claimedBy: string;
  leaseExpiresMs: number | null;
  /** the latest claim's lease id (fencing token); '' before the first claim */
  leaseId: string;
  parentTaskId: string;
  /** the tasks this one waits for (set at creation, never changed; the edges are in task_deps) */
  dependsOn: string[];
  /** the pipeline step's name, '' for a task made one by one */
  step: string;
  /** another task depends on this one (set by markParent, never cleared); absent: false */
  hasDependents?: boolean;
  createdAt: string;
  updatedAt: string;
}

export type TaskPatch = Partial<
  Omit<TaskRow, "id" | "domainId" | "missionId" | "kind" | "createdAt" | "dependsOn" | "step" | "hasDependents">
>;

export interface TaskQuery {
  missionId?: string;
  domainId?: string;
  /** only these domains (a caller scoped to several) */
  domainIds?: readonly string[];
  kind?: string;
  status?: string;
  /**
   * only tasks whose lease is held (claimed or running): written as literals, so the store plans
   * the query on its partial index of held tasks instead of scanning every task ever made
   */
  held?: boolean;
  /** only tasks whose lease this agent holds or last held */
  claimedBy?: string;
  parentTaskId?: string;
  /** only tasks listed after this one (its insertion order): the next page */
  afterTaskId?: string;
  limit?: number;
}

/** What a task must still look like for a conditional update to apply. */
export interface TaskExpectation {
  status?: readonly string[];
  claimedBy?: string;
  /** the claim this update is about (attempts count claims), so a newer claim is never touched */
  attempts?: number;
  /** the lease runs past this time (ms), or the task has none */
  leaseAfterMs?: number;
  /** the claim's lease id: a call about an older claim touches nothing */
  leaseId?: string;
}

export interface Claimant {
  agentId: string;
  domainId: string;
  runtime: string;
  capabilities: readonly string[];
  /** the claimed task starts at once: status running instead of claimed */
  start?: boolean;
  /** the lease id this claim mints (written on the row) */
  leaseId: string;
}

export interface NodeRow {
  id: string;
  hostname: string;
  status: string;
  lastSeenAt: string;
  createdAt: string;
  /** the domains the node serves: ["*"] for all (the explicit wide grant) */
  domains: string[];
}

export interface AgentRow {
  id: string;
  domainId: string;
  nodeId: string;
  name: string;
  runtime: string;
  capabilities: string[];
  state: string;
  lastSeenAt: string;
  createdAt: string;
  /** its node supervises it (restart, pause, resume apply) */
  supervised: boolean;
}

export interface TokenRow {
  id: string;
  name: string;
  role: string;
  domainId: string;
  hash: string;
  expiresAt: string;
  createdAt: string;
  revokedAt: string;
  lastUsedAt: string;
}

export interface SigningKeyRow {
  kid: string;
  alg: string;
  privateJwk: string;
  publicJwk: string;
  createdAt: string;
  retiredAt: string;
}

export interface TicketRow {
  hash: string;
  purpose: string;
  subject: string;
  role: string;
  agentId: string;
  expiresMs: number;
  /** the credential it was made with (TicketScope in tower/domain/auth/auth.ts), JSON */
  scope: string;
}

export interface NewEvent {
  type: "approval" | "inbox" | "matrix" | "progress";
  name: string;
  domainId?: string;
  missionId?: string;
  agentId?: string;
  taskId?: string;
  sessionId?: string;
  status?: string;
  payload?: JsonObject;
}

export interface EventRow {
  id: number;
  type: string;
  name: string;
  domainId: string;
  missionId: string;
  agentId: string;
  taskId: string;
  sessionId: string;
  status: string;
  payload: JsonObject;
  createdAt: string;
}

export interface EventQuery {
  afterId?: number;
  limit?: number;
  types?: readonly string[];
  domainId?: string;
  /** only these domains (a caller scoped to several) */
  domainIds?: readonly string[];
  missionId?: string;
  agentId?: string;
  sessionId?: string;
  taskId?: string;
}

/**
 * Inserts throw EpError "already_exists" on a duplicate key and "not_found" when a
 * referenced row (domain, mission) is missing, in both dialects. On PostgreSQL such an
 * error also aborts the surrounding transaction: let it propagate, do not catch and go on.
 */
/**
 * AiStore (tower/store/ai-store.ts): AI sessions, turns, pending actions, docs and artifacts; SecretStore
 * (tower/store/secret-store.ts): encrypted secrets and grants; NodeStateStore (tower/store/node-state-store.ts): the
 * latest state report of each node; ApprovalStore (tower/store/approval-store.ts): what agents ask a person to allow;
 * IdempotencyStore (tower/store/idempotency-store.ts): the keys of idempotent creates; WebhookStore
 * (tower/store/webhook-store.ts): outgoing webhooks and their deliveries; DependencyStore
 * (tower/store/dependency-store.ts): task dependencies. MetricsStore (tower/store/metrics-store.ts): the counts
 * /metrics reads at scrape time.
 */
export interface Store
  extends AiStore,
    SecretStore,
    NodeStateStore,
    ApprovalStore,
    IdempotencyStore,
    WebhookStore,
    DependencyStore,
    MetricsStore {
  readonly dialect: "sqlite" | "postgres";
  /** Applies pending numbered migrations. */
  migrate(): Promise<void>;
  close(): Promise<void>;
  /**
   * Runs fn as one unit; fn must use the store it is given. Its writes are applied all or
   * none, and no other caller sees them before they are durable. Group commit: both dialects
   * commit the transactions (and single writes) of one event-loop turn together, each in its
   * own SAVEPOINT, so fn's failure rolls back only fn's work — but a failed COMMIT (disk full,
   * connection lost) fails every member of that batch, and each caller learns of it (the
   * promise rejects); none of them was applied. The promise settles only after the COMMIT.
   */
  transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T>;

  insertDomain(row: DomainRow): Promise<void>;
  getDomain(id: string): Promise<DomainRow | undefined>;
  getDomainByName(name: string): Promise<DomainRow | undefined>;
  listDomains(): Promise<DomainRow[]>;

  insertMission(row: MissionRow): Promise<void>;
  getMission(id: string): Promise<MissionRow | undefined>;
  listMissions(domainId?: string): Promise<MissionRow[]>;
  updateMission(
    id: string,
    patch: Partial<Pick<MissionRow, "title" | "description" | "status" | "updatedAt">>,
  ): Promise<MissionRow | undefined>;

  insertTask(row: TaskRow): Promise<void>;
  getTask(id: string): Promise<TaskRow | undefined>;
  listTasks(query: TaskQuery): Promise<TaskRow[]>;
  /** Applies patch if the task exists and meets `expect`; returns the updated row, else undefined. */
  updateTask(id: string, patch: TaskPatch, expect?: TaskExpectation): Promise<TaskRow | undefined>;
  deleteTask(id: string): Promise<boolean>;
  /**
   * Atomically claims the best queued claimable task this agent may run (priority
   * desc, then oldest): status claimed, claimed_by, attempts + 1, lease deadline.
   */
  claimTask(claimant: Claimant, nowMs: number, leaseMs: number): Promise<TaskRow | undefined>;
  /** Claimed or running tasks whose lease deadline is at or before nowMs. */
  listExpiredLeases(nowMs: number, limit: number): Promise<TaskRow[]>;

  insertNode(row: NodeRow): Promise<void>;
  getNode(id: string): Promise<NodeRow | undefined>;
  listNodes(): Promise<NodeRow[]>;
  updateNode(
    id: string,
    patch: Partial<Pick<NodeRow, "hostname" | "status" | "lastSeenAt" | "domains">>,
  ): Promise<NodeRow | undefined>;

  insertAgent(row: AgentRow): Promise<void>;
  getAgent(id: string): Promise<AgentRow | undefined>;
  listAgents(query: { domainId?: string; nodeId?: string }): Promise<AgentRow[]>;
  /** The domains of the agents enrolled on a node, each once, sorted (a node's credential: on every call it makes). */
  nodeAgentDomains(nodeId: string): Promise<string[]>;
  updateAgent(
    id: string,
    patch: Partial<Pick<AgentRow, "state" | "lastSeenAt" | "name" | "capabilities" | "runtime" | "supervised">>,
  ): Promise<AgentRow | undefined>;
  /**
   * The agent moved from state `from` to `to` (last seen `at`) in one statement; undefined when it is not in `from` (or
   * not there).
   */
  moveAgentState(id: string, from: string, to: string, at: string): Promise<AgentRow | undefined>;

  insertToken(row: TokenRow): Promise<void>;
  getToken(id: string): Promise<TokenRow | undefined>;
  getTokenByHash(hash: string): Promise<TokenRow | undefined>;
  listTokens(): Promise<TokenRow[]>;
  updateToken(id: string, patch: Partial<Pick<TokenRow, "revokedAt" | "lastUsedAt">>): Promise<TokenRow | undefined>;

  insertSigningKey(row: SigningKeyRow): Promise<void>;
  /** Replaces a signing key's stored private part (sealed under a new secret-store key). */
  updateSigningKeyPrivate(kid: string, privateJwk: string): Promise<void>;
  listSigningKeys(): Promise<SigningKeyRow[]>;
  retireSigningKey(kid: string, at: string): Promise<void>;

  insertTicket(row: TicketRow): Promise<void>;
  /** Marks the ticket used and returns it, once, if it exists and has not expired. */
  consumeTicket(hash: string, nowMs: number): Promise<TicketRow | undefined>;
  /** The ticket if it exists, is unused and has not expired, without consuming it (console sessions). */
  findTicket(hash: string, nowMs: number): Promise<TicketRow | undefined>;

  /** Appends events and returns them with their ids (strictly increasing). */
  appendEvents(events: readonly NewEvent[], createdAt: string): Promise<EventRow[]>;
  /**
   * appendEvents as a transaction's last statement: the store may send its COMMIT along
   * with it (PostgresStore, one round trip), so nothing may run on the transaction after
   * it. The transaction still succeeds only if that COMMIT does. Optional: callers fall
   * back to appendEvents.
   */
  appendFinalEvents?(events: readonly NewEvent[], createdAt: string): Promise<EventRow[]>;
  listEvents(query: EventQuery): Promise<EventRow[]>;
  lastEventId(): Promise<number>;
  /** Deletes events with id below beforeId, always keeping the newest so ids never restart; returns how many. */
  pruneEvents(beforeId: number): Promise<number>;

  getMeta(key: string): Promise<string | undefined>;
  setMeta(key: string, value: string): Promise<void>;
}

// Task dependencies (SQL in tower/store/dependency-store.ts); here, beside TaskRow, so the store
// and its part import each other in one direction only.
export interface ParentState {
  childId: string;
  parentId: string;
  status: string;
}

export interface DependencyStore {
  /**
   * The task `id` as it is now, marked as having dependents (undefined: no such task). One
   * UPDATE: it waits for a transaction that holds the row (the parent's outcome) and reads what
   * that one committed, so a child's creation and its parent's outcome see each other.
   */
  markParent(id: string): Promise<TaskRow | undefined>;
  /** Records that `childId` waits for each of `parentIds` (each once). */
  insertTaskDeps(childId: string, parentIds: readonly string[]): Promise<void>;
  /**
   * In one statement: the waiting children of `parentId` none of whose parents is unfinished or
   * failed any more (every one succeeded) become queued (updated `at`); returns them.
   */
  queueReadyChildren(parentId: string, at: string): Promise<TaskRow[]>;
  /** The tasks that depend on `parentId` directly, in creation order. */
  listChildren(parentId: string): Promise<TaskRow[]>;
  /** The parents of these children with their status (children without parents: none). */
  listParentStates(childIds: readonly string[]): Promise<ParentState[]>;
}
