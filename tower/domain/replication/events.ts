// The event half of replication (replication/replication.ts explains the whole): one cursor, "every committed
// event ≤ cursor has reached the local hub", moved by reading `id > cursor` from the store in
// order; local commits announced to the other replicas; a poll and a re-read after the LISTEN
// connection returns as the safety net.
import type { Clock, ClockTimer } from "../../../common/clock.js";
import type { Logger } from "../../../common/log.js";
import type { EventRow } from "../../store/store.js";
import type { EventHub } from "../event-hub.js";
import type { ReplicatedStore, ReplicationStats } from "./types.js";

/** How long the cursor may stay below a known id before the store is read (ms; doubles up to pollMs). */
const GAP_WAIT_MS = 20;
const PAGE = 1000;

interface EventRelayDeps {
  store: ReplicatedStore;
  hub: EventHub;
  log: Logger;
  clock: Clock;
  replicaId: string;
  channel: string;
  pollMs: number;
  stats: ReplicationStats;
}

export class EventRelay {
  cursor: number;
  /** an id known to be committed (announced, or committed here); the cursor is behind while below it */
  private known: number;
  private closed = false;
  private relaying = false;
  private reading = false;
  private again = false;
  private idle: Promise<void> = Promise.resolve();
  /** Local commits are published in the order their COMMITs come back: ids above the cursor wait here. */
  private readonly ahead = new Set<number>();
  private notifyMax = 0;
  private notifyQueued = false;
  private gapTimer: ClockTimer | undefined;
  private gapWaitMs = GAP_WAIT_MS;
  private pollTimer: ClockTimer | undefined;
  /** whether the store's event INSERT announces itself (PostgresStore): then no NOTIFY from here */
  private readonly announced: boolean;
  private readonly unsubscribeHub: () => void;
  private unlisten: () => Promise<void> = async () => {};

  static async start(deps: EventRelayDeps): Promise<EventRelay> {
    const relay = new EventRelay(deps, await deps.store.lastEventId());
    relay.unlisten = await deps.store.listen(deps.channel, (payload) => relay.signalled(payload), {
      onReconnect: () => void relay.read(),
    });
    relay.poll();
    return relay;
  }

  private constructor(
    private readonly deps: EventRelayDeps,
    cursor: number,
  ) {
    this.cursor = cursor;
    this.known = cursor;
    this.announced = typeof deps.store.announceEvents === "function";
    if (this.announced) deps.store.announceEvents!(deps.channel, deps.replicaId);
    this.unsubscribeHub = deps.hub.subscribe((rows) => this.committedHere(rows));
  }

  /** Reads the event log past the cursor and hands it to the hub; one read at a time, again when asked meanwhile. */
  read(): Promise<void> {
    if (this.closed) return this.idle;
    if (this.reading) {
      this.again = true;
      return this.idle;
    }
    this.reading = true;
    this.idle = this.readAll()
      .catch((err: Error) => {
        if (!this.closed) this.deps.log.warn("replication could not read the event log", { error: err.message });
      })
      .finally(() => {
        this.reading = false;
        this.settle();
      });
    return this.idle;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribeHub();
    if (this.announced) this.deps.store.announceEvents!(undefined);
    if (this.pollTimer) this.deps.clock.clearTimeout(this.pollTimer);
    if (this.gapTimer) this.deps.clock.clearTimeout(this.gapTimer);
    // closing: the listener connection goes with the store; a failed UNLISTEN changes nothing
    await this.unlisten().catch(() => {});
    await this.idle.catch(() => {}); // the read logs its own failures; here we only wait for it to stop
  }

  private async readAll(): Promise<void> {
    const { store, stats } = this.deps;
    do {
      this.again = false;
      for (;;) {
        stats.reads++;
        const rows = await store.listEvents({ afterId: this.cursor, limit: PAGE });
        if (this.closed) return;
        if (rows.length) this.relay(rows);
        if (rows.length < PAGE) break;
      }
    } while (this.again && !this.closed);
  }

  private relay(rows: readonly EventRow[]): void {
    // the store returns events up to its horizon: nothing ≤ the last row can still appear
    this.cursor = Math.max(this.cursor, rows[rows.length - 1].id);
    for (const id of this.ahead) if (id <= this.cursor) this.ahead.delete(id);
    while (this.ahead.delete(this.cursor + 1)) this.cursor++;
    this.deps.stats.relayed += rows.length;
    this.relaying = true;
    try {
      this.deps.hub.publish(rows);
    } finally {
      this.relaying = false;
    }
  }

  /** Local commits: move the cursor when they are the next ids, and tell the other replicas. */
  private committedHere(rows: readonly EventRow[]): void {
    if (this.relaying || this.closed) return;
    let max = 0;
    for (const r of rows) {
      if (r.id > this.cursor) this.ahead.add(r.id);
      if (r.id > max) max = r.id;
    }
    while (this.ahead.delete(this.cursor + 1)) this.cursor++;
    if (max > this.known) this.known = max;
    // a gap that stays (an id rolled back, or another replica's event not read yet) is crossed by a read
    if (this.ahead.size > 4 * PAGE) void this.read();
    else this.settle();
    if (!this.announced) this.notifyLater(max);
  }

  /** One NOTIFY per loop turn with the newest id (when the store does not announce its inserts). */
  private notifyLater(max: number): void {
    if (max > this.notifyMax) this.notifyMax = max;
    if (this.notifyQueued) return;
    this.notifyQueued = true;
    setImmediate(() => {
      this.notifyQueued = false;
      if (this.closed) return;
      this.deps.stats.notified++;
      this.deps.store
        .notify(this.deps.channel, JSON.stringify({ id: this.notifyMax, from: this.deps.replicaId }))
        .catch((err: Error) => {
          // the others still find the events on their next poll
          if (!this.closed) this.deps.log.warn("replication could not NOTIFY", { error: err.message });
        });
    });
  }

  /** Another replica (or this one's store) announced a commit. */
  private signalled(payload: string): void {
    let id = Number.POSITIVE_INFINITY;
    let from: unknown;
    try {
      ({ id, from } = JSON.parse(payload) as { id: number; from?: unknown });
      id = Number(id);
    } catch {
      // an unreadable signal still means "look"
    }
    if (id <= this.cursor) return;
    if (from === this.deps.replicaId && Number.isFinite(id)) {
      this.known = Math.max(this.known, id);
      this.settle();
    } else void this.read();
  }

  /**
   * Behind: an id above the cursor is known but the ids below it have not all arrived. This
   * replica's own events reach the local hub from commit() itself, usually right after their
   * announcement, and the store holds back events above an id still being written; so look again
   * a little later, less often while the gap stays.
   */
  private settle(): void {
    const { clock } = this.deps;
    if (this.closed) return;
    if (this.cursor >= this.known) {
      if (this.gapTimer) clock.clearTimeout(this.gapTimer);
      this.gapTimer = undefined;
      this.gapWaitMs = GAP_WAIT_MS;
      return;
    }
    this.gapTimer ??= clock.setTimeout(() => {
      this.gapTimer = undefined;
      this.gapWaitMs = Math.min(this.gapWaitMs * 2, this.deps.pollMs);
      void this.read();
    }, this.gapWaitMs);
  }

  private poll(): void {
    this.pollTimer = this.deps.clock.setTimeout(() => {
      void this.read().finally(() => {
        if (!this.closed) this.poll();
      });
    }, this.deps.pollMs);
  }
}
