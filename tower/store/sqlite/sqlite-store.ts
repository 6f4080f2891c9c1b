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
import { chmodSync, closeSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { SqlStore } from "../sql-store.js";
import { constraintError, Gate, isBusy, lockBackoff, taskFromValues, type TaskColumnIndex } from "./sqlite-support.js";
import { loadMigrations } from "../migrations.js";
import { QUEUE_READY_CHILDREN_SQL } from "../dependency-store.js";
import { eventRowOf, TASK_INSERT_COLUMNS, taskInsertValues, toEvent, type Row } from "../rows.js";
import type {
  Claimant,
  EventQuery,
  EventRow,
  NewEvent,
  Store,
  TaskExpectation,
  TaskPatch,
  TaskQuery,
  TaskRow,
} from "../store.js";

const INSERT_TASK_SQL = `INSERT INTO tasks (${TASK_INSERT_COLUMNS}, seq) VALUES (${TASK_INSERT_COLUMNS.split(",")
  .map(() => "?")
  .join(", ")}, ?)`;

export interface SqliteStoreOptions {
  /** File path, or ":memory:". */
  path: string;
  /** PRAGMA synchronous: NORMAL survives a process crash; FULL also a power loss. */
  synchronous?: "NORMAL" | "FULL";
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

export class SqliteStore extends SqlStore implements Store {
  readonly dialect = "sqlite" as const;

  private constructor(
    private readonly shared: Shared,
    private readonly inTransaction: boolean,
  ) {
    super();
  }

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
    return new SqliteStore(
      { db, gate: new Gate(), batch: undefined, nextSeq: 1, stmts: new Map(), taskStmts: new Map() },
      false,
    );
  }

  get db(): Database.Database {
    return this.shared.db;
  }

  /**
   * A transaction-control statement (BEGIN, SAVEPOINT, RELEASE, COMMIT), prepared once: exec()
   * would parse it again on every transaction, and every claim and completion is one.
   */
  private control(sql: string): void {
    this.stmt(sql).run();
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
        if (!this.shared.db.inTransaction)
          this.abortBatch(batch, new Error("SQLite rolled back the group-commit transaction"));
        await batch.done;
      }
      return await out;
    }
  }

  private liveBatch(): Batch | undefined {
    const batch = this.shared.batch;
    // SQLite rolls a transaction back by itself on some errors (disk full, I/O): fail its writers.
    if (batch && !this.shared.db.inTransaction)
      this.abortBatch(batch, new Error("SQLite rolled back the group-commit transaction"));
    return this.shared.batch;
  }

  /** BEGIN IMMEDIATE without waiting: false when another connection holds the write lock. */
  private tryBegin(): boolean {
    try {
      this.control("BEGIN IMMEDIATE");
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
    if (!this.shared.db.inTransaction) this.control("BEGIN IMMEDIATE");
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
      this.control("COMMIT");
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
      db.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER " +
          "PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
      );
      const applied = new Set(
        (db.prepare("SELECT version FROM schema_migrations").all() as Row[]).map((r) => r.version as number),
      );
      for (const m of loadMigrations("sqlite")) {
        if (applied.has(m.version)) continue;
        db.exec(m.sql);
        db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(
          m.version,
          m.name,
          new Date().toISOString(),
        );
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
      this.control("SAVEPOINT ep_tx");
      const tx = new SqliteStore(this.shared, true);
      const seqBefore = this.shared.nextSeq;
      try {
        const value = await fn(tx);
        this.control("RELEASE ep_tx");
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
      await batch.done.catch(() => {}); // fn's own error is thrown below, whatever the batch did
      throw failure.err;
    }
    await batch.done;
    return out;
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

  async queueReadyChildren(parentId: string, at: string): Promise<TaskRow[]> {
    return this.run(true, () =>
      this.taskRows(QUEUE_READY_CHILDREN_SQL, [at, parentId]).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
    );
  }

  async getTask(id: string): Promise<TaskRow | undefined> {
    return this.run(false, () => {
      return this.taskRows("SELECT * FROM tasks WHERE id = ?", [id])[0];
    });
  }

  async listTasks(q: TaskQuery): Promise<TaskRow[]> {
    const { sql, args } = this.taskListSql(q);
    return this.run(false, () => this.taskRows(sql, args));
  }

  async updateTask(id: string, patch: TaskPatch, expect?: TaskExpectation): Promise<TaskRow | undefined> {
    const { sql, args } = this.taskUpdateSql(id, patch, expect);
    return this.run(true, () => this.taskRows(sql, args)[0]);
  }

  async deleteTask(id: string): Promise<boolean> {
    return this.run(true, () => {
      return this.stmt("DELETE FROM tasks WHERE id = ?").run(id).changes > 0;
    });
  }

  async claimTask(c: Claimant, nowMs: number, leaseMs: number): Promise<TaskRow | undefined> {
    return this.run(true, () => {
      return this.taskRows(
        `UPDATE tasks SET status = @status, claimed_by = @agent, attempts = attempts + 1,
           lease_expires_ms = @lease, updated_at = @now, lease_id = @leaseId
         WHERE rowid = (
           SELECT t.rowid FROM tasks t
           WHERE t.domain_id = @domain AND t.status = 'queued' AND t.kind = 'claimable'
             AND (t.runtime = '' OR t.runtime = @runtime)
             AND ((t.claim_policy = 'assigned' AND t.assignee_agent_id = @agent)
               OR (t.claim_policy = 'first_claim' AND (t.capabilities = '[]' OR NOT EXISTS (
                     SELECT 1 FROM json_each(t.capabilities) c
                     WHERE c.value NOT IN (SELECT value FROM json_each(@caps))))))
           ORDER BY t.priority DESC, t.seq ASC LIMIT 1)
         RETURNING *`,
        [
          {
            agent: c.agentId,
            status: c.start ? "running" : "claimed",
            domain: c.domainId,
            runtime: c.runtime,
            caps: JSON.stringify(c.capabilities),
            lease: nowMs + leaseMs,
            now: new Date(nowMs).toISOString(),
            leaseId: c.leaseId,
          },
        ],
      )[0];
    });
  }

  async listExpiredLeases(nowMs: number, limit: number): Promise<TaskRow[]> {
    return this.run(false, () => {
      return this.taskRows(
        "SELECT * FROM tasks WHERE status IN ('claimed', 'running') " +
          "AND lease_expires_ms <= ? ORDER BY lease_expires_ms LIMIT ?",
        [nowMs, limit],
      );
    });
  }

  // ---- signing keys: a re-sealed key leaves no clear copy behind

  override async updateSigningKeyPrivate(kid: string, privateJwk: string): Promise<void> {
    await super.updateSigningKeyPrivate(kid, privateJwk);
    // the replaced value may still sit in old WAL frames: checkpoint and empty the WAL
    if (!this.inTransaction) this.shared.db.pragma("wal_checkpoint(TRUNCATE)");
  }

  // ---- events

  async appendEvents(events: readonly NewEvent[], createdAt: string): Promise<EventRow[]> {
    return this.run(true, () => {
      const insert = this.stmt(
        `INSERT INTO events (type, name, domain_id, mission_id, agent_id, task_id, session_id, status,
           payload, created_at)
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
          return eventRowOf({ ...e, payload }, Number(r.id), createdAt);
        });
      return this.inTransaction || events.length === 1 ? run() : this.shared.db.transaction(run)();
    });
  }

  async listEvents(q: EventQuery): Promise<EventRow[]> {
    const filter = this.eventFilterSql(q);
    const sql = `SELECT * FROM events WHERE ${["id > ?", ...filter.where].join(" AND ")} ORDER BY id LIMIT ?`;
    const args = [q.afterId ?? 0, ...filter.args, q.limit && q.limit > 0 ? q.limit : 1000];
    return this.run(false, () => (this.stmt(sql).all(...args) as Row[]).map(toEvent));
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

  // ---- the shared SQL (../sql-store.ts) runs here

  // getters, not fields: a transaction's store is made per transaction
  protected get byteOrder(): string {
    return ""; // SQLite compares text as bytes (BINARY) already
  }
  protected get noLimit(): number {
    return -1;
  }

  protected inList(col: string, values: readonly string[]): { sql: string; args: unknown[] } {
    return values.length
      ? { sql: `${col} IN (${values.map(() => "?").join(", ")})`, args: [...values] }
      : { sql: "0", args: [] };
  }

  protected query(sql: string, args: readonly unknown[] = []): Promise<Row[]> {
    const s = this.stmt(sql);
    const values = args.map((v) => (typeof v === "boolean" ? (v ? 1 : 0) : v));
    return this.run(!s.readonly, () => {
      if (s.reader) return s.all(...values) as Row[];
      s.run(...values);
      return [];
    });
  }

  protected constraintError(err: unknown, table: string): unknown {
    return constraintError(err, table);
  }
}
