// The scale-out store: PostgreSQL through a `pg` pool, shared by several tower
// replicas. Same interface, same numbered migrations and the same test suite as
// the SQLite store. Claims take the best eligible row with FOR UPDATE SKIP LOCKED,
// task order and event ids come from sequences, migrations run under an advisory
// lock, and LISTEN/NOTIFY helpers carry wake-ups between replicas.
import { userInfo } from "node:os";
import pg from "pg";
import { EpError } from "../../../common/errors.js";
import { dollarPlaceholders, SqlStore } from "../sql-store.js";
import { loadMigrations } from "../migrations.js";
import { EventHorizon, endedBefore, parseSnapshot, type Snapshot } from "./event-horizon.js";
import { TASK_INSERT_COLUMNS, taskInsertValues, toEvent, toTask, type Row } from "../rows.js";
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

const TASK_INSERT_PLACEHOLDERS = TASK_INSERT_COLUMNS.split(",").map((_, i) => `$${i + 1}`).join(", ");

export interface PostgresStoreOptions {
  /** Connections in the pool (default 10). The listener uses one more of its own. */
  max?: number;
  /** Schema holding the tables; created if missing and put first on every connection's search_path. */
  schema?: string;
  /** application_name shown in pg_stat_activity (default "ep-tower"). */
  applicationName?: string;
  /** First listener reconnect delay in ms, doubling up to maxReconnectMs (default 250). */
  reconnectMs?: number;
  /** Longest listener reconnect delay in ms (default 10,000). */
  maxReconnectMs?: number;
}

export interface ListenOptions {
  /**
   * Called after the listener connection was lost and came back. Notifications sent
   * while it was down are gone, so a subscriber catches up from the tables here.
   */
  onReconnect?: () => void;
}

/** NOTIFY payloads must stay below PostgreSQL's 8,000-byte limit. */
export const MAX_NOTIFY_BYTES = 7999;

// Advisory lock class ids (first key of the two-int form); the second key is the schema's hash.
const MIGRATE_LOCK = 0x45500001;
/** Named cluster locks (withClusterLock): the second key hashes the schema and the name. */
const NAMED_LOCK = 0x45500010;
const INT8_OID = 20;
const EVENTS_PER_INSERT = 1000;
const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const CHANNEL = /^[A-Za-z_][A-Za-z0-9_.:-]{0,62}$/;

/** BIGINT columns (seq, lease deadlines, event ids) come back as numbers, not strings. */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary" ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig["getTypeParser"],
};

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * Like libpq: a URL without a user connects as PGUSER, else the operating-system user
 * (pg itself only looks at $USER, which service managers often leave unset).
 */
export function withDefaultUser(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  if (parsed.username) return url;
  let user = process.env.PGUSER || process.env.USER;
  try {
    user ||= userInfo().username;
  } catch {
    return url;
  }
  if (!user) return url;
  parsed.username = encodeURIComponent(user);
  return parsed.toString();
}

function redact(url: string): string {
  return url.replace(/\/\/[^@/]*@/, "//…@");
}

function pgCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;
}

/** Maps constraint violations to the same EpErrors the SQLite store throws. */
function constraintError(err: unknown, table: string): unknown {
  const code = pgCode(err);
  const detail = err instanceof Error ? err.message : String(err);
  if (code === "23505") return new EpError("already_exists", `a row with that key exists already in ${table}`, { table, detail });
  if (code === "23503") return new EpError("not_found", `a row referenced by this ${table} row does not exist`, { table, detail });
  return err;
}

/** One logical transaction inside a group-commit batch. */
interface TxState {
  client: pg.PoolClient;
  batch: Batch;
  /** its SAVEPOINT (none for the batch's first transaction: a failure there rolls the batch back) */
  savepoint?: string;
  /** its first statement went out (with the batch's BEGIN and its SAVEPOINT in the same write) */
  sent: boolean;
  /** appendFinalEvents was called: the transaction is over, its events wait for the batch's COMMIT */
  finalized: boolean;
  /** a statement failed (the PostgreSQL transaction is in error until the savepoint is rolled back) */
  error?: unknown;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (err: unknown) => void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => {}); // its waiters handle the failure; this only keeps it from being "unhandled"
  return { promise, resolve, reject };
}

/**
 * Group commit: the transactions that arrive while a batch is open share its connection
 * and its PostgreSQL transaction, one after another, each in its own SAVEPOINT (rolled
 * back alone when it fails), and each is answered only after the batch's COMMIT. Their
 * events are inserted at that COMMIT, in one statement sent together with it, so the WAL
 * flush and the round trips of BEGIN, event insert and COMMIT are paid once per batch
 * instead of once per transaction. Event ids need no lock: readers stop below an id still
 * being written (event-horizon.ts).
 */
