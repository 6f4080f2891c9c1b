// The embedded store: one SQLite file through better-sqlite3 (WAL, busy timeout,
// foreign keys). Statements are synchronous; an async gate serializes transactions
// so an awaiting transaction never interleaves with other writers.
//
// Group commit: the writes issued in one event-loop turn share one SQLite transaction,
// committed at the end of the turn (setImmediate), and each call resolves only after
// that commit. A commit costs far more than a statement (WAL frames per transaction),
// so concurrent callers (8 claiming workers) pay for one commit instead of eight, and
// nothing is acknowledged before it is durable. An explicit transaction() joins the
// same batch as a SAVEPOINT (rolled back alone when its function throws) while it
// holds the gate; the batch is never committed in the middle of one.
import Database from "better-sqlite3";
import { EpError } from "../../../common/errors.js";
import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { mixInAiStore, type AiStore } from "../ai-store.js";
import { mixInNodeStateStore, type NodeStateStore } from "../node-state-store.js";
import { mixInSecretStore, type SecretStore } from "../secret-store.js";
import { loadMigrations } from "../migrations.js";
import { nodeDomainsText } from "../rows.js";
import { JSON_TASK_FIELDS, TASK_COLUMNS, TASK_INSERT_COLUMNS, taskInsertValues, toAgent, toDomain, toEvent, toMission, toNode, toSigningKey, toTask, toTicket, toToken, type Row } from "../rows.js";
import type {
  AgentRow,
  Claimant,
  DomainRow,
  EventQuery,
  EventRow,
  MissionRow,
  NewEvent,
  NodeRow,
  SigningKeyRow,
  Store,
  TaskExpectation,
  TaskPatch,
  TaskQuery,
  TaskRow,
  TicketRow,
  TokenRow,
} from "../store.js";

const INSERT_TASK_SQL = `INSERT INTO tasks (${TASK_INSERT_COLUMNS}, seq) VALUES (${TASK_INSERT_COLUMNS.split(",").map(() => "?").join(", ")}, ?)`;

export interface SqliteStoreOptions {
  /** File path, or ":memory:". */
  path: string;
  /** PRAGMA synchronous: NORMAL survives a process crash; FULL also a power loss. */
  synchronous?: "NORMAL" | "FULL";
}

class Gate {
  private held: Promise<void> | undefined;

  get busy(): boolean {
    return this.held !== undefined;
  }

  async wait(): Promise<void> {
    while (this.held) await this.held;
  }

  async hold<T>(fn: () => Promise<T>): Promise<T> {
    // check and take in the same synchronous step, or two waiters woken together both enter
    while (this.held) await this.held;
    let release!: () => void;
    this.held = new Promise((r) => (release = r));
    try {
      return await fn();
    } finally {
      this.held = undefined;
      release();
    }
  }
}

/** Maps constraint violations to the same EpErrors the PostgreSQL store throws. */
function constraintError(err: unknown, table: string): unknown {
  const code = typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : "";
  const detail = err instanceof Error ? err.message : String(err);
  if (code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "SQLITE_CONSTRAINT_UNIQUE") {
    return new EpError("already_exists", `a row with that key exists already in ${table}`, { table, detail });
  }
  if (code === "SQLITE_CONSTRAINT_FOREIGNKEY") return new EpError("not_found", `a row referenced by this ${table} row does not exist`, { table, detail });
  return err;
}

const LOCK_WAIT_MS = 5000;

function isBusy(err: unknown): boolean {
  return typeof err === "object" && err !== null && "code" in err && String((err as { code: unknown }).code).startsWith("SQLITE_BUSY");
}

/** Waits a little for another connection to release the write lock, up to LOCK_WAIT_MS in all. */
async function lockBackoff(attempt: number, started: number): Promise<void> {
  if (Date.now() - started > LOCK_WAIT_MS) {
    throw new EpError("unavailable", `the SQLite database stayed locked by another connection for ${LOCK_WAIT_MS / 1000} s`);
  }
  if (attempt < 3) await new Promise((r) => setImmediate(r));
  else await new Promise((r) => setTimeout(r, Math.min(20, attempt - 2)));
}

/** The open group-commit transaction: the calls that wrote in it wait for `done`. */
interface Batch {
  done: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
  /** the end of the turn came while a transaction held the gate: commit when it ends */
  due: boolean;
}

