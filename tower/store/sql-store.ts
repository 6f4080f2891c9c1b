// What both dialects share: one SQL text (the common subset: `?` placeholders, RETURNING,
// ON CONFLICT) for every table whose statements are the same on SQLite and PostgreSQL — meta
// here, and through their own modules the catalog (domains, missions, nodes, agents), the
// credentials, the AI, secret, node-state, approval, idempotency, webhook and dependency tables. A dialect supplies
// `query` (one statement on its connection, or on the transaction's) and the few things that really differ: task
// order and claims, event ids, group commit, listen/notify (sqlite/, postgres/).
//
// A base class rather than mix-ins: the compiler checks that every Store method exists, the
// methods live on one prototype (a transaction's store costs one object), and each dialect
// file holds only what is its own.
import {
  createAiStore,
  type AiActionQuery,
  type AiActionRow,
  type AiSessionRow,
  type AiStore,
  type AiTurnRow,
  type ArtifactRow,
  type DocRow,
} from "./ai-store.js";
import {
  createApprovalStore,
  type ApprovalDecision,
  type ApprovalQuery,
  type ApprovalRow,
  type ApprovalStore,
} from "./approval-store.js";
import { createDependencyStore, type DependencyStore } from "./dependency-store.js";
import { createIdempotencyStore, type IdempotencyRow, type IdempotencyStore } from "./idempotency-store.js";
import { createMetricsStore, type MetricsStore } from "./metrics-store.js";
import { createNodeStateStore, type NodeStateRow, type NodeStateStore } from "./node-state-store.js";
import { createCatalogStore, type CatalogStore } from "./catalog-store.js";
import { createCredentialStore, type CredentialStore } from "./credential-store.js";
import type { Row } from "./rows.js";
import { eventFilterSql, taskListSql, taskUpdateSql, type SqlDialect } from "./query-sql.js";
import {
  createSecretStore,
  type SecretCipher,
  type SecretGrantRow,
  type SecretRow,
  type SecretStore,
} from "./secret-store.js";
import {
  createWebhookStore,
  type DeliveryOutcome,
  type DeliveryQuery,
  type DeliveryRow,
  type WebhookRow,
  type WebhookStore,
} from "./webhook-store.js";
import type {
  AgentRow,
  DomainRow,
  EventQuery,
  MissionRow,
  NodeRow,
  SigningKeyRow,
  TaskExpectation,
  TaskPatch,
  TaskQuery,
  TicketRow,
  TokenRow,
} from "./store.js";

type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