interface Batch {
  client: Promise<pg.PoolClient>;
  /** a transaction runs on the connection */
  busy: boolean;
  /** transactions waiting for their turn; true tells them to join another batch */
  queue: ((reroute: boolean) => void)[];
  /** transactions that joined (a cap keeps the subtransaction count low) */
  members: number;
  savepoints: number;
  /** the last successful transaction's savepoint, released with the next SAVEPOINT */
  unreleased?: string;
  /** BEGIN went out (it travels with the batch's first statement) */
  begun: boolean;
  /** events of finished transactions, inserted at COMMIT */
  events: { events: readonly NewEvent[]; createdAt: string; done: Deferred<EventRow[]> }[];
  /** no new members (committing, or full) */
  closed: boolean;
  /** the connection failed: nothing of the batch commits */
  failed?: { err: unknown };
  commitQueued: boolean;
  done: Deferred<void>;
}

/** Transactions per batch at most (PostgreSQL caches 64 subtransactions per backend). */
const BATCH_MAX = 32;
/**
 * Batches open at once (besides those committing). Four measured no better than one in
 * bench/claim.ts --pg on the 2-core VM (672 vs 732 tasks/s: smaller batches, more round
 * trips, more tower CPU per task), and with two open batches a transaction in each could
 * wait for a row the other holds (PostgreSQL breaks such a cycle after deadlock_timeout by
 * failing one of them), which separate transactions touching one row each never do.
 */
const BATCH_LANES = 1;

interface Shared {
  pool: pg.Pool;
  config: pg.PoolConfig;
  opts: PostgresStoreOptions;
  names: Map<string, string>;
  /** the shared SQL's `?` text → its `$n` text */
  dollar: Map<string, string>;
  listener: Listener | undefined;
  /** the group-commit batches new transactions join (at most BATCH_LANES) */
  open: Batch[];
  /** which event ids are final (see event-horizon.ts) */
  horizon: EventHorizon;
  /** horizon reads run one after another (each builds on the ones before it) */
  horizonTail: Promise<unknown>;
  /** set by announceEvents(): every event insert also NOTIFYs this channel on commit */
  announce?: { channel: string; from: string };
}

export class PostgresStore extends SqlStore implements Store {
  readonly dialect = "postgres" as const;

  private constructor(
    private readonly shared: Shared,
    private readonly client: pg.PoolClient | undefined,
    private readonly tx?: TxState,
  ) {
    super();
  }