interface Shared {
  db: Database.Database;
  gate: Gate;
  batch: Batch | undefined;
  nextSeq: number;
  stmts: Map<string, Database.Statement>;
  taskStmts: Map<string, { stmt: Database.Statement; ix: TaskColumnIndex }>;
}

type TaskColumnIndex = Record<(typeof TASK_ROW_COLUMNS)[number], number>;
const TASK_ROW_COLUMNS = [
  "id", "domain_id", "mission_id", "kind", "title", "description", "status", "claim_policy", "priority", "capabilities",
  "assignee_agent_id", "attempts", "max_attempts", "runtime", "input", "result", "claimed_by", "lease_expires_ms",
  "parent_task_id", "created_at", "updated_at",
] as const;

function taskFromValues(v: unknown[], ix: TaskColumnIndex): TaskRow {
  return toTask({
    id: v[ix.id],
    domain_id: v[ix.domain_id],
    mission_id: v[ix.mission_id],
    kind: v[ix.kind],
    title: v[ix.title],
    description: v[ix.description],
    status: v[ix.status],
    claim_policy: v[ix.claim_policy],
    priority: v[ix.priority],
    capabilities: v[ix.capabilities],
    assignee_agent_id: v[ix.assignee_agent_id],
    attempts: v[ix.attempts],
    max_attempts: v[ix.max_attempts],
    runtime: v[ix.runtime],
    input: v[ix.input],
    result: v[ix.result],
    claimed_by: v[ix.claimed_by],
    lease_expires_ms: v[ix.lease_expires_ms],
    parent_task_id: v[ix.parent_task_id],
    created_at: v[ix.created_at],
    updated_at: v[ix.updated_at],
  });
}

// The AiStore methods (tower/store/ai-store.ts) run their shared SQL through aiQuery.
export interface SqliteStore extends AiStore, SecretStore, NodeStateStore {}

export class SqliteStore implements Store {
  readonly dialect = "sqlite" as const;

  private constructor(
    private readonly shared: Shared,
    private readonly inTransaction: boolean,
  ) {}

  static open(opts: SqliteStoreOptions): SqliteStore {
    if (opts.path !== ":memory:") {
      mkdirSync(dirname(opts.path), { recursive: true, mode: 0o700 });
      // 0600 whatever the directory or umask (EP_DATABASE_URL may point into a shared folder):
      // the file is made before SQLite opens it, and SQLite gives -wal and -shm the mode of the
      // database file. An existing install's files are narrowed too.
      closeSync(openSync(opts.path, "a", 0o600));
      for (const f of [opts.path, `${opts.path}-wal`, `${opts.path}-shm`]) {
        try {
          chmodSync(f, 0o600);
        } catch {
          // -wal and -shm exist only while a connection is open
        }
      }
    }
    const db = new Database(opts.path);
    db.pragma("journal_mode = WAL");
    db.pragma(`synchronous = ${opts.synchronous ?? "NORMAL"}`);
    // No synchronous busy wait: it would freeze the event loop (and, with a second
    // connection in the same process, deadlock it). Lock waits are async, see begin().
    db.pragma("busy_timeout = 0");
    db.pragma("foreign_keys = ON");
    // deleted and overwritten content is zeroed where that costs no extra I/O (a re-sealed
    // signing key leaves no clear copy in a free page; tests/at-rest.test.ts)
    db.pragma("secure_delete = FAST");
    // 32 MiB of page cache (default 2 MiB): the queue's pages and indexes stay in memory.
    db.pragma("cache_size = -32768");
    return new SqliteStore({ db, gate: new Gate(), batch: undefined, nextSeq: 1, stmts: new Map(), taskStmts: new Map() }, false);
  }

  get db(): Database.Database {
    return this.shared.db;
  }

  private stmt(sql: string): Database.Statement {
    let s = this.shared.stmts.get(sql);
    if (!s) {
      s = this.shared.db.prepare(sql);
      this.shared.stmts.set(sql, s);
    }
    return s;
  }

  /**
   * Runs a statement returning task rows, read as arrays: building a 22-property
   * object per row inside the binding costs more than the statement itself on the
   * claim path, so the row is assembled here from the column positions.
   */
  private taskRows(sql: string, args: readonly unknown[]): TaskRow[] {
    let q = this.shared.taskStmts.get(sql);
    if (!q) {
      const stmt = this.shared.db.prepare(sql).raw(true);
      const ix: Record<string, number> = {};
      stmt.columns().forEach((c, i) => (ix[c.name] = i));
      q = { stmt, ix: ix as TaskColumnIndex };
      this.shared.taskStmts.set(sql, q);
    }
    const { stmt, ix } = q;
    return (stmt.all(...args) as unknown[][]).map((v) => taskFromValues(v, ix));
  }