/** `?` placeholders to PostgreSQL's `$1, $2, …` (the shared SQL has no `?` inside literals). */
export function dollarPlaceholders(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** The store parts SqlStore binds, by name. */
interface Parts {
  catalog: CatalogStore;
  credentials: CredentialStore;
  ai: AiStore;
  secrets: SecretStore;
  nodeState: NodeStateStore;
  approvals: ApprovalStore;
  idempotency: IdempotencyStore;
  webhooks: WebhookStore;
  deps: DependencyStore;
  metrics: MetricsStore;
}

export abstract class SqlStore
  implements
    AiStore,
    SecretStore,
    NodeStateStore,
    ApprovalStore,
    IdempotencyStore,
    WebhookStore,
    DependencyStore,
    MetricsStore
{
  abstract readonly dialect: "sqlite" | "postgres";

  /**
   * Runs one statement (`?` placeholders) on this store's connection — the transaction's when
   * this is a transaction's store — and returns the rows it yields (none for a plain write).
   * Booleans are bound as the dialect stores them.
   */
  protected abstract query(sql: string, args?: readonly unknown[]): Promise<Row[]>;

  /** The same EpError for a constraint violation on either dialect (already_exists, not_found). */
  protected abstract constraintError(err: unknown, table: string): unknown;

  /**
   * Appended to each text column in ORDER BY: byte order on both dialects (SQLite compares
   * bytes already; PostgreSQL needs `COLLATE "C"`, or the order follows the server's locale).
   */
  protected abstract get byteOrder(): string;

  /**
   * `col` is one of `values`: `col IN (?, ?)` with the values spread on SQLite, one array
   * parameter on PostgreSQL (`col = ANY(?::text[])`, one prepared statement for any length).
   */
  protected abstract inList(col: string, values: readonly string[]): { sql: string; args: unknown[] };

  /** The LIMIT parameter meaning "no limit" (-1 on SQLite, NULL on PostgreSQL). */
  protected abstract get noLimit(): number | null;

  declare private sqlDialect?: SqlDialect;
  /** What query-sql.ts needs of the dialect. */
  private get sqlShape(): SqlDialect {
    return (this.sqlDialect ??= { listIn: (col, values) => this.inList(col, values), unlimited: this.noLimit });
  }

  /** The task list's SQL (the dialect reads the rows its own way: it is on the hot path). */
  protected taskListSql(q: TaskQuery): { sql: string; args: unknown[] } {
    return taskListSql(this.sqlShape, q);
  }

  /** A conditional task update's SQL: the patch, applied only while the row matches `expect`. */
  protected taskUpdateSql(id: string, patch: TaskPatch, expect?: TaskExpectation): { sql: string; args: unknown[] } {
    return taskUpdateSql(this.sqlShape, id, patch, expect);
  }

  /** The event filters' WHERE terms (without the id range and the limit, which the dialect owns). */
  protected eventFilterSql(q: EventQuery): { where: string[]; args: unknown[] } {
    return eventFilterSql(this.sqlShape, q);
  }

  // `declare`: no per-instance field (a transaction's store is made per transaction)
  declare private parts?: Partial<Parts>;

  /**
   * The store part `k` (the AI, secret, node-state… tables' SQL, each its own module), bound to this store's
   * connection, made on its first use: a transaction's store makes only the parts its work touches.
   */
  private part<K extends keyof Parts>(k: K): Parts[K] {
    const parts = (this.parts ??= {});
    return (parts[k] ??= this.makePart(k));
  }

  private makePart<K extends keyof Parts>(k: K): Parts[K] {
    const q: Query = (sql, args) => this.tableQuery(sql, args);
    const orderBy = (...cols: string[]) => this.orderBy(...cols);
    const make: { [P in keyof Parts]: () => Parts[P] } = {
      catalog: () => createCatalogStore(q, orderBy),
      credentials: () => createCredentialStore(q, orderBy),
      ai: () => createAiStore(q),
      secrets: () => createSecretStore(q),
      nodeState: () => createNodeStateStore(q),
      approvals: () => createApprovalStore(q),
      idempotency: () => createIdempotencyStore(q),
      // PostgreSQL: replicas taking due deliveries at once skip each other's rows; SQLite has one writer
      webhooks: () => createWebhookStore(q, this.dialect === "postgres" ? " FOR UPDATE SKIP LOCKED" : ""),
      // PostgreSQL: a child's row is locked before its parents are read (dependency-store.ts); SQLite has one writer
      deps: () =>
        createDependencyStore(
          q,
          (col, values) => this.inList(col, values),
          this.dialect === "postgres" ? " FOR UPDATE" : "",
        ),
      metrics: () => createMetricsStore(q),
    };
    return make[k]();
  }

  /** query() with the constraint error named after the statement's table. */
  private async tableQuery(sql: string, args: readonly unknown[]): Promise<Row[]> {
    try {
      return await this.query(sql, args);
    } catch (err) {
      throw this.constraintError(err, /(?:INTO|UPDATE|FROM)\s+(\w+)/i.exec(sql)?.[1] ?? "rows");
    }
  }

  private orderBy(...cols: string[]): string {
    return `ORDER BY ${cols.map((c) => `${c}${this.byteOrder}`).join(", ")}`;
  }

  // ---- domains, missions, nodes, agents (SQL in catalog-store.ts)

  insertDomain(row: DomainRow) {
    return this.part("catalog").insertDomain(row);
  }
  getDomain(id: string) {
    return this.part("catalog").getDomain(id);
  }
  getDomainByName(name: string) {
    return this.part("catalog").getDomainByName(name);
  }
  listDomains() {
    return this.part("catalog").listDomains();
  }
  insertMission(row: MissionRow) {
    return this.part("catalog").insertMission(row);
  }
  getMission(id: string) {
    return this.part("catalog").getMission(id);
  }
  listMissions(domainId?: string) {
    return this.part("catalog").listMissions(domainId);
  }
  updateMission(id: string, patch: Partial<Pick<MissionRow, "title" | "description" | "status" | "updatedAt">>) {
    return this.part("catalog").updateMission(id, patch);
  }
  insertNode(row: NodeRow) {
    return this.part("catalog").insertNode(row);
  }
  getNode(id: string) {
    return this.part("catalog").getNode(id);
  }
  listNodes() {
    return this.part("catalog").listNodes();
  }
  updateNode(id: string, patch: Partial<Pick<NodeRow, "hostname" | "status" | "lastSeenAt" | "domains">>) {
    return this.part("catalog").updateNode(id, patch);
  }
  insertAgent(row: AgentRow) {
    return this.part("catalog").insertAgent(row);
  }
  getAgent(id: string) {
    return this.part("catalog").getAgent(id);
  }
  listAgents(q: { domainId?: string; nodeId?: string }) {
    return this.part("catalog").listAgents(q);
  }
  nodeAgentDomains(nodeId: string) {
    return this.part("catalog").nodeAgentDomains(nodeId);
  }
  updateAgent(
    id: string,
    patch: Partial<Pick<AgentRow, "state" | "lastSeenAt" | "name" | "capabilities" | "runtime" | "supervised">>,
  ) {
    return this.part("catalog").updateAgent(id, patch);
  }
  moveAgentState(id: string, from: string, to: string, at: string) {
    return this.part("catalog").moveAgentState(id, from, to, at);
  }

  // ---- tokens, signing keys, tickets (SQL in credential-store.ts)

  insertToken(row: TokenRow) {
    return this.part("credentials").insertToken(row);
  }

  getToken(id: string) {
    return this.part("credentials").getToken(id);
  }

  getTokenByHash(hash: string) {
    return this.part("credentials").getTokenByHash(hash);
  }

  listTokens() {
    return this.part("credentials").listTokens();
  }

  updateToken(id: string, patch: Partial<Pick<TokenRow, "revokedAt" | "lastUsedAt">>) {
    return this.part("credentials").updateToken(id, patch);
  }

  insertSigningKey(row: SigningKeyRow) {
    return this.part("credentials").insertSigningKey(row);
  }

  listSigningKeys() {
    return this.part("credentials").listSigningKeys();
  }

  updateSigningKeyPrivate(kid: string, privateJwk: string) {
    return this.part("credentials").updateSigningKeyPrivate(kid, privateJwk);
  }

  retireSigningKey(kid: string, at: string) {
    return this.part("credentials").retireSigningKey(kid, at);
  }

  insertTicket(row: TicketRow) {
    return this.part("credentials").insertTicket(row);
  }

  consumeTicket(hash: string, nowMs: number) {
    return this.part("credentials").consumeTicket(hash, nowMs);
  }

  findTicket(hash: string, nowMs: number) {
    return this.part("credentials").findTicket(hash, nowMs);
  }

  // ---- meta

  async getMeta(key: string): Promise<string | undefined> {
    const [r] = await this.query("SELECT value FROM meta WHERE key = ?", [key]);
    return r?.value as string | undefined;
  }

  async setMeta(key: string, value: string): Promise<void> {
    await this.query(
      "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      [key, value],
    );
  }

  // ---- AI sessions, turns, actions, docs, artifacts (SQL in ai-store.ts)

  insertAiSession(row: AiSessionRow) {
    return this.part("ai").insertAiSession(row);
  }
  getAiSession(id: string) {
    return this.part("ai").getAiSession(id);
  }
  listAiSessions(owner: string) {
    return this.part("ai").listAiSessions(owner);
  }
  updateAiSession(id: string, patch: Partial<Pick<AiSessionRow, "title" | "status" | "updatedAt">>) {
    return this.part("ai").updateAiSession(id, patch);
  }
  insertAiTurn(row: AiTurnRow) {
    return this.part("ai").insertAiTurn(row);
  }
  listAiTurns(sessionId: string) {
    return this.part("ai").listAiTurns(sessionId);
  }
  insertAiAction(row: AiActionRow) {
    return this.part("ai").insertAiAction(row);
  }
  getAiAction(id: string) {
    return this.part("ai").getAiAction(id);
  }
  listAiActions(query: AiActionQuery) {
    return this.part("ai").listAiActions(query);
  }
  decideAiAction(id: string, decision: { status: "approved" | "rejected"; decidedBy: string; decidedAt: string }) {
    return this.part("ai").decideAiAction(id, decision);
  }
  recordAiActionOutcome(id: string, outcome: { result: unknown; error: string; executedAt: string }) {
    return this.part("ai").recordAiActionOutcome(id, outcome);
  }
  putDoc(row: DocRow) {
    return this.part("ai").putDoc(row);
  }
  getDoc(missionId: string, name: string) {
    return this.part("ai").getDoc(missionId, name);
  }
  listDocs(missionId: string) {
    return this.part("ai").listDocs(missionId);
  }
  putArtifact(row: ArtifactRow) {
    return this.part("ai").putArtifact(row);
  }
  listArtifacts(taskId: string) {
    return this.part("ai").listArtifacts(taskId);
  }

  // ---- secrets (SQL in secret-store.ts)

  putSecret(row: SecretRow) {
    return this.part("secrets").putSecret(row);
  }
  getSecret(name: string) {
    return this.part("secrets").getSecret(name);
  }
  listSecrets() {
    return this.part("secrets").listSecrets();
  }
  deleteSecret(name: string) {
    return this.part("secrets").deleteSecret(name);
  }
  updateSecretCipher(name: string, expect: { keyId: string; version: number }, c: SecretCipher) {
    return this.part("secrets").updateSecretCipher(name, expect, c);
  }
  insertSecretGrant(row: SecretGrantRow) {
    return this.part("secrets").insertSecretGrant(row);
  }
  deleteSecretGrant(secretName: string, target: { agentId: string; domainId: string }) {
    return this.part("secrets").deleteSecretGrant(secretName, target);
  }
  listSecretGrants(secretName?: string) {
    return this.part("secrets").listSecretGrants(secretName);
  }

  // ---- node state (SQL in node-state-store.ts)

  putNodeState(row: NodeStateRow) {
    return this.part("nodeState").putNodeState(row);
  }
  listNodeStates(nodeId?: string) {
    return this.part("nodeState").listNodeStates(nodeId);
  }

  // ---- approvals (SQL in approval-store.ts)

  insertApproval(row: ApprovalRow) {
    return this.part("approvals").insertApproval(row);
  }
  getApproval(id: string) {
    return this.part("approvals").getApproval(id);
  }
  listApprovals(q: ApprovalQuery) {
    return this.part("approvals").listApprovals(q);
  }
  decideApproval(id: string, d: ApprovalDecision) {
    return this.part("approvals").decideApproval(id, d);
  }

  // ---- scrape-time counts for /metrics (SQL in metrics-store.ts)

  metricCounts() {
    return this.part("metrics").metricCounts();
  }

  // ---- idempotency keys (SQL in idempotency-store.ts)

  findIdempotencyKey(scope: string, key: string, nowMs: number) {
    return this.part("idempotency").findIdempotencyKey(scope, key, nowMs);
  }
  putIdempotencyKey(row: IdempotencyRow) {
    return this.part("idempotency").putIdempotencyKey(row);
  }
  sweepIdempotencyKeys(nowMs: number) {
    return this.part("idempotency").sweepIdempotencyKeys(nowMs);
  }

  // ---- webhooks (SQL in webhook-store.ts)

  insertWebhook(row: WebhookRow) {
    return this.part("webhooks").insertWebhook(row);
  }
  getWebhook(id: string) {
    return this.part("webhooks").getWebhook(id);
  }
  listWebhooks(domainId?: string) {
    return this.part("webhooks").listWebhooks(domainId);
  }
  deleteWebhook(id: string) {
    return this.part("webhooks").deleteWebhook(id);
  }
  updateWebhookCipher(id: string, expectKeyId: string, cipher: SecretCipher) {
    return this.part("webhooks").updateWebhookCipher(id, expectKeyId, cipher);
  }
  insertWebhookDelivery(row: DeliveryRow) {
    return this.part("webhooks").insertWebhookDelivery(row);
  }
  listWebhookDeliveries(q: DeliveryQuery) {
    return this.part("webhooks").listWebhookDeliveries(q);
  }
  claimWebhookDeliveries(now: string, leaseId: string, leaseUntil: string, limit: number) {
    return this.part("webhooks").claimWebhookDeliveries(now, leaseId, leaseUntil, limit);
  }
  finishWebhookAttempt(id: string, leaseId: string, outcome: DeliveryOutcome) {
    return this.part("webhooks").finishWebhookAttempt(id, leaseId, outcome);
  }
  pruneWebhookDeliveries(before: string) {
    return this.part("webhooks").pruneWebhookDeliveries(before);
  }
  webhookCursor() {
    return this.part("webhooks").webhookCursor();
  }
  moveWebhookCursor(from: number, to: number) {
    return this.part("webhooks").moveWebhookCursor(from, to);
  }

  // ---- task dependencies (SQL in dependency-store.ts)

  markParent(id: string) {
    return this.part("deps").markParent(id);
  }

  insertTaskDeps(childId: string, parentIds: readonly string[]) {
    return this.part("deps").insertTaskDeps(childId, parentIds);
  }
  queueReadyChildren(parentId: string, at: string) {
    return this.part("deps").queueReadyChildren(parentId, at);
  }
  listChildren(parentId: string) {
    return this.part("deps").listChildren(parentId);
  }
  listParentStates(childIds: readonly string[]) {
    return this.part("deps").listParentStates(childIds);
  }
}
