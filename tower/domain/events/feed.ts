// The one feed per tower behind the event stream: it reads committed events (the hub is only the
// wake-up; the store decides the order) and keeps the newest ones serialized once in a ring.
//
// Committed events arrive from the hub in the order their commits came back, which on PostgreSQL
// is not always id order (transactions commit in parallel). Those above the next id wait here for
// the ones below them; a gap that stays (an id rolled back, or written by another replica and not
// relayed yet) is settled by reading the store, which only returns events up to the first id
// still being written.
import type { Clock, ClockTimer } from "../../../common/clock.js";
import type { Logger } from "../../../common/log.js";
import type { EventRow, Store } from "../../store/store.js";
import type { EventHub } from "../event-hub.js";
import { FrameRing, frameOf, type StreamFrame } from "./frames.js";

export interface EventFeedOptions {
  ringSize: number;
  replayPage: number;
  gapWaitMs: number;
}

export class EventFeed {
  /** newest event id taken in */
  head = 0;
  /** every event with id > ringBase that the feed has taken in is in the ring */
  ringBase = 0;
  readonly ring: FrameRing;
  readonly ready: Promise<void>;
  private initialized = false;
  private catchingUp = false;
  private dirty = false;
  private closed = false;
  private readonly early = new Map<number, EventRow>();
  private gapTimer: ClockTimer | undefined;
  private gapWaitMs: number;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly deps: { store: Store; hub: EventHub; clock: Clock; log: Logger },
    private readonly opts: EventFeedOptions,
    /** frames newly taken in, in id order */
    private readonly onFrames: (frames: readonly StreamFrame[]) => void,
  ) {
    this.ring = new FrameRing(opts.ringSize);
    this.gapWaitMs = opts.gapWaitMs;
    this.unsubscribe = deps.hub.subscribe((rows) => this.announced(rows));
    this.ready = (async () => {
      this.head = await deps.store.lastEventId();
      this.ringBase = this.head;
      this.initialized = true;
      if (this.dirty) await this.catchUp();
    })();
    this.ready.catch((err: Error) => deps.log.error("event feed failed to start", { error: err.message }));
  }

  /** Re-reads the store for events the hub has not announced (another process wrote them). */
  poke(): void {
    if (this.initialized && !this.closed) void this.catchUp();
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
    if (this.gapTimer) this.deps.clock.clearTimeout(this.gapTimer);
    this.early.clear();
  }

  private announced(rows: readonly EventRow[]): void {
    if (this.closed || !rows.length) return;
    for (const r of rows) if (r.id > this.head) this.early.set(r.id, r);
    if (!this.initialized || this.catchingUp) {
      this.dirty = true;
      return;
    }
    this.takeEarly();
    this.watchGap();
  }

  private append(rows: readonly EventRow[]): void {
    const frames: StreamFrame[] = [];
    for (const row of rows) {
      if (row.id <= this.head) continue;
      const f = frameOf(row);
      frames.push(f);
      const evicted = this.ring.push(f);
      if (evicted) this.ringBase = evicted.id;
      this.head = row.id;
    }
    if (frames.length) this.onFrames(frames);
  }

  private async catchUp(): Promise<void> {
    if (this.catchingUp) {
      this.dirty = true;
      return;
    }
    this.catchingUp = true;
    try {
      do {
        this.dirty = false;
        for (;;) {
          const rows = await this.deps.store.listEvents({ afterId: this.head, limit: this.opts.replayPage });
          if (this.closed) return;
          this.append(rows);
          this.takeEarly();
          if (rows.length < this.opts.replayPage) break;
        }
      } while (this.dirty);
    } catch (err) {
      this.deps.log.warn("event feed could not read the store", { error: (err as Error).message });
    } finally {
      this.catchingUp = false;
      if (!this.closed) this.watchGap();
    }
  }

  private takeEarly(): void {
    const early = this.early;
    for (const id of early.keys()) if (id <= this.head) early.delete(id);
    if (!early.size) return;
    const next: EventRow[] = [];
    for (let row = early.get(this.head + 1); row; row = early.get(this.head + 1 + next.length)) next.push(row);
    if (next.length) {
      for (const r of next) early.delete(r.id);
      this.append(next);
    }
  }

  private watchGap(): void {
    const { clock } = this.deps;
    if (!this.early.size) {
      if (this.gapTimer) clock.clearTimeout(this.gapTimer);
      this.gapTimer = undefined;
      this.gapWaitMs = this.opts.gapWaitMs;
      return;
    }
    // SQLite commits one transaction after another: a gap there is settled by the store at once
    if (this.early.size > this.opts.ringSize || this.deps.store.dialect !== "postgres") return void this.catchUp();
    this.gapTimer ??= clock.setTimeout(() => {
      this.gapTimer = undefined;
      // still stuck after the read: look again later, less often
      this.gapWaitMs = Math.min(this.gapWaitMs * 2, 1000);
      void this.catchUp();
    }, this.gapWaitMs);
  }
}