  /** Outside a transaction, waits until no transaction holds the connection. */
  private async ready(): Promise<void> {
    if (!this.inTransaction) await this.shared.gate.wait();
  }

  /**
   * Runs one call's statements. In a transaction they simply run. Otherwise a write
   * joins (or opens) this turn's group-commit batch and resolves after its COMMIT; a
   * read runs at once, and if it ran inside an open batch it also waits for that
   * commit, so no caller ever sees a write that is not durable yet.
   */
  private async run<T>(write: boolean, fn: () => T): Promise<Awaited<T>> {
    if (this.inTransaction) return await fn();
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      // Re-checked right before fn runs, in the same synchronous step: a transaction that
      // took the gate between a wake-up and this line must not see our statements.
      while (this.shared.gate.busy) await this.shared.gate.wait();
      if (write && !this.liveBatch() && !this.tryBegin()) {
        await lockBackoff(attempt, started); // another connection holds the write lock
        continue;
      }
      const batch = write ? this.openBatch() : this.liveBatch();
      let out: T;
      try {
        out = fn();
      } catch (err) {
        // A read outside any transaction can meet a lock in rare WAL states (recovery): retry it.
        if (!batch && isBusy(err)) {
          await lockBackoff(attempt, started);
          continue;
        }
        throw err;
      }
      if (batch) {
        if (!this.shared.db.inTransaction) this.abortBatch(batch, new Error("SQLite rolled back the group-commit transaction"));
        await batch.done;
      }
      return await out;
    }
  }

  private liveBatch(): Batch | undefined {
    const batch = this.shared.batch;
    // SQLite rolls a transaction back by itself on some errors (disk full, I/O): fail its writers.
    if (batch && !this.shared.db.inTransaction) this.abortBatch(batch, new Error("SQLite rolled back the group-commit transaction"));
    return this.shared.batch;
  }

  /** BEGIN IMMEDIATE without waiting: false when another connection holds the write lock. */
  private tryBegin(): boolean {
    try {
      this.shared.db.exec("BEGIN IMMEDIATE");
      return true;
    } catch (err) {
      if (isBusy(err)) return false;
      throw err;
    }
  }

  /** Joins this turn's batch, or opens one on a transaction run() has just begun. */
  private openBatch(): Batch {
    const live = this.liveBatch();
    if (live) return live;
    if (!this.shared.db.inTransaction) this.shared.db.exec("BEGIN IMMEDIATE");
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    done.catch(() => {}); // each writer awaits it; this only keeps a failed batch from being "unhandled"
    const batch: Batch = { done, resolve, reject, due: false };
    this.shared.batch = batch;
    setImmediate(() => {
      // a transaction (a SAVEPOINT in this batch) is still running: it commits when it ends
      if (this.shared.gate.busy) batch.due = true;
      else this.commitBatch(batch);
    });
    return batch;
  }

  /** Commits the open batch now (before an explicit transaction, on close, or at the end of the turn). */
  private commitBatch(batch = this.shared.batch): void {
    if (!batch || this.shared.batch !== batch) return;
    this.shared.batch = undefined;
    const db = this.shared.db;
    try {
      db.exec("COMMIT");
      batch.resolve();
    } catch (err) {
      if (db.inTransaction) db.exec("ROLLBACK");
      batch.reject(err);
    }
  }

  private abortBatch(batch: Batch, err: unknown): void {
    if (this.shared.batch !== batch) return;
    this.shared.batch = undefined;
    if (this.shared.db.inTransaction) this.shared.db.exec("ROLLBACK");
    batch.reject(err);
  }

  async migrate(): Promise<void> {
    await this.ready();
    this.commitBatch();
    const db = this.shared.db;
    // Another process may be migrating the same file: take the write lock (waiting
    // asynchronously), then apply what is still missing under it.
    const started = Date.now();
    for (let attempt = 0; !this.tryBegin(); attempt++) await lockBackoff(attempt, started);
    try {
      db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)");
      const applied = new Set((db.prepare("SELECT version FROM schema_migrations").all() as Row[]).map((r) => r.version as number));
      for (const m of loadMigrations("sqlite")) {
        if (applied.has(m.version)) continue;
        db.exec(m.sql);
        db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(m.version, m.name, new Date().toISOString());
      }
      db.exec("COMMIT");
    } catch (err) {
      if (db.inTransaction) db.exec("ROLLBACK");
      throw err;
    }
    const max = db.prepare("SELECT COALESCE(MAX(seq), 0) AS s FROM tasks").get() as Row;
    this.shared.nextSeq = Number(max.s) + 1;
  }

  async close(): Promise<void> {
    await this.shared.gate.wait();
    this.commitBatch();
    if (this.shared.db.open) this.shared.db.close();
  }

  async transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    if (this.inTransaction) return fn(this);
    let batch!: Batch;
    let failure: { err: unknown } | undefined;
    const out = await this.shared.gate.hold(async () => {
      const db = this.shared.db;
      const started = Date.now();
      for (let attempt = 0; !this.liveBatch() && !this.tryBegin(); attempt++) await lockBackoff(attempt, started);
      batch = this.openBatch();
      db.exec("SAVEPOINT ep_tx");
      const tx = new SqliteStore(this.shared, true);
      const seqBefore = this.shared.nextSeq;
      try {
        const value = await fn(tx);
        db.exec("RELEASE ep_tx");
        return value;
      } catch (err) {
        failure = { err };
        this.shared.nextSeq = Math.max(seqBefore, this.shared.nextSeq);
        if (db.inTransaction) {
          db.exec("ROLLBACK TO ep_tx");
          db.exec("RELEASE ep_tx");
        } else {
          // SQLite rolled the whole batch back by itself (disk full, I/O): its other writers fail too
          this.abortBatch(batch, err);
        }
        return undefined as T;
      } finally {
        if (batch.due) this.commitBatch(batch);
      }
    });
    if (failure) {
      // what fn saw was the batch's uncommitted state: answer once that state is settled either way
      await batch.done.catch(() => {});
      throw failure.err;
    }
    await batch.done;
    return out;
  }

  // ---- domains

  async insertDomain(row: DomainRow): Promise<void> {
    return this.run(true, () => {
      try {
        this.stmt("INSERT INTO domains (id, name, created_at) VALUES (?, ?, ?)").run(row.id, row.name, row.createdAt);
      } catch (err) {
        throw constraintError(err, "domains");
      }
    });
  }

  async getDomain(id: string): Promise<DomainRow | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT * FROM domains WHERE id = ?").get(id) as Row | undefined;
      return r && toDomain(r);
    });
  }

  async getDomainByName(name: string): Promise<DomainRow | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT * FROM domains WHERE name = ?").get(name) as Row | undefined;
      return r && toDomain(r);
    });
  }

  async listDomains(): Promise<DomainRow[]> {
    return this.run(false, () => {
      return (this.stmt("SELECT * FROM domains ORDER BY created_at, id").all() as Row[]).map(toDomain);
    });
  }

  // ---- missions

  async insertMission(row: MissionRow): Promise<void> {
    return this.run(true, () => {
      try {
        this.stmt(
          "INSERT INTO missions (id, domain_id, title, description, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ).run(row.id, row.domainId, row.title, row.description, row.status, row.createdAt, row.updatedAt);
      } catch (err) {
        throw constraintError(err, "missions");
      }
    });
  }

  async getMission(id: string): Promise<MissionRow | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT * FROM missions WHERE id = ?").get(id) as Row | undefined;
      return r && toMission(r);
    });
  }

  async listMissions(domainId?: string): Promise<MissionRow[]> {
    return this.run(false, () => {
      const rows = domainId
        ? this.stmt("SELECT * FROM missions WHERE domain_id = ? ORDER BY created_at, id").all(domainId)
        : this.stmt("SELECT * FROM missions ORDER BY created_at, id").all();
      return (rows as Row[]).map(toMission);
    });
  }

  async updateMission(id: string, patch: Partial<Pick<MissionRow, "title" | "description" | "status" | "updatedAt">>): Promise<MissionRow | undefined> {
    return this.run(true, () => {
      const cols: Record<string, string> = { title: "title", description: "description", status: "status", updatedAt: "updated_at" };
      const sets: string[] = [];
      const args: unknown[] = [];
      for (const [k, v] of Object.entries(patch)) {
        if (v === undefined) continue;
        sets.push(`${cols[k]} = ?`);
        args.push(v);
      }
      if (sets.length) this.shared.db.prepare(`UPDATE missions SET ${sets.join(", ")} WHERE id = ?`).run(...args, id);
      return this.getMission(id);
    });
  }

  // ---- tasks

  async insertTask(row: TaskRow): Promise<void> {
    return this.run(true, () => {
      try {
        const seq = this.shared.nextSeq++;
        this.stmt(INSERT_TASK_SQL).run(...taskInsertValues(row), seq);
      } catch (err) {
        throw constraintError(err, "tasks");
      }
    });
  }

  async getTask(id: string): Promise<TaskRow | undefined> {
    return this.run(false, () => {
      return this.taskRows("SELECT * FROM tasks WHERE id = ?", [id])[0];
    });
  }

  async listTasks(q: TaskQuery): Promise<TaskRow[]> {
    return this.run(false, () => {
      const where: string[] = [];
      const args: unknown[] = [];
      const add = (col: string, v: string | undefined) => {
        if (v === undefined || v === "") return;
        where.push(`${col} = ?`);
        args.push(v);
      };
      add("mission_id", q.missionId);
      add("domain_id", q.domainId);
      if (q.domainIds) {
        where.push(q.domainIds.length ? `domain_id IN (${q.domainIds.map(() => "?").join(", ")})` : "0");
        args.push(...q.domainIds);
      }
      add("kind", q.kind);
      add("status", q.status);
      add("parent_task_id", q.parentTaskId);
      const sql = `SELECT * FROM tasks ${where.length ? "WHERE " + where.join(" AND ") : ""} ORDER BY seq LIMIT ?`;
      return this.taskRows(sql, [...args, q.limit && q.limit > 0 ? q.limit : -1]);
    });
  }

  async updateTask(id: string, patch: TaskPatch, expect?: TaskExpectation): Promise<TaskRow | undefined> {
    return this.run(true, () => {
      const sets: string[] = [];
      const args: unknown[] = [];
      for (const [k, v] of Object.entries(patch) as [keyof TaskPatch, unknown][]) {
        if (v === undefined) continue;
        sets.push(`${TASK_COLUMNS[k]} = ?`);
        args.push(JSON_TASK_FIELDS.has(k) && v !== null ? JSON.stringify(v) : v);
      }
      const where = ["id = ?"];
      const whereArgs: unknown[] = [id];
      if (expect?.status) {
        where.push(`status IN (${expect.status.map(() => "?").join(", ")})`);
        whereArgs.push(...expect.status);
      }
      if (expect?.claimedBy !== undefined) {
        where.push("claimed_by = ?");
        whereArgs.push(expect.claimedBy);
      }
      if (expect?.attempts !== undefined) {
        where.push("attempts = ?");
        whereArgs.push(expect.attempts);
      }
      if (expect?.leaseAfterMs !== undefined) {
        where.push("(lease_expires_ms IS NULL OR lease_expires_ms > ?)");
        whereArgs.push(expect.leaseAfterMs);
      }
      if (!sets.length) sets.push("id = id");
      return this.taskRows(`UPDATE tasks SET ${sets.join(", ")} WHERE ${where.join(" AND ")} RETURNING *`, [...args, ...whereArgs])[0];
    });
  }

  async deleteTask(id: string): Promise<boolean> {
    return this.run(true, () => {
      return this.stmt("DELETE FROM tasks WHERE id = ?").run(id).changes > 0;
    });
  }

  async claimTask(c: Claimant, nowMs: number, leaseMs: number): Promise<TaskRow | undefined> {
    return this.run(true, () => {
      return this.taskRows(
        `UPDATE tasks SET status = 'claimed', claimed_by = @agent, attempts = attempts + 1,
           lease_expires_ms = @lease, updated_at = @now
         WHERE rowid = (
           SELECT t.rowid FROM tasks t
           WHERE t.domain_id = @domain AND t.status = 'queued' AND t.kind = 'claimable'
             AND (t.runtime = '' OR t.runtime = @runtime)
             AND ((t.claim_policy = 'assigned' AND t.assignee_agent_id = @agent)
               OR (t.claim_policy = 'first_claim' AND (t.capabilities = '[]' OR NOT EXISTS (
                     SELECT 1 FROM json_each(t.capabilities) c WHERE c.value NOT IN (SELECT value FROM json_each(@caps))))))
           ORDER BY t.priority DESC, t.seq ASC LIMIT 1)
         RETURNING *`,
        [
          {
            agent: c.agentId,
            domain: c.domainId,
            runtime: c.runtime,
            caps: JSON.stringify(c.capabilities),
            lease: nowMs + leaseMs,
            now: new Date(nowMs).toISOString(),
          },
        ],
      )[0];
    });
  }

  async listExpiredLeases(nowMs: number, limit: number): Promise<TaskRow[]> {
    return this.run(false, () => {
      return this.taskRows("SELECT * FROM tasks WHERE status IN ('claimed', 'running') AND lease_expires_ms <= ? ORDER BY lease_expires_ms LIMIT ?", [
        nowMs,
        limit,
      ]);
    });
  }

  // ---- nodes

  async insertNode(row: NodeRow): Promise<void> {
    return this.run(true, () => {
      try {
        this.stmt("INSERT INTO nodes (id, hostname, status, last_seen_at, created_at, domains) VALUES (?, ?, ?, ?, ?, ?)").run(
          row.id,
          row.hostname,
          row.status,
          row.lastSeenAt,
          row.createdAt,
          nodeDomainsText(row.domains),
        );
      } catch (err) {
        throw constraintError(err, "nodes");
      }
    });
  }

  async getNode(id: string): Promise<NodeRow | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT * FROM nodes WHERE id = ?").get(id) as Row | undefined;
      return r && toNode(r);
    });
  }

  async listNodes(): Promise<NodeRow[]> {
    return this.run(false, () => {
      return (this.stmt("SELECT * FROM nodes ORDER BY created_at, id").all() as Row[]).map(toNode);
    });
  }

  async updateNode(id: string, patch: Partial<Pick<NodeRow, "hostname" | "status" | "lastSeenAt" | "domains">>): Promise<NodeRow | undefined> {
    return this.run(true, () => {
      const cols: Record<string, string> = { hostname: "hostname", status: "status", lastSeenAt: "last_seen_at", domains: "domains" };
      const sets = Object.entries({ ...patch, domains: patch.domains && nodeDomainsText(patch.domains) }).filter(([, v]) => v !== undefined);
      if (sets.length) {
        this.shared.db.prepare(`UPDATE nodes SET ${sets.map(([k]) => `${cols[k]} = ?`).join(", ")} WHERE id = ?`).run(...sets.map(([, v]) => v), id);
      }
      return this.getNode(id);
    });
  }

  // ---- agents

  async insertAgent(row: AgentRow): Promise<void> {
    return this.run(true, () => {
      try {
        this.stmt(
          "INSERT INTO agents (id, domain_id, node_id, name, runtime, capabilities, state, last_seen_at, created_at, supervised) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ).run(row.id, row.domainId, row.nodeId, row.name, row.runtime, JSON.stringify(row.capabilities), row.state, row.lastSeenAt, row.createdAt, row.supervised ? 1 : 0);
      } catch (err) {
        throw constraintError(err, "agents");
      }
    });
  }

  async getAgent(id: string): Promise<AgentRow | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT * FROM agents WHERE id = ?").get(id) as Row | undefined;
      return r && toAgent(r);
    });
  }

  async listAgents(q: { domainId?: string; nodeId?: string }): Promise<AgentRow[]> {
    return this.run(false, () => {
      const where: string[] = [];
      const args: unknown[] = [];
      if (q.domainId) {
        where.push("domain_id = ?");
        args.push(q.domainId);
      }
      if (q.nodeId) {
        where.push("node_id = ?");
        args.push(q.nodeId);
      }
      return (this.stmt(`SELECT * FROM agents ${where.length ? "WHERE " + where.join(" AND ") : ""} ORDER BY created_at, id`).all(...args) as Row[]).map(
        toAgent,
      );
    });
  }

  async updateAgent(id: string, patch: Partial<Pick<AgentRow, "state" | "lastSeenAt" | "name" | "capabilities" | "runtime" | "supervised">>): Promise<AgentRow | undefined> {
    return this.run(true, () => {
      const cols: Record<string, string> = { state: "state", lastSeenAt: "last_seen_at", name: "name", capabilities: "capabilities", runtime: "runtime", supervised: "supervised" };
      const sets = Object.entries(patch).filter(([, v]) => v !== undefined);
      if (sets.length) {
        this.shared.db
          .prepare(`UPDATE agents SET ${sets.map(([k]) => `${cols[k]} = ?`).join(", ")} WHERE id = ?`)
          .run(...sets.map(([k, v]) => (k === "capabilities" ? JSON.stringify(v) : typeof v === "boolean" ? (v ? 1 : 0) : v)), id);
      }
      return this.getAgent(id);
    });
  }

  // ---- tokens, keys, tickets

  async insertToken(row: TokenRow): Promise<void> {
    return this.run(true, () => {
      try {
        this.stmt(
          "INSERT INTO tokens (id, name, role, domain_id, hash, expires_at, created_at, revoked_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ).run(row.id, row.name, row.role, row.domainId, row.hash, row.expiresAt, row.createdAt, row.revokedAt, row.lastUsedAt);
      } catch (err) {
        throw constraintError(err, "tokens");
      }
    });
  }

  async getToken(id: string): Promise<TokenRow | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT * FROM tokens WHERE id = ?").get(id) as Row | undefined;
      return r && toToken(r);
    });
  }

  async getTokenByHash(hash: string): Promise<TokenRow | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT * FROM tokens WHERE hash = ?").get(hash) as Row | undefined;
      return r && toToken(r);
    });
  }

  async listTokens(): Promise<TokenRow[]> {
    return this.run(false, () => {
      return (this.stmt("SELECT * FROM tokens ORDER BY created_at, id").all() as Row[]).map(toToken);
    });
  }

  async updateToken(id: string, patch: Partial<Pick<TokenRow, "revokedAt" | "lastUsedAt">>): Promise<TokenRow | undefined> {
    return this.run(true, () => {
      if (patch.revokedAt !== undefined) this.stmt("UPDATE tokens SET revoked_at = ? WHERE id = ?").run(patch.revokedAt, id);
      if (patch.lastUsedAt !== undefined) this.stmt("UPDATE tokens SET last_used_at = ? WHERE id = ?").run(patch.lastUsedAt, id);
      return this.getToken(id);
    });
  }

  async insertSigningKey(row: SigningKeyRow): Promise<void> {
    return this.run(true, () => {
      try {
        this.stmt("INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, ?, ?)").run(
          row.kid,
          row.alg,
          row.privateJwk,
          row.publicJwk,
          row.createdAt,
          row.retiredAt,
        );
      } catch (err) {
        throw constraintError(err, "signing_keys");
      }
    });
  }

  async listSigningKeys(): Promise<SigningKeyRow[]> {
    return this.run(false, () => {
      return (this.stmt("SELECT * FROM signing_keys ORDER BY created_at, kid").all() as Row[]).map(toSigningKey);
    });
  }

  async updateSigningKeyPrivate(kid: string, privateJwk: string): Promise<void> {
    await this.run(true, () => {
      this.stmt("UPDATE signing_keys SET private_jwk = ? WHERE kid = ?").run(privateJwk, kid);
    });
    // the replaced value may still sit in old WAL frames: checkpoint and empty the WAL
    if (!this.inTransaction) this.shared.db.pragma("wal_checkpoint(TRUNCATE)");
  }

  async retireSigningKey(kid: string, at: string): Promise<void> {
    return this.run(true, () => {
      this.stmt("UPDATE signing_keys SET retired_at = ? WHERE kid = ?").run(at, kid);
    });
  }

  async insertTicket(row: TicketRow): Promise<void> {
    return this.run(true, () => {
      try {
        this.stmt("INSERT INTO tickets (hash, purpose, subject, role, agent_id, expires_ms, scope) VALUES (?, ?, ?, ?, ?, ?, ?)").run(
          row.hash,
          row.purpose,
          row.subject,
          row.role,
          row.agentId,
          row.expiresMs,
          row.scope,
        );
      } catch (err) {
        throw constraintError(err, "tickets");
      }
    });
  }

  async consumeTicket(hash: string, nowMs: number): Promise<TicketRow | undefined> {
    return this.run(true, () => {
      const r = this.stmt("UPDATE tickets SET used = 1 WHERE hash = ? AND used = 0 AND expires_ms > ? RETURNING *").get(hash, nowMs) as Row | undefined;
      this.stmt("DELETE FROM tickets WHERE expires_ms <= ?").run(nowMs - 3_600_000);
      return r && toTicket(r);
    });
  }

  async findTicket(hash: string, nowMs: number): Promise<TicketRow | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT * FROM tickets WHERE hash = ? AND used = 0 AND expires_ms > ?").get(hash, nowMs) as Row | undefined;
      return r && toTicket(r);
    });
  }

  // ---- events

  async appendEvents(events: readonly NewEvent[], createdAt: string): Promise<EventRow[]> {
    return this.run(true, () => {
      const insert = this.stmt(
        `INSERT INTO events (type, name, domain_id, mission_id, agent_id, task_id, session_id, status, payload, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      );
      const run = () =>
        events.map((e): EventRow => {
          const payload = e.payload ?? {};
          const r = insert.get(
            e.type,
            e.name,
            e.domainId ?? "",
            e.missionId ?? "",
            e.agentId ?? "",
            e.taskId ?? "",
            e.sessionId ?? "",
            e.status ?? "",
            JSON.stringify(payload),
            createdAt,
          ) as Row;
          return {
            id: Number(r.id),
            type: e.type,
            name: e.name,
            domainId: e.domainId ?? "",
            missionId: e.missionId ?? "",
            agentId: e.agentId ?? "",
            taskId: e.taskId ?? "",
            sessionId: e.sessionId ?? "",
            status: e.status ?? "",
            payload,
            createdAt,
          };
        });
      return this.inTransaction || events.length === 1 ? run() : this.shared.db.transaction(run)();
    });
  }

  async listEvents(q: EventQuery): Promise<EventRow[]> {
    return this.run(false, () => {
      const where = ["id > ?"];
      const args: unknown[] = [q.afterId ?? 0];
      // one task's progress: the literal lets SQLite use the partial index events_task_progress
      if (q.taskId && q.types?.length === 1 && q.types[0] === "progress") where.push("type = 'progress'");
      else if (q.types?.length) {
        where.push(`type IN (${q.types.map(() => "?").join(", ")})`);
        args.push(...q.types);
      }
      for (const [col, v] of [
        ["domain_id", q.domainId],
        ["mission_id", q.missionId],
        ["agent_id", q.agentId],
        ["session_id", q.sessionId],
        ["task_id", q.taskId],
      ] as const) {
        if (v) {
          where.push(`${col} = ?`);
          args.push(v);
        }
      }
      if (q.domainIds) {
        where.push(q.domainIds.length ? `domain_id IN (${q.domainIds.map(() => "?").join(", ")})` : "0");
        args.push(...q.domainIds);
      }
      const sql = `SELECT * FROM events WHERE ${where.join(" AND ")} ORDER BY id LIMIT ?`;
      return (this.stmt(sql).all(...args, q.limit && q.limit > 0 ? q.limit : 1000) as Row[]).map(toEvent);
    });
  }

  async lastEventId(): Promise<number> {
    return this.run(false, () => {
      return Number((this.stmt("SELECT COALESCE(MAX(id), 0) AS id FROM events").get() as Row).id);
    });
  }

  async pruneEvents(beforeId: number): Promise<number> {
    return this.run(true, () => {
      // The newest event always stays, so ids never restart after pruning everything.
      return this.stmt("DELETE FROM events WHERE id < ? AND id < (SELECT MAX(id) FROM events)").run(beforeId).changes;
    });
  }

  async getMeta(key: string): Promise<string | undefined> {
    return this.run(false, () => {
      const r = this.stmt("SELECT value FROM meta WHERE key = ?").get(key) as Row | undefined;
      return r?.value as string | undefined;
    });
  }

  async setMeta(key: string, value: string): Promise<void> {
    return this.run(true, () => {
      this.stmt("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(key, value);
    });
  }

  // ---- AI sessions, pending actions, docs, artifacts (shared SQL in ../ai-store.ts)

  async aiQuery(sql: string, args: readonly unknown[]): Promise<Row[]> {
    const s = this.stmt(sql);
    const write = !s.reader || /^\s*(INSERT|UPDATE|DELETE)/i.test(sql);
    return this.run(write, () => {
      try {
        if (s.reader) return s.all(...args) as Row[];
        s.run(...args);
        return [];
      } catch (err) {
        throw constraintError(err, /(?:INTO|UPDATE|FROM)\s+(\w+)/i.exec(sql)?.[1] ?? "ai_sessions");
      }
    });
  }
}

mixInAiStore(SqliteStore.prototype);
mixInSecretStore(SqliteStore.prototype);
mixInNodeStateStore(SqliteStore.prototype);