  /** Opens a pool on `url` (postgres://…) and checks that the server answers. Call migrate() next. */
  static async connect(url: string, opts: PostgresStoreOptions = {}): Promise<PostgresStore> {
    if (opts.schema !== undefined && !IDENT.test(opts.schema)) {
      throw new EpError("invalid_argument", `schema must be a plain identifier (letters, digits, _), got ${JSON.stringify(opts.schema)}`);
    }
    const config: pg.PoolConfig = {
      connectionString: withDefaultUser(url),
      max: opts.max ?? 10,
      application_name: opts.applicationName ?? "ep-tower",
      types,
      // Pipeline mode: a query goes out as soon as it is issued, without waiting for the answers
      // before it. A batch's BEGIN and a transaction's SAVEPOINT travel with the first statement,
      // the batch's event insert with its COMMIT (answers still come back one per query, in order).
      pipeline: true,
      ...(opts.schema ? { options: `-c search_path=${opts.schema}` } : {}),
    };
    const pool = new pg.Pool(config);
    // An idle pooled connection that dies (server restart) must not crash the tower; the pool
    // replaces it. Said once per connection on stderr (the store has no logger of its own).
    pool.on("error", (err) => console.error(`ep-tower: an idle PostgreSQL connection failed (the pool replaces it): ${err.message}`));
    try {
      if (opts.schema) {
        try {
          await pool.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(opts.schema)}`);
        } catch (err) {
          // Two replicas creating the schema at once: one wins, the other sees a duplicate.
          if (pgCode(err) !== "23505" && pgCode(err) !== "42P06") throw err;
        }
      } else {
        await pool.query("SELECT 1");
      }
    } catch (err) {
      await pool.end().catch(() => {}); // the connect error is the one to report; closing is best effort
      throw new EpError("unavailable", `cannot use PostgreSQL at ${redact(url)}: ${err instanceof Error ? err.message : String(err)}`);
    }
    return new PostgresStore({ pool, config, opts, names: new Map(), dollar: new Map(), listener: undefined, open: [], horizon: new EventHorizon(), horizonTail: Promise.resolve() }, undefined);
  }

  /** The pool, for tools that need raw access (benchmarks, diagnostics). */
  get pool(): pg.Pool {
    return this.shared.pool;
  }

  /** One statement; `prepare` names it so each connection parses and plans it once. */
  private async q(sql: string, args: readonly unknown[] = [], prepare = true): Promise<Row[]> {
    const tx = this.tx;
    if (tx?.finalized) throw new EpError("internal", "a statement after appendFinalEvents: the transaction is over");
    const on = this.client ?? this.shared.pool;
    let name: string | undefined;
    if (prepare) {
      name = this.shared.names.get(sql);
      if (!name) {
        name = `ep_${this.shared.names.size + 1}`;
        this.shared.names.set(sql, name);
      }
    }
    const query = name ? { text: sql, values: args as unknown[], name } : { text: sql, values: args as unknown[] };
    try {
      if (tx && !tx.sent) {
        tx.sent = true;
        return (await withPrefix(tx.client, openingText(tx), () => tx.client.query<Row>(query))).rows;
      }
      return (await on.query<Row>(query)).rows;
    } catch (err) {
      if (tx) tx.error ??= err;
      throw err;
    }
  }

  private async insertRow(table: string, sql: string, args: readonly unknown[]): Promise<void> {
    try {
      await this.q(sql, args);
    } catch (err) {
      throw constraintError(err, table);
    }
  }

  async migrate(): Promise<void> {
    const client = await this.shared.pool.connect();
    let broken = false;
    try {
      // Replicas starting together: the first applies the migrations, the others wait and find them applied.
      await client.query("SELECT pg_advisory_lock($1, hashtext(COALESCE(current_schema(), '')))", [MIGRATE_LOCK]);
      try {
        await client.query("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)");
        const applied = new Set((await client.query<Row>("SELECT version FROM schema_migrations")).rows.map((r) => Number(r.version)));
        for (const m of loadMigrations("postgres")) {
          if (applied.has(m.version)) continue;
          try {
            await client.query("BEGIN");
            await client.query(m.sql);
            await client.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)", [m.version, m.name, new Date().toISOString()]);
            await client.query("COMMIT");
          } catch (err) {
            await client.query("ROLLBACK").catch(() => (broken = true));
            const num = String(m.version).padStart(4, "0");
            throw new EpError("internal", `migration ${num}_${m.name} failed on PostgreSQL: ${err instanceof Error ? err.message : String(err)}`);
          }
        }
      } finally {
        await client.query("SELECT pg_advisory_unlock($1, hashtext(COALESCE(current_schema(), '')))", [MIGRATE_LOCK]).catch(() => (broken = true));
      }
    } finally {
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    if (this.client) return;
    const listener = this.shared.listener;
    this.shared.listener = undefined;
    await listener?.close();
    await this.shared.pool.end();
  }

  async transaction<T>(fn: (tx: Store) => Promise<T>): Promise<T> {
    if (this.client) return fn(this);
    const batch = await this.joinBatch();
    let client: pg.PoolClient;
    try {
      if (batch.failed) throw batch.failed.err;
      client = await batch.client;
    } catch (err) {
      this.leave(batch);
      throw err;
    }
    const state: TxState = { client, batch, finalized: false, sent: false };
    // Sent with the transaction's first statement (see q()). The batch's first transaction
    // needs none: if it fails, the batch so far is only its own work.
    if (batch.savepoints > 0) state.savepoint = `ep_tx_${++batch.savepoints}`;
    else batch.savepoints = 1;
    let out: T;
    try {
      out = await fn(new PostgresStore(this.shared, client, state));
      // A statement failed and fn carried on: PostgreSQL would roll the work back at COMMIT.
      if (state.error && !state.finalized) throw new EpError("internal", `a statement of the transaction failed: ${errorText(state.error)}`);
    } catch (err) {
      if (state.finalized) throw err; // the batch's COMMIT failed; appendFinalEvents has said so
      await this.undo(state);
      throw err;
    }
    if (!state.finalized) {
      if (state.sent && state.savepoint) batch.unreleased = state.savepoint;
      this.leave(batch);
      await batch.done.promise;
    }
    return out;
  }

  /** The open batch if it takes members, else a new one; resolves when it is this transaction's turn. */
  private async joinBatch(): Promise<Batch> {
    // An idle open batch, else a new one while there are fewer than BATCH_LANES, else the shortest queue.
    const open = this.shared.open;
    let batch = open.find((b) => !b.busy);
    if (!batch && open.length >= BATCH_LANES) batch = open.reduce((a, b) => (b.queue.length < a.queue.length ? b : a));
    if (!batch) {
      const client = this.shared.pool.connect();
      client.catch(() => {}); // awaited by the batch (failBatch reports it); this only keeps it from being "unhandled"
      batch = { client, busy: false, queue: [], begun: false, members: 0, savepoints: 0, events: [], closed: false, commitQueued: false, done: deferred() };
      open.push(batch);
    }
    batch.members++;
    if (batch.members >= BATCH_MAX) this.closeBatch(batch);
    if (batch.busy) {
      const b = batch;
      if (await new Promise<boolean>((resolve) => b.queue.push(resolve))) {
        b.members--;
        return this.joinBatch();
      }
    }
    batch.busy = true;
    return batch;
  }

  private closeBatch(batch: Batch): void {
    batch.closed = true;
    const i = this.shared.open.indexOf(batch);
    if (i >= 0) this.shared.open.splice(i, 1);
  }

  /** A transaction is done with the connection: the next one runs, or the batch commits at the end of the turn. */
  private leave(batch: Batch): void {
    if (batch.failed) return;
    const next = batch.queue.shift();
    if (next) return next(false); // stays busy
    batch.busy = false;
    if (batch.commitQueued) return;
    batch.commitQueued = true;
    // Transactions arriving in this turn still join; then the batch commits.
    setImmediate(() => {
      batch.commitQueued = false;
      if (batch.busy || batch.queue.length) return; // someone joined: the last one to leave commits
      this.closeBatch(batch);
      void this.commitBatch(batch);
    });
  }

  /** Rolls a failed transaction's work back (its savepoint, or the batch so far when it was the first) and moves on. */
  private async undo(state: TxState): Promise<void> {
    const { batch, client } = state;
    try {
      if (!state.sent) {
        // no statement went out: nothing to undo
      } else if (state.savepoint) await client.query(`ROLLBACK TO SAVEPOINT ${state.savepoint}; RELEASE SAVEPOINT ${state.savepoint}`);
      else {
        // the batch's first transaction: nothing of anyone else's is in it yet
        await client.query("ROLLBACK");
        batch.begun = false;
        batch.savepoints = 0;
        batch.members = Math.max(0, batch.members - 1);
      }
    } catch (err) {
      // the connection is unusable: the batch fails as a whole (nothing of it committed)
      this.closeBatch(batch);
      this.failBatch(batch, err, true);
      return;
    }
    this.leave(batch);
  }

  private failBatch(batch: Batch, err: unknown, broken: boolean): void {
    batch.failed = { err };
    for (const e of batch.events) e.done.reject(err);
    batch.done.reject(err);
    for (const next of batch.queue.splice(0)) next(false); // they see batch.failed and fail
    void batch.client.then((c) => c.release(broken), () => {});
  }

  private async commitBatch(batch: Batch): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await batch.client;
    } catch (err) {
      return this.failBatch(batch, err, true);
    }
    try {
      const items = batch.events.flatMap((b) => b.events.map((e) => ({ e, createdAt: b.createdAt })));
      let rows: EventRow[] = [];
      if (batch.begun || items.length) {
        let commit: Promise<pg.QueryResult> | undefined;
        const begin = batch.begun ? "" : "BEGIN";
        batch.begun = true;
        // the last insert and the COMMIT leave in one write (and the BEGIN, for a batch of bare appends)
        const last = (send: () => Promise<Row[]>) =>
          withPrefix(client, items.length <= EVENTS_PER_INSERT ? begin : "", () => {
            const out = send();
            commit = client.query("COMMIT");
            commit.catch(() => {}); // awaited below (`await commit!`), which throws; this only keeps it from being "unhandled"
            return out;
          });
        // a failed BEGIN fails the inserts and the COMMIT after it on this connection, which are awaited
        if (begin && items.length > EVENTS_PER_INSERT) client.query(begin).catch(() => {});
        const run = (sql: string, args: unknown[], prepare: boolean) => queryRows(client, this.shared.names, sql, args, prepare);
        rows = items.length ? await insertEvents(run, items, this.shared.announce, last) : (await last(async () => []), []);
        const done = await commit!;
        // a COMMIT in a failed transaction answers ROLLBACK
        if (done.command !== "COMMIT") throw new EpError("internal", "PostgreSQL rolled the batch back");
      }
      let at = 0;
      for (const b of batch.events) {
        b.done.resolve(rows.slice(at, at + b.events.length));
        at += b.events.length;
      }
      batch.done.resolve();
      client.release();
    } catch (err) {
      for (const e of batch.events) e.done.reject(err);
      batch.done.reject(err);
      client.query("ROLLBACK").then(
        () => client.release(),
        () => client.release(true),
      );
    }
  }

  // ---- cross-replica signalling

  /** The schema the tables live in (replication scopes its channel names to it). */
  async currentSchema(): Promise<string> {
    return String((await this.shared.pool.query("SELECT current_schema() AS s")).rows[0]?.s ?? "");
  }

  /**
   * Runs fn holding the cluster-wide advisory lock `name` (one dedicated connection for its
   * duration). With `wait` false it does not queue: undefined when another replica holds it.
   */
  async withClusterLock<T>(name: string, wait: boolean, fn: () => Promise<T>): Promise<T | undefined> {
    const client = await this.shared.pool.connect();
    let broken = false;
    const key = [NAMED_LOCK, name];
    try {
      if (wait) await client.query("SELECT pg_advisory_lock($1, hashtext(COALESCE(current_schema(), '') || ':' || $2))", key);
      else {
        const got = await client.query("SELECT pg_try_advisory_lock($1, hashtext(COALESCE(current_schema(), '') || ':' || $2)) AS ok", key);
        if (!got.rows[0]?.ok) return undefined;
      }
      try {
        return await fn();
      } finally {
        // a failed unlock leaves the lock held by this session: the connection is closed, which releases it
        await client.query("SELECT pg_advisory_unlock($1, hashtext(COALESCE(current_schema(), '') || ':' || $2))", key).catch(() => (broken = true));
      }
    } finally {
      client.release(broken);
    }
  }

  /**
   * Subscribes to NOTIFYs on `channel` over one dedicated connection (shared by all
   * subscriptions of this store, re-established with backoff when it drops). Resolves
   * once the LISTEN is active; returns the unsubscribe function.
   */
  async listen(channel: string, onPayload: (payload: string) => void, opts: ListenOptions = {}): Promise<() => Promise<void>> {
    if (!CHANNEL.test(channel)) throw new EpError("invalid_argument", `channel must be 1-63 characters of letters, digits, _ . : -, got ${JSON.stringify(channel)}`);
    if (this.client) throw new EpError("invalid_argument", "listen() is not available on a transaction's store");
    this.shared.listener ??= new Listener(
      { ...this.shared.config, pipeline: false, application_name: `${this.shared.config.application_name}-listen` },
      this.shared.opts.reconnectMs ?? 250,
      this.shared.opts.maxReconnectMs ?? 10_000,
    );
    return this.shared.listener.subscribe(channel, onPayload, opts.onReconnect);
  }

  /**
   * From now on every appendEvents also sends `NOTIFY channel, '{"id": <its max id>, "from": from}'`
   * in its own transaction (delivered at commit, in commit order, with no extra round trip).
   * Cross-replica delivery (tower/domain/replication.ts) listens to it. Pass undefined to stop.
   */
  announceEvents(channel: string | undefined, from = ""): void {
    if (channel !== undefined && !CHANNEL.test(channel)) throw new EpError("invalid_argument", `channel must be 1-63 characters of letters, digits, _ . : -, got ${JSON.stringify(channel)}`);
    this.shared.announce = channel === undefined ? undefined : { channel, from };
  }

  /**
   * Sends `payload` to every listener of `channel` on any replica. Called on a
   * transaction's store, it is delivered only when (and if) that transaction commits.
   */
  async notify(channel: string, payload: string): Promise<void> {
    if (!CHANNEL.test(channel)) throw new EpError("invalid_argument", `channel must be 1-63 characters of letters, digits, _ . : -, got ${JSON.stringify(channel)}`);
    if (Buffer.byteLength(payload) > MAX_NOTIFY_BYTES) {
      throw new EpError("invalid_argument", `payload must be at most ${MAX_NOTIFY_BYTES} bytes (send an id and read the rest from the tables)`);
    }
    await this.q("SELECT pg_notify($1, $2)", [channel, payload]);
  }

  // ---- tasks

  async insertTask(row: TaskRow): Promise<void> {
    await this.insertRow(
      "tasks",
      `INSERT INTO tasks (${TASK_INSERT_COLUMNS}) VALUES (${TASK_INSERT_PLACEHOLDERS})`,
      taskInsertValues(row),
    );
  }

  async getTask(id: string): Promise<TaskRow | undefined> {
    const [r] = await this.q("SELECT * FROM tasks WHERE id = $1", [id]);
    return r && toTask(r);
  }

  async listTasks(query: TaskQuery): Promise<TaskRow[]> {
    const { sql, args } = this.taskListSql(query);
    return (await this.query(sql, args)).map(toTask);
  }

  async updateTask(id: string, patch: TaskPatch, expect?: TaskExpectation): Promise<TaskRow | undefined> {
    const { sql, args } = this.taskUpdateSql(id, patch, expect);
    const [r] = await this.query(sql, args);
    return r && toTask(r);
  }

  async deleteTask(id: string): Promise<boolean> {
    return (await this.q("DELETE FROM tasks WHERE id = $1 RETURNING id", [id])).length > 0;
  }

  async claimTask(c: Claimant, nowMs: number, leaseMs: number): Promise<TaskRow | undefined> {
    // One statement: the subquery locks the best eligible row, skipping rows other
    // claimers hold, so concurrent claimers never wait on or take the same task.
    const [r] = await this.q(
      `UPDATE tasks SET status = 'claimed', claimed_by = $1, attempts = attempts + 1, lease_expires_ms = $2, updated_at = $3
       WHERE id = (
         SELECT t.id FROM tasks t
         WHERE t.domain_id = $4 AND t.status = 'queued' AND t.kind = 'claimable'
           AND (t.runtime = '' OR t.runtime = $5)
           AND ((t.claim_policy = 'assigned' AND t.assignee_agent_id = $1)
             OR (t.claim_policy = 'first_claim' AND (t.capabilities = '[]' OR t.capabilities::jsonb <@ $6::jsonb)))
         ORDER BY t.priority DESC, t.seq ASC
         LIMIT 1
         FOR UPDATE SKIP LOCKED)
       RETURNING *`,
      [c.agentId, nowMs + leaseMs, new Date(nowMs).toISOString(), c.domainId, c.runtime, JSON.stringify(c.capabilities)],
    );
    return r && toTask(r);
  }

  async listExpiredLeases(nowMs: number, limit: number): Promise<TaskRow[]> {
    return (
      await this.q("SELECT * FROM tasks WHERE status IN ('claimed', 'running') AND lease_expires_ms <= $1 ORDER BY lease_expires_ms LIMIT $2", [nowMs, limit])
    ).map(toTask);
  }

  // ---- events

  async appendEvents(events: readonly NewEvent[], createdAt: string): Promise<EventRow[]> {
    return this.writeEvents(events, createdAt, false);
  }

  /** appendEvents with the transaction's COMMIT sent right behind the last insert (Store.appendFinalEvents). */
  async appendFinalEvents(events: readonly NewEvent[], createdAt: string): Promise<EventRow[]> {
    return this.writeEvents(events, createdAt, true);
  }

  private async writeEvents(events: readonly NewEvent[], createdAt: string, final: boolean): Promise<EventRow[]> {
    if (!events.length) return [];
    const tx = this.tx;
    if (!tx) return this.transaction((t) => (t as PostgresStore).writeEvents(events, createdAt, true));
    if (final) {
      if (tx.error) throw new EpError("internal", `a statement of the transaction failed: ${errorText(tx.error)}`);
      // The transaction is over: its events wait for the batch's COMMIT, the next transaction runs.
      const done = deferred<EventRow[]>();
      tx.batch.events.push({ events, createdAt, done });
      tx.finalized = true;
      if (tx.sent && tx.savepoint) tx.batch.unreleased = tx.savepoint;
      this.leave(tx.batch);
      return done.promise;
    }
    // In the middle of a transaction: inserted now.
    return insertEvents((sql, args, prepare) => this.q(sql, args, prepare), events.map((e) => ({ e, createdAt })), this.shared.announce);
  }

  /**
   * Events after `afterId` in id order, only up to the horizon (event-horizon.ts): an event
   * whose id is above one still being written is held back until that one commits or is gone.
   */
  async listEvents(query: EventQuery): Promise<EventRow[]> {
    const afterId = query.afterId ?? 0;
    const limit = query.limit && query.limit > 0 ? query.limit : 1000;
    const filtered = Boolean(query.types?.length || query.domainId || query.domainIds || query.missionId || query.agentId || query.sessionId || query.taskId);
    if (!filtered && !this.tx) {
      // one statement: the snapshot and the rows, from which the horizon moves
      return this.horizonRead(async (h) => {
        if (!h.started) await this.startHorizon(h);
        const from = Math.min(afterId, h.final);
        const rows = await this.q(
          "SELECT s.snap, e.* FROM (SELECT pg_current_snapshot()::text AS snap) s LEFT JOIN LATERAL (SELECT * FROM events WHERE id > $1 ORDER BY id LIMIT $2) e ON true",
          [from, limit + (afterId - from)],
        );
        const ids = rows[0].id === null ? [] : rows.map((r) => Number(r.id));
        const final = h.advance(from, ids, parseSnapshot(String(rows[0].snap)));
        return ids.length ? rows.filter((r) => Number(r.id) > afterId && Number(r.id) <= final).slice(0, limit).map(toEvent) : [];
      });
    }
    const final = this.tx ? Number.MAX_SAFE_INTEGER : await this.advanceHorizon();
    const filter = this.eventFilterSql(query);
    const sql = `SELECT * FROM events WHERE ${["id > ?", "id <= ?", ...filter.where].join(" AND ")} ORDER BY id LIMIT ?`;
    return (await this.query(sql, [afterId, final, ...filter.args, limit])).map(toEvent);
  }

  /** The newest id every lower id of which is final: events ≤ it are all there is, or will be. */
  async lastEventId(): Promise<number> {
    if (this.tx) {
      const [r] = await this.q("SELECT COALESCE(MAX(id), 0) AS id FROM events");
      return Number(r.id);
    }
    return this.advanceHorizon();
  }

  /** Moves the horizon as far as the ids visible now allow and returns it. */
  private advanceHorizon(): Promise<number> {
    return this.horizonRead(async (h) => {
      if (!h.started) await this.startHorizon(h);
      for (;;) {
        const before = h.final;
        const [r] = await this.q(
          "SELECT pg_current_snapshot()::text AS snap, ARRAY(SELECT id FROM events WHERE id > $1 ORDER BY id LIMIT 10000) AS ids",
          [before],
        );
        const ids = (r.ids as (string | number)[]).map(Number);
        h.advance(before, ids, parseSnapshot(String(r.snap)));
        // a long run of new events: keep going while whole pages become final
        if (ids.length < 10000 || h.final <= before) return h.final;
      }
    });
  }

  /**
   * The first horizon read jumps to the newest id once the transactions running at that moment
   * have ended (usually at once), instead of reading every id from the first one.
   */
  private async startHorizon(h: EventHorizon): Promise<void> {
    const snapNow = async () => parseSnapshot(String((await this.q("SELECT pg_current_snapshot()::text AS snap"))[0].snap));
    const [r] = await this.q("SELECT pg_current_snapshot()::text AS snap, COALESCE(MAX(id), 0) AS top FROM events");
    const first = parseSnapshot(String(r.snap));
    let later: Snapshot | undefined;
    for (let waited = 0; first.xip.length && waited < 2000; waited += 10) {
      later = await snapNow();
      if (first.xip.every((x) => endedBefore(x, later!))) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    h.start(Number(r.top), first, later);
  }

  /**
   * Runs horizon reads one at a time: a read may only build on horizons established by
   * snapshots older than its own.
   */
  private horizonRead<T>(fn: (h: EventHorizon) => Promise<T>): Promise<T> {
    const run = this.shared.horizonTail.then(() => fn(this.shared.horizon));
    this.shared.horizonTail = run.catch(() => {}); // the caller awaits `run` and sees its error; the tail only orders reads
    return run;
  }

  async pruneEvents(beforeId: number): Promise<number> {
    return (await this.q("DELETE FROM events WHERE id < $1 AND id < (SELECT MAX(id) FROM events) RETURNING id", [beforeId])).length;
  }

  // ---- the shared SQL (../sql-store.ts) runs here

  // getters, not fields: a transaction's store is made per transaction
  protected get byteOrder(): string {
    return ' COLLATE "C"'; // the server's locale would order text otherwise
  }
  protected get noLimit(): null {
    return null;
  }

  protected inList(col: string, values: readonly string[]): { sql: string; args: unknown[] } {
    return { sql: `${col} = ANY(?::text[])`, args: [values] };
  }

  protected query(sql: string, args: readonly unknown[] = []): Promise<Row[]> {
    let text = this.shared.dollar.get(sql);
    if (text === undefined) {
      text = dollarPlaceholders(sql);
      this.shared.dollar.set(sql, text);
    }
    return this.q(text, args);
  }

  protected constraintError(err: unknown, table: string): unknown {
    return constraintError(err, table);
  }
}


/** What goes out before a transaction's first statement: the batch's BEGIN, the previous SAVEPOINT's RELEASE, its SAVEPOINT. */
function openingText(tx: TxState): string {
  const batch = tx.batch;
  let text = batch.begun ? "" : "BEGIN;";
  batch.begun = true;
  if (tx.savepoint) {
    if (batch.unreleased) text += ` RELEASE SAVEPOINT ${batch.unreleased};`;
    batch.unreleased = undefined;
    text += ` SAVEPOINT ${tx.savepoint}`;
  }
  return text.trim();
}

/**
 * Sends `prefix` (a simple query, not awaited: an error there fails what follows) and the
 * queries `send` issues in one socket write: on this VM a write costs more CPU than the pg
 * driver's work for a statement.
 */
function withPrefix<T>(client: pg.PoolClient, prefix: string, send: () => Promise<T>): Promise<T> {
  const stream = (client as unknown as { connection?: { stream?: { cork?(): void; uncork?(): void } } }).connection?.stream;
  stream?.cork?.();
  try {
    // pipelined: a failed prefix (BEGIN, SAVEPOINT) makes the statement after it fail, which is awaited
    if (prefix) client.query(prefix).catch(() => {});
    return send();
  } finally {
    stream?.uncork?.();
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** One statement on a connection, prepared by name (see PostgresStore.q). */
async function queryRows(client: pg.PoolClient, names: Map<string, string>, sql: string, args: readonly unknown[], prepare: boolean): Promise<Row[]> {
  let name: string | undefined;
  if (prepare) {
    name = names.get(sql);
    if (!name) {
      name = `ep_${names.size + 1}`;
      names.set(sql, name);
    }
  }
  return (await client.query<Row>(name ? { text: sql, values: args as unknown[], name } : { text: sql, values: args as unknown[] })).rows;
}

/**
 * Inserts events and returns them with their ids. The rows come out of a join with
 * `pg_current_xact_id()`, so the transaction has its xid before it draws the first id: what
 * event-horizon.ts needs to tell an id still being written from one that is gone. The
 * announcement NOTIFY rides on the last insert: one round trip per chunk. `last` sends the
 * last chunk (with the transaction's COMMIT in the same write).
 */
async function insertEvents(
  run: (sql: string, args: unknown[], prepare: boolean) => Promise<Row[]>,
  items: readonly { e: NewEvent; createdAt: string }[],
  announce: Shared["announce"],
  last?: (send: () => Promise<Row[]>) => Promise<Row[]>,
): Promise<EventRow[]> {
  const out: EventRow[] = [];
  for (let start = 0; start < items.length; start += EVENTS_PER_INSERT) {
    const chunk = items.slice(start, start + EVENTS_PER_INSERT);
    const first = start === 0;
    const isLast = start + EVENTS_PER_INSERT >= items.length;
    const args: unknown[] = [];
    const values = chunk.map(({ e, createdAt }) => {
      args.push(e.type, e.name, e.domainId ?? "", e.missionId ?? "", e.agentId ?? "", e.taskId ?? "", e.sessionId ?? "", e.status ?? "");
      args.push(JSON.stringify(e.payload ?? {}), createdAt);
      const n = args.length - 10;
      return `(${Array.from({ length: 10 }, (_, i) => `$${n + i + 1}`).join(", ")})`;
    });
    const ctes = [
      first ? "lk AS MATERIALIZED (SELECT pg_current_xact_id() AS l)" : "lk AS (SELECT 1 AS l)",
      `ins AS (INSERT INTO events (type, name, domain_id, mission_id, agent_id, task_id, session_id, status, payload, created_at)
         SELECT v.* FROM lk, (VALUES ${values.join(", ")}) AS v (type, name, domain_id, mission_id, agent_id, task_id, session_id, status, payload, created_at)
         RETURNING id)`,
    ];
    if (isLast && announce) {
      args.push(announce.channel, announce.from);
      ctes.push(`nt AS MATERIALIZED (SELECT pg_notify($${args.length - 1}, json_build_object('id', (SELECT max(id) FROM ins), 'from', $${args.length}::text)::text) AS n)`);
    }
    const send = () =>
      run(
        `WITH ${ctes.join(", ")} SELECT id FROM ins${ctes.length > 2 ? ", nt" : ""} ORDER BY id`,
        args,
        chunk.length <= 8, // one text per batch size: only the common small inserts are worth preparing
      );
    const rows = await (isLast && last ? last(send) : send());
    chunk.forEach(({ e, createdAt }, i) =>
      out.push({
        id: Number(rows[i].id),
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
      }),
    );
  }
  return out;
}

/** One LISTEN connection per store, outside the pool, re-established with backoff. */
class Listener {
  private client: pg.Client | undefined;
  private connecting: Promise<pg.Client> | undefined;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
  private readonly reconnectHandlers = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private delayMs: number;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly firstDelayMs: number,
    private readonly maxDelayMs: number,
  ) {
    this.delayMs = firstDelayMs;
  }

  async subscribe(channel: string, onPayload: (payload: string) => void, onReconnect?: () => void): Promise<() => Promise<void>> {
    if (this.closed) throw new EpError("unavailable", "the store is closed");
    let set = this.handlers.get(channel);
    const fresh = !set;
    if (!set) this.handlers.set(channel, (set = new Set()));
    set.add(onPayload);
    if (onReconnect) this.reconnectHandlers.add(onReconnect);
    const unsubscribe = async (): Promise<void> => {
      if (onReconnect) this.reconnectHandlers.delete(onReconnect);
      const current = this.handlers.get(channel);
      if (!current?.delete(onPayload) || current.size) return;
      this.handlers.delete(channel);
      // the connection is down: a new one LISTENs only to the channels still wanted
      await this.client?.query(`UNLISTEN ${quoteIdent(channel)}`).catch(() => {});
    };
    try {
      const client = this.client ?? (await (this.connecting ??= this.open()));
      // open() listened to every channel known when it ran; a newer one is added here.
      if (fresh) await client.query(`LISTEN ${quoteIdent(channel)}`);
    } catch (err) {
      await unsubscribe();
      if (err instanceof EpError) throw err;
      throw new EpError("unavailable", `cannot listen on PostgreSQL: ${err instanceof Error ? err.message : String(err)}`);
    }
    return unsubscribe;
  }

  private async open(): Promise<pg.Client> {
    const client = new pg.Client(this.config);
    client.on("notification", (msg) => {
      for (const fn of this.handlers.get(msg.channel) ?? []) {
        try {
          fn(msg.payload ?? "");
        } catch {
          // A subscriber's bug must not stop delivery to the others.
        }
      }
    });
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    try {
      await client.connect();
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${quoteIdent(channel)}`);
    } catch (err) {
      client.removeAllListeners("end");
      await client.end().catch(() => {}); // the connect error is thrown; closing the half-open client is best effort
      throw err;
    } finally {
      this.connecting = undefined;
    }
    if (this.closed) {
      await client.end().catch(() => {}); // closed while connecting: nobody wants this connection
      throw new EpError("unavailable", "the store is closed");
    }
    this.client = client;
    return client;
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.removeAllListeners("end");
    client.end().catch(() => {}); // the connection is lost already; schedule() reconnects
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || this.timer || !this.handlers.size) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.closed || this.client || this.connecting) return;
      (this.connecting = this.open()).then(
        () => {
          this.delayMs = this.firstDelayMs;
          for (const fn of this.reconnectHandlers) {
            try {
              fn();
            } catch {
              // Same as notifications: one subscriber cannot break the others.
            }
          }
        },
        () => {
          this.delayMs = Math.min(this.delayMs * 2, this.maxDelayMs);
          this.schedule();
        },
      );
    }, this.delayMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const client = this.client ?? (await this.connecting?.catch(() => undefined));
    this.client = undefined;
    if (client) {
      client.removeAllListeners("end");
      await client.end().catch(() => {}); // closing: a dead connection needs no goodbye
    }
  }
}
