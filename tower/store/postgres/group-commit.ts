// Group commit on PostgreSQL: the transactions that arrive while a batch is open share its
// connection and its PostgreSQL transaction, one after another, each in its own SAVEPOINT, and
// are answered after the batch's COMMIT; their events are inserted with that COMMIT. The store
// (postgres-store.ts) runs statements; this file owns the batches.
import type pg from "pg";
import { EpError } from "../../../common/errors.js";
import { eventRowOf, type Row } from "../rows.js";
import type { EventRow, NewEvent } from "../store.js";

/** Rows per INSERT of the events of a batch. */
export const EVENTS_PER_INSERT = 1000;

/** One logical transaction inside a group-commit batch. */
export interface TxState {
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

export interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (err: unknown) => void;
}

export function deferred<T>(): Deferred<T> {
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
export interface Batch {
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
export const BATCH_MAX = 32;
/**
 * Batches open at once (besides those committing). Four measured no better than one in
 * bench/claim.ts --pg on the 2-core VM (672 vs 732 tasks/s: smaller batches, more round
 * trips, more tower CPU per task), and with two open batches a transaction in each could
 * wait for a row the other holds (PostgreSQL breaks such a cycle after deadlock_timeout by
 * failing one of them), which separate transactions touching one row each never do.
 */
export const BATCH_LANES = 1;

/**
 * What goes out before a transaction's first statement: the batch's BEGIN, the previous SAVEPOINT's RELEASE, its
 * SAVEPOINT.
 */
export function openingText(tx: TxState): string {
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
export function withPrefix<T>(client: pg.PoolClient, prefix: string, send: () => Promise<T>): Promise<T> {
  const stream = (client as unknown as { connection?: { stream?: { cork?(): void; uncork?(): void } } }).connection
    ?.stream;
  stream?.cork?.();
  try {
    // pipelined: a failed prefix (BEGIN, SAVEPOINT) makes the statement after it fail, which is awaited
    if (prefix) client.query(prefix).catch(() => {});
    return send();
  } finally {
    stream?.uncork?.();
  }
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** One statement on a connection, prepared by name (see PostgresStore.q). */
export async function queryRows(
  client: pg.PoolClient,
  names: Map<string, string>,
  sql: string,
  args: readonly unknown[],
  prepare: boolean,
): Promise<Row[]> {
  let name: string | undefined;
  if (prepare) {
    name = names.get(sql);
    if (!name) {
      name = `ep_${names.size + 1}`;
      names.set(sql, name);
    }
  }
  return (
    await client.query<Row>(
      name ? { text: sql, values: args as unknown[], name } : { text: sql, values: args as unknown[] },
    )
  ).rows;
}

/**
 * Inserts events and returns them with their ids. The rows come out of a join with
 * `pg_current_xact_id()`, so the transaction has its xid before it draws the first id: what
 * event-horizon.ts needs to tell an id still being written from one that is gone. The
 * announcement NOTIFY rides on the last insert: one round trip per chunk. `last` sends the
 * last chunk (with the transaction's COMMIT in the same write).
 */
export async function insertEvents(
  run: (sql: string, args: unknown[], prepare: boolean) => Promise<Row[]>,
  items: readonly { e: NewEvent; createdAt: string }[],
  announce: { channel: string; from: string } | undefined,
  last?: (send: () => Promise<Row[]>) => Promise<Row[]>,
): Promise<EventRow[]> {
  const out: EventRow[] = [];
  for (let start = 0; start < items.length; start += EVENTS_PER_INSERT) {
    const chunk = items.slice(start, start + EVENTS_PER_INSERT);
    const first = start === 0;
    const isLast = start + EVENTS_PER_INSERT >= items.length;
    const args: unknown[] = [];
    const values = chunk.map(({ e, createdAt }) => {
      args.push(
        e.type,
        e.name,
        e.domainId ?? "",
        e.missionId ?? "",
        e.agentId ?? "",
        e.taskId ?? "",
        e.sessionId ?? "",
        e.status ?? "",
      );
      args.push(JSON.stringify(e.payload ?? {}), createdAt);
      const n = args.length - 10;
      return `(${Array.from({ length: 10 }, (_, i) => `$${n + i + 1}`).join(", ")})`;
    });
    const ctes = [
      first ? "lk AS MATERIALIZED (SELECT pg_current_xact_id() AS l)" : "lk AS (SELECT 1 AS l)",
      `ins AS (INSERT INTO events (type, name, domain_id, mission_id, agent_id, task_id, session_id, status,
           payload, created_at)
         SELECT v.* FROM lk, (VALUES ${values.join(", ")}) AS v (type, name, domain_id, mission_id, agent_id,
           task_id, session_id, status, payload, created_at)
         RETURNING id)`,
    ];
    if (isLast && announce) {
      args.push(announce.channel, announce.from);
      ctes.push(
        `nt AS MATERIALIZED (SELECT pg_notify($${args.length - 1}, json_build_object('id', ` +
          `(SELECT max(id) FROM ins), 'from', $${args.length}::text)::text) AS n)`,
      );
    }
    const send = () =>
      run(
        `WITH ${ctes.join(", ")} SELECT id FROM ins${ctes.length > 2 ? ", nt" : ""} ORDER BY id`,
        args,
        chunk.length <= 8, // one text per batch size: only the common small inserts are worth preparing
      );
    const rows = await (isLast && last ? last(send) : send());
    chunk.forEach(({ e, createdAt }, i) => out.push(eventRowOf(e, Number(rows[i].id), createdAt)));
  }
  return out;
}

/** The open batches of one store (all its transactions), and how they commit. */
export class GroupCommit {
  /** the batches new transactions join (at most BATCH_LANES) */
  readonly open: Batch[] = [];

  constructor(
    private readonly pool: pg.Pool,
    /** prepared statement names by SQL text (shared with the store) */
    private readonly names: Map<string, string>,
    /** set by announceEvents(): every event insert also NOTIFYs this channel on commit */
    private readonly announce: () => { channel: string; from: string } | undefined,
  ) {}

  /** The open batch if it takes members, else a new one; resolves when it is this transaction's turn. */
  async join(): Promise<Batch> {
    // An idle open batch, else a new one while there are fewer than BATCH_LANES, else the shortest queue.
    const open = this.open;
    let batch = open.find((b) => !b.busy);
    if (!batch && open.length >= BATCH_LANES) batch = open.reduce((a, b) => (b.queue.length < a.queue.length ? b : a));
    if (!batch) {
      const client = this.pool.connect();
      client.catch(() => {}); // awaited by the batch (failBatch reports it); this only keeps it from being "unhandled"
      batch = {
        client,
        busy: false,
        queue: [],
        begun: false,
        members: 0,
        savepoints: 0,
        events: [],
        closed: false,
        commitQueued: false,
        done: deferred(),
      };
      open.push(batch);
    }
    batch.members++;
    if (batch.members >= BATCH_MAX) this.close(batch);
    if (batch.busy) {
      const b = batch;
      if (await new Promise<boolean>((resolve) => b.queue.push(resolve))) {
        b.members--;
        return this.join();
      }
    }
    batch.busy = true;
    return batch;
  }

  close(batch: Batch): void {
    batch.closed = true;
    const i = this.open.indexOf(batch);
    if (i >= 0) this.open.splice(i, 1);
  }

  /** A transaction is done with the connection: the next one runs, or the batch commits at the end of the turn. */
  leave(batch: Batch): void {
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
      this.close(batch);
      void this.commit(batch);
    });
  }

  /** Rolls a failed transaction's work back (its savepoint, or the batch so far when it was the first) and moves on. */
  async undo(state: TxState): Promise<void> {
    const { batch, client } = state;
    try {
      if (!state.sent) {
        // no statement went out: nothing to undo
      } else if (state.savepoint)
        await client.query(`ROLLBACK TO SAVEPOINT ${state.savepoint}; RELEASE SAVEPOINT ${state.savepoint}`);
      else {
        // the batch's first transaction: nothing of anyone else's is in it yet
        await client.query("ROLLBACK");
        batch.begun = false;
        batch.savepoints = 0;
        batch.members = Math.max(0, batch.members - 1);
      }
    } catch (err) {
      // the connection is unusable: the batch fails as a whole (nothing of it committed)
      this.close(batch);
      this.fail(batch, err, true);
      return;
    }
    this.leave(batch);
  }

  private fail(batch: Batch, err: unknown, broken: boolean): void {
    batch.failed = { err };
    for (const e of batch.events) e.done.reject(err);
    batch.done.reject(err);
    for (const next of batch.queue.splice(0)) next(false); // they see batch.failed and fail
    void batch.client.then(
      (c) => c.release(broken),
      () => {},
    );
  }

  private async commit(batch: Batch): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await batch.client;
    } catch (err) {
      return this.fail(batch, err, true);
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
            // awaited below (`await commit!`), which throws; this only keeps it from being "unhandled"
            commit.catch(() => {});
            return out;
          });
        // a failed BEGIN fails the inserts and the COMMIT after it on this connection, which are awaited
        if (begin && items.length > EVENTS_PER_INSERT) client.query(begin).catch(() => {});
        const run = (sql: string, args: unknown[], prepare: boolean) =>
          queryRows(client, this.names, sql, args, prepare);
        rows = items.length ? await insertEvents(run, items, this.announce(), last) : (await last(async () => []), []);
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
}
