// The scale-out store: PostgreSQL through a `pg` pool, shared by several tower
// replicas. Same interface, same numbered migrations and the same test suite as
// the SQLite store. Claims take the best eligible row with FOR UPDATE SKIP LOCKED,
// task order and event ids come from sequences, migrations run under an advisory
// lock, and LISTEN/NOTIFY helpers carry wake-ups between replicas.
import pg from "pg";
import { EpError } from "../../../common/errors.js";
import { dollarPlaceholders, SqlStore } from "../sql-store.js";
import {
  deferred,
  errorText,
  GroupCommit,
  insertEvents,
  openingText,
  withPrefix,
  type TxState,
} from "./group-commit.js";
import { Listener } from "./listener.js";
import {
  CHANNEL,
  constraintError,
  migrate,
  IDENT,
  pgCode,
  quoteIdent,
  redact,
  types,
  withDefaultUser,
} from "./pg-support.js";

export { withDefaultUser };
import { EventHorizon, endedSince, parseSnapshot, quietAt, withRunning, type Snapshot } from "./event-horizon.js";
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

const TASK_INSERT_PLACEHOLDERS = TASK_INSERT_COLUMNS.split(",")
  .map((_, i) => `$${i + 1}`)
  .join(", ");

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
/** Named cluster locks (withClusterLock): the second key hashes the schema and the name. */
const NAMED_LOCK = 0x45500010;
interface Shared {
  pool: pg.Pool;
  config: pg.PoolConfig;
  opts: PostgresStoreOptions;
  names: Map<string, string>;
  /** the shared SQL's `?` text → its `$n` text */
  dollar: Map<string, string>;
  listener: Listener | undefined;
  /** the group-commit batches (group-commit.ts) */
  commits: GroupCommit;
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
      throw new EpError(
        "invalid_argument",
        `schema must be a plain identifier (letters, digits, _), got ${JSON.stringify(opts.schema)}`,
      );
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
    pool.on("error", (err) =>
      console.error(`ep-tower: an idle PostgreSQL connection failed (the pool replaces it): ${err.message}`),
    );
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
      throw new EpError(
        "unavailable",
        `cannot use PostgreSQL at ${redact(url)}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    const names = new Map<string, string>();
    const shared: Shared = {
      pool,
      config,
      opts,
      names,
      dollar: new Map(),
      listener: undefined,
      commits: undefined as unknown as GroupCommit,
      horizon: new EventHorizon(),
      horizonTail: Promise.resolve(),
    };
    shared.commits = new GroupCommit(pool, names, () => shared.announce);
    return new PostgresStore(shared, undefined);
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
    await migrate(this.shared.pool);
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
    const batch = await this.shared.commits.join();
    let client: pg.PoolClient;
    try {
      if (batch.failed) throw batch.failed.err;
      client = await batch.client;
    } catch (err) {
      this.shared.commits.leave(batch);
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
      if (state.error && !state.finalized)
        throw new EpError("internal", `a statement of the transaction failed: ${errorText(state.error)}`);
    } catch (err) {
      if (state.finalized) throw err; // the batch's COMMIT failed; appendFinalEvents has said so
      await this.shared.commits.undo(state);
      throw err;
    }
    if (!state.finalized) {
      if (state.sent && state.savepoint) batch.unreleased = state.savepoint;
      this.shared.commits.leave(batch);
      await batch.done.promise;
    }
    return out;
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
      if (wait)
        await client.query("SELECT pg_advisory_lock($1, hashtext(COALESCE(current_schema(), '') || ':' || $2))", key);
      else {
        const got = await client.query(
          "SELECT pg_try_advisory_lock($1, hashtext(COALESCE(current_schema(), '') || ':' || $2)) AS ok",
          key,
        );
        if (!got.rows[0]?.ok) return undefined;
      }
      try {
        return await fn();
      } finally {
        // a failed unlock leaves the lock held by this session: the connection is closed, which releases it
        await client
          .query("SELECT pg_advisory_unlock($1, hashtext(COALESCE(current_schema(), '') || ':' || $2))", key)
          .catch(() => (broken = true));
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
  async listen(
    channel: string,
    onPayload: (payload: string) => void,
    opts: ListenOptions = {},
  ): Promise<() => Promise<void>> {
    if (!CHANNEL.test(channel))
      throw new EpError(
        "invalid_argument",
        `channel must be 1-63 characters of letters, digits, _ . : -, got ${JSON.stringify(channel)}`,
      );
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
   * Cross-replica delivery (tower/domain/replication/replication.ts) listens to it. Pass undefined to stop.
   */
  announceEvents(channel: string | undefined, from = ""): void {
    if (channel !== undefined && !CHANNEL.test(channel))
      throw new EpError(
        "invalid_argument",
        `channel must be 1-63 characters of letters, digits, _ . : -, got ${JSON.stringify(channel)}`,
      );
    this.shared.announce = channel === undefined ? undefined : { channel, from };
  }

  /**
   * Sends `payload` to every listener of `channel` on any replica. Called on a
   * transaction's store, it is delivered only when (and if) that transaction commits.
   */
  async notify(channel: string, payload: string): Promise<void> {
    if (!CHANNEL.test(channel))
      throw new EpError(
        "invalid_argument",
        `channel must be 1-63 characters of letters, digits, _ . : -, got ${JSON.stringify(channel)}`,
      );
    if (Buffer.byteLength(payload) > MAX_NOTIFY_BYTES) {
      throw new EpError(
        "invalid_argument",
        `payload must be at most ${MAX_NOTIFY_BYTES} bytes (send an id and read the rest from the tables)`,
      );
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
      `UPDATE tasks SET status = $7, claimed_by = $1, attempts = attempts + 1, lease_expires_ms = $2,
         updated_at = $3, lease_id = $8
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
      [
        c.agentId,
        nowMs + leaseMs,
        new Date(nowMs).toISOString(),
        c.domainId,
        c.runtime,
        JSON.stringify(c.capabilities),
        c.start ? "running" : "claimed",
        c.leaseId,
      ],
    );
    return r && toTask(r);
  }

  async listExpiredLeases(nowMs: number, limit: number): Promise<TaskRow[]> {
    return (
      await this.q(
        "SELECT * FROM tasks WHERE status IN ('claimed', 'running') " +
          "AND lease_expires_ms <= $1 ORDER BY lease_expires_ms LIMIT $2",
        [nowMs, limit],
      )
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
      this.shared.commits.leave(tx.batch);
      return done.promise;
    }
    // In the middle of a transaction: inserted now.
    return insertEvents(
      (sql, args, prepare) => this.q(sql, args, prepare),
      events.map((e) => ({ e, createdAt })),
      this.shared.announce,
    );
  }

  /**
   * Events after `afterId` in id order, only up to the horizon (event-horizon.ts): an event
   * whose id is above one still being written is held back until that one commits or is gone.
   */
  async listEvents(query: EventQuery): Promise<EventRow[]> {
    const afterId = query.afterId ?? 0;
    const limit = query.limit && query.limit > 0 ? query.limit : 1000;
    const filtered = Boolean(
      query.types?.length ||
        query.domainId ||
        query.domainIds ||
        query.missionId ||
        query.agentId ||
        query.sessionId ||
        query.taskId,
    );
    if (!filtered && !this.tx) {
      // one statement: the snapshot and the rows, from which the horizon moves
      return this.horizonRead(async (h) => {
        if (!h.started) await this.startHorizon(h);
        const from = Math.min(afterId, h.final);
        const rows = await this.q(
          "SELECT s.snap, e.* FROM (SELECT pg_current_snapshot()::text AS snap) s LEFT " +
            "JOIN LATERAL (SELECT * FROM events WHERE id > $1 ORDER BY id LIMIT $2) e ON true",
          [from, limit + (afterId - from)],
        );
        const ids = rows[0].id === null ? [] : rows.map((r) => Number(r.id));
        const final = h.advance(from, ids, await this.snapshotFor(h, ids, String(rows[0].snap)));
        return ids.length
          ? rows
              .filter((r) => Number(r.id) > afterId && Number(r.id) <= final)
              .slice(0, limit)
              .map(toEvent)
          : [];
      });
    }
    const final = this.tx ? Number.MAX_SAFE_INTEGER : await this.advanceHorizon();
    const filter = this.eventFilterSql(query);
    const sql =
      `SELECT * FROM events WHERE ` + `${["id > ?", "id <= ?", ...filter.where].join(" AND ")} ORDER BY id LIMIT ?`;
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
          "SELECT pg_current_snapshot()::text AS snap, ARRAY(SELECT id " +
            "FROM events WHERE id > $1 ORDER BY id LIMIT 10000) AS ids",
          [before],
        );
        const ids = (r.ids as (string | number)[]).map(Number);
        h.advance(before, ids, await this.snapshotFor(h, ids, String(r.snap)));
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
    const snapNow = async () =>
      parseSnapshot(String((await this.q("SELECT pg_current_snapshot()::text AS snap"))[0].snap));
    const [r] = await this.q("SELECT pg_current_snapshot()::text AS snap, COALESCE(MAX(id), 0) AS top FROM events");
    const first = await this.withRunning(parseSnapshot(String(r.snap)));
    let later: Snapshot | undefined;
    for (let waited = 0; !quietAt(first) && waited < 2000; waited += 10) {
      later = await snapNow();
      if (endedSince(first, later)) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    h.start(Number(r.top), first, later);
  }

  /** The snapshot a read was made in, with its unlisted writers bounded when the read shows a gap. */
  private async snapshotFor(h: EventHorizon, ids: readonly number[], text: string): Promise<Snapshot> {
    const snap = parseSnapshot(text);
    return h.gapIn(ids) ? this.withRunning(snap) : snap;
  }

  /** `snap` with the writers it does not list bounded by a second look (event-horizon.ts says why). */
  private async withRunning(snap: Snapshot): Promise<Snapshot> {
    const [r] = await this.q(
      "SELECT pg_current_snapshot()::text AS snap, ARRAY(SELECT backend_xid::text " +
        "FROM pg_stat_get_activity(NULL) WHERE backend_xid IS NOT NULL) AS x",
    );
    return withRunning(snap, parseSnapshot(String(r.snap)), r.x as string[]);
  }

  /**
   * Runs horizon reads one at a time: a read may only build on horizons established by
   * snapshots older than its own.
   */
  private horizonRead<T>(fn: (h: EventHorizon) => Promise<T>): Promise<T> {
    const run = this.shared.horizonTail.then(() => fn(this.shared.horizon));
    // the caller awaits `run` and sees its error; the tail only orders reads
    this.shared.horizonTail = run.catch(() => {});
    return run;
  }

  async pruneEvents(beforeId: number): Promise<number> {
    return (
      await this.q("DELETE FROM events WHERE id < $1 AND id < (SELECT MAX(id) FROM events) RETURNING id", [beforeId])
    ).length;
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
