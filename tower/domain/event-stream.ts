// Following the event log live. One feed per tower reads committed events (the hub is
// only the wake-up; the store decides the order), keeps the newest ones serialized once
// in a ring, and moves every subscriber along its own cursor: first from the store
// (replay), then from the ring, then live. A subscriber switches to live in the same
// tick in which it has taken the ring's last event, so no event is missed or sent twice.
// Transports (SSE, WebSocket, Connect) plug in as a StreamSink.
import type { Clock, ClockTimer } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { EventQuery, EventRow, Store } from "../store/store.js";
import { type Caller } from "./caller.js";
import type { EventHub } from "./event-hub.js";
import { createStreamRateLimiter, type Bucket, type RateLimitInfo, type StreamRateLimiter } from "./event-stream-limiter.js";
import { eventQuery } from "./events.js";

export type { RateLimitInfo } from "./event-stream-limiter.js";
export { chunkOf, frameOf, withRateLimit, type FrameBatch, type StreamFrame } from "./event-stream-frames.js";
export { parseEventId, parseStreamParams, type StreamFilterInput, type StreamRequest } from "./event-stream-params.js";
import { FrameRing, frameOf, type FrameBatch, type StreamFrame } from "./event-stream-frames.js";
import { matches, matchesAll, type StreamRequest } from "./event-stream-params.js";

export type StreamEndCode = "slow_consumer" | "token_revoked" | "token_expired" | "unauthenticated" | "shutting_down" | "internal";

/** Why a stream ended, sent to the client as the last message. */
export interface StreamEnd {
  code: StreamEndCode;
  message: string;
  /** the last event id this stream delivered (or skipped by filter): resume after it */
  last_event_id: number;
}

/** What a transport provides to carry one subscriber's stream. */
export interface StreamSink {
  /** Queues one event (with the throttling block while the caller is throttled). */
  send(frame: StreamFrame, rateLimit: RateLimitInfo | undefined): void;
  /**
   * Optional: queues several events at once for a subscriber that takes each of them unchanged
   * (it matches them all and is not throttled). The batch is built once for every subscriber;
   * a transport without this method gets one send() per frame.
   */
  sendBatch?(batch: FrameBatch): void;
  /** Bytes accepted but not yet taken by the client. */
  buffered(): number;
  /** Resolves when the client has taken most of what is buffered (or the transport closed). */
  drained(): Promise<void>;
  /** A no-op message that keeps proxies from timing the connection out. */
  keepAlive(): void;
  /** Tells the client, between events, that its caller is now throttled. */
  rateLimited(info: RateLimitInfo): void;
  /** Sends the final message (when `why` is given) and closes. Called once. */
  end(why: StreamEnd | undefined): void;
}

/** A caller checked and counted against the rate limit, ready to be attached to a sink. */
export interface Admission {
  readonly caller: Caller;
  readonly query: EventQuery;
  readonly afterId: number;
  readonly bucket: Bucket;
  readonly rateLimit: RateLimitInfo;
}

export interface Subscription {
  readonly cursor: number;
  close(): void;
}

export interface EventStreamOptions {
  /** connections per minute per token (EP_STREAM_RATE_LIMIT) */
  rateLimit: number;
  /** keep-alive comment interval (ms) */
  keepAliveMs: number;
  /** how often open streams re-check their credential (ms) */
  recheckMs: number;
  /** a live subscriber with more than this many bytes not yet taken is cut off */
  maxBufferedBytes: number;
  /** newest events kept serialized in memory for subscribers that are live or nearly so */
  ringSize: number;
  /** events per store page while replaying */
  replayPage: number;
  /** keep at most this many events in the store (EP_EVENT_RETENTION); 0 keeps all */
  retention: number;
  /** how often retention runs (ms) */
  pruneEveryMs: number;
  /**
   * How long events that committed before a lower id wait for it before the feed reads the
   * store (ms, doubling while the gap stays, up to 1 s).
   */
  gapWaitMs: number;
}

export const DEFAULT_STREAM_OPTIONS: EventStreamOptions = {
  rateLimit: 120,
  keepAliveMs: 15_000,
  recheckMs: 5_000,
  maxBufferedBytes: 1024 * 1024,
  ringSize: 8192,
  replayPage: 1000,
  retention: 1_000_000,
  pruneEveryMs: 60_000,
  gapWaitMs: 20,
};

export interface EventStreamStats {
  subscribers: number;
  live: number;
  head: number;
  cutOff: number;
  opened: number;
}

export interface EventStream {
  /** Resolves once the feed knows the newest committed event. */
  readonly ready: Promise<void>;
  /** Newest event id the feed has taken in. */
  readonly head: number;
  /** Checks the caller's role and scope, validates the filter and takes a rate-limit token. */
  admit(caller: Caller, req: StreamRequest): Promise<Admission>;
  /** Starts delivering to `sink`. Nothing is sent before this returns to the caller's tick. */
  attach(admission: Admission, sink: StreamSink): Subscription;
  /** Re-reads the store for events the hub has not announced (another process wrote them). */
  poke(): void;
  /** Runs retention once: drops events beyond the newest `retention`. */
  prune(): Promise<number>;
  stats(): EventStreamStats;
  close(): Promise<void>;
}

interface Sub extends Subscription {
  cursor: number;
  live: boolean;
  closed: boolean;
  readonly admission: Admission;
  readonly sink: StreamSink;
  /** the query has no filter: every event goes to this subscriber */
  readonly matchesAll: boolean;
  expiryTimer?: ClockTimer;
}

/** Keys a caller for rate limiting and credential checks: the token when there is one. */
export function callerKey(caller: Caller): string {
  return caller.tokenId ?? `${caller.via}:${caller.subject}`;
}

const MAX_TIMER_MS = 2 ** 31 - 1;

export function createEventStream(
  deps: { store: Store; hub: EventHub; clock: Clock; log: Logger },
  options: Partial<EventStreamOptions> = {},
): EventStream {
  const { store, hub, clock, log } = deps;
  const opts: EventStreamOptions = { ...DEFAULT_STREAM_OPTIONS, ...options };
  const limiter: StreamRateLimiter = createStreamRateLimiter({ limit: opts.rateLimit, clock });
  const ring = new FrameRing(opts.ringSize);
  const subs = new Set<Sub>();
  const live = new Set<Sub>();
  let head = 0;
  /** every event with id > ringBase that the feed has taken in is in the ring */
  let ringBase = 0;
  let initialized = false;
  let catchingUp = false;
  let dirty = false;
  let closed = false;
  let cutOff = 0;
  let opened = 0;

  // ---- the feed ------------------------------------------------------------------

  function append(rows: readonly EventRow[]): void {
    const frames: StreamFrame[] = [];
    for (const row of rows) {
      if (row.id <= head) continue;
      const f = frameOf(row);
      frames.push(f);
      const evicted = ring.push(f);
      if (evicted) ringBase = evicted.id;
      head = row.id;
    }
    if (frames.length) deliver(frames);
  }

  async function catchUp(): Promise<void> {
    if (catchingUp) {
      dirty = true;
      return;
    }
    catchingUp = true;
    try {
      do {
        dirty = false;
        for (;;) {
          const rows = await store.listEvents({ afterId: head, limit: opts.replayPage });
          if (closed) return;
          append(rows);
          takeEarly();
          if (rows.length < opts.replayPage) break;
        }
      } while (dirty);
    } catch (err) {
      log.warn("event feed could not read the store", { error: (err as Error).message });
    } finally {
      catchingUp = false;
      if (!closed) watchGap();
    }
  }

  // Committed events arrive from the hub in the order their commits came back, which on
  // PostgreSQL is not always id order (transactions commit in parallel). Those above the next
  // id wait here for the ones below them; a gap that stays (an id rolled back, or written by
  // another replica and not relayed yet) is settled by reading the store, which only returns
  // events up to the first id still being written.
  const early = new Map<number, EventRow>();
  let gapTimer: ClockTimer | undefined;
  let gapWaitMs = opts.gapWaitMs;

  function takeEarly(): void {
    for (const id of early.keys()) if (id <= head) early.delete(id);
    if (!early.size) return;
    const next: EventRow[] = [];
    for (let row = early.get(head + 1); row; row = early.get(head + 1 + next.length)) next.push(row);
    if (next.length) {
      for (const r of next) early.delete(r.id);
      append(next);
    }
  }

  function watchGap(): void {
    if (!early.size) {
      if (gapTimer) clock.clearTimeout(gapTimer);
      gapTimer = undefined;
      gapWaitMs = opts.gapWaitMs;
      return;
    }
    // SQLite commits one transaction after another: a gap there is settled by the store at once
    if (early.size > opts.ringSize || store.dialect !== "postgres") return void catchUp();
    gapTimer ??= clock.setTimeout(() => {
      gapTimer = undefined;
      // still stuck after the read: look again later, less often
      gapWaitMs = Math.min(gapWaitMs * 2, 1000);
      void catchUp();
    }, gapWaitMs);
  }

  const unsubscribe = hub.subscribe((rows) => {
    if (closed || !rows.length) return;
    for (const r of rows) if (r.id > head) early.set(r.id, r);
    if (!initialized || catchingUp) {
      dirty = true;
      return;
    }
    takeEarly();
    watchGap();
  });

  const ready = (async () => {
    head = await store.lastEventId();
    ringBase = head;
    initialized = true;
    if (dirty) await catchUp();
  })();
  ready.catch((err: Error) => log.error("event feed failed to start", { error: err.message }));

  // ---- delivery --------------------------------------------------------------------

  function deliver(frames: readonly StreamFrame[]): void {
    const first = frames[0].id;
    const last = frames[frames.length - 1].id;
    // several events for the usual unfiltered subscriber: one buffer, one write per socket
    let batch: FrameBatch | undefined;
    for (const sub of live) {
      const q = sub.admission.query;
      const rl = limiter.throttleInfo(sub.admission.bucket);
      if (frames.length > 1 && !rl && sub.sink.sendBatch && sub.cursor < first && sub.matchesAll) {
        batch ??= { frames, sse: Buffer.concat(frames.map((f) => f.sse)) };
        sub.sink.sendBatch(batch);
        sub.cursor = last;
      } else {
        for (const f of frames) {
          if (f.id <= sub.cursor) continue;
          if (matches(q, f.row)) sub.sink.send(f, rl);
          sub.cursor = f.id;
        }
      }
      if (sub.sink.buffered() > opts.maxBufferedBytes) {
        cutOff++;
        finish(sub, {
          code: "slow_consumer",
          message: `the client fell more than ${opts.maxBufferedBytes} bytes behind; reconnect with Last-Event-ID to resume`,
          last_event_id: sub.cursor,
        });
      }
    }
  }

  /** Replays from the store, then from the ring, then joins the live set. */
  async function catchUpSub(sub: Sub): Promise<void> {
    const q = sub.admission.query;
    try {
      await ready;
      while (!sub.closed) {
        if (sub.cursor >= ringBase) {
          let i = ring.indexAfter(sub.cursor);
          const rl = limiter.throttleInfo(sub.admission.bucket);
          while (i < ring.length && sub.sink.buffered() <= opts.maxBufferedBytes) {
            const f = ring.at(i++);
            if (matches(q, f.row)) sub.sink.send(f, rl);
            sub.cursor = f.id;
          }
          if (i >= ring.length) {
            sub.live = true;
            live.add(sub);
            return;
          }
          await sub.sink.drained();
          continue;
        }
        const headAtQuery = head;
        const rows = await store.listEvents({ ...q, afterId: sub.cursor, limit: opts.replayPage });
        if (sub.closed) return;
        const rl = limiter.throttleInfo(sub.admission.bucket);
        for (const row of rows) sub.sink.send(frameOf(row), rl);
        // a short page holds every matching event committed up to the query, so the
        // cursor may move past the non-matching ones too
        const last = rows.length ? rows[rows.length - 1].id : sub.cursor;
        sub.cursor = rows.length === opts.replayPage ? last : Math.max(last, headAtQuery, sub.cursor);
        if (sub.sink.buffered() > opts.maxBufferedBytes / 2) await sub.sink.drained();
      }
    } catch (err) {
      log.warn("event stream replay failed", { error: (err as Error).message });
      finish(sub, { code: "internal", message: "the tower could not read the event log; reconnect to resume", last_event_id: sub.cursor });
    }
  }

  function finish(sub: Sub, why: StreamEnd | undefined): void {
    if (sub.closed) return;
    sub.closed = true;
    subs.delete(sub);
    live.delete(sub);
    if (sub.expiryTimer) clock.clearTimeout(sub.expiryTimer);
    try {
      sub.sink.end(why);
    } catch (err) {
      log.debug("event stream sink failed to end", { error: (err as Error).message });
    }
  }

  // ---- credentials -----------------------------------------------------------------

  async function credentialProblem(caller: Caller): Promise<StreamEnd | undefined> {
    const now = clock.now();
    if (caller.expiresMs !== undefined && caller.expiresMs <= now) {
      return { code: "token_expired", message: "the credential expired; reconnect with a current one", last_event_id: 0 };
    }
    if (caller.tokenId) {
      const row = await store.getToken(caller.tokenId);
      if (!row) return { code: "unauthenticated", message: "the token no longer exists", last_event_id: 0 };
      if (row.revokedAt) return { code: "token_revoked", message: `token ${row.id} was revoked at ${row.revokedAt}`, last_event_id: 0 };
      if (row.expiresAt && Date.parse(row.expiresAt) <= now) return { code: "token_expired", message: `token ${row.id} expired at ${row.expiresAt}`, last_event_id: 0 };
    }
    if (caller.sessionHash && !(await store.findTicket(caller.sessionHash, now))) {
      return { code: "unauthenticated", message: "the console session has ended; sign in again", last_event_id: 0 };
    }
    return undefined;
  }

  let rechecking = false;
  async function recheck(): Promise<void> {
    if (rechecking) return;
    rechecking = true;
    try {
      const byKey = new Map<string, Sub[]>();
      for (const s of subs) {
        const k = callerKey(s.admission.caller);
        const list = byKey.get(k);
        if (list) list.push(s);
        else byKey.set(k, [s]);
      }
      for (const list of byKey.values()) {
        const problem = await credentialProblem(list[0].admission.caller);
        if (problem) for (const s of list) finish(s, { ...problem, last_event_id: s.cursor });
      }
    } catch (err) {
      log.warn("event stream credential check failed", { error: (err as Error).message });
    } finally {
      rechecking = false;
    }
  }

  // ---- timers ----------------------------------------------------------------------

  let keepAliveTimer = clock.setTimeout(function keepAlive() {
    for (const s of subs) s.sink.keepAlive();
    const inUse = new Set<string>();
    for (const s of subs) inUse.add(s.admission.bucket.key);
    limiter.sweep(inUse);
    keepAliveTimer = clock.setTimeout(keepAlive, opts.keepAliveMs);
  }, opts.keepAliveMs);

  let recheckTimer = clock.setTimeout(function tick() {
    void recheck();
    recheckTimer = clock.setTimeout(tick, opts.recheckMs);
  }, opts.recheckMs);

  async function prune(): Promise<number> {
    if (!opts.retention) return 0;
    const last = await store.lastEventId();
    if (last <= opts.retention) return 0;
    return store.pruneEvents(last - opts.retention + 1);
  }
  let pruneTimer = clock.setTimeout(function pruneTick() {
    prune()
      .then((n) => n && log.info("event retention pruned events", { pruned: n, keep: opts.retention }))
      .catch((err: Error) => log.warn("event retention failed", { error: err.message }))
      .finally(() => {
        if (!closed) pruneTimer = clock.setTimeout(pruneTick, opts.pruneEveryMs);
      });
  }, opts.pruneEveryMs);

  return {
    ready,
    get head() {
      return head;
    },

    async admit(caller, req) {
      if (closed) throw new EpError("unavailable", "the tower is shutting down");
      const query = eventQuery(caller, 0, {
        types: [...(req.filter.types ?? [])],
        domainId: req.filter.domainId ?? "",
        missionId: req.filter.missionId ?? "",
        agentId: req.filter.agentId ?? "",
        sessionId: req.filter.sessionId ?? "",
        taskId: req.filter.taskId ?? "",
      } as Parameters<typeof eventQuery>[2]);
      const problem = await credentialProblem(caller);
      if (problem) throw new EpError(problem.code === "token_revoked" ? "token_revoked" : problem.code === "token_expired" ? "token_expired" : "unauthenticated", problem.message);
      await ready;
      const { bucket, info } = limiter.take(callerKey(caller));
      return { caller, query, afterId: req.afterId ?? head, bucket, rateLimit: info };
    },

    attach(admission, sink) {
      if (closed) {
        sink.end({ code: "shutting_down", message: "the tower is shutting down", last_event_id: admission.afterId });
        return { cursor: admission.afterId, close() {} };
      }
      opened++;
      const sub: Sub = {
        cursor: admission.afterId,
        live: false,
        closed: false,
        admission,
        sink,
        matchesAll: matchesAll(admission.query),
        close: () => finish(sub, undefined),
      };
      subs.add(sub);
      const exp = admission.caller.expiresMs;
      if (exp !== undefined && exp - clock.now() < MAX_TIMER_MS) {
        sub.expiryTimer = clock.setTimeout(
          () => finish(sub, { code: "token_expired", message: "the credential expired; reconnect with a current one", last_event_id: sub.cursor }),
          Math.max(0, exp - clock.now()),
        );
      }
      if (admission.rateLimit.remaining === 0) {
        // this connection used the caller's last token: every stream of the caller hears it now
        const info = limiter.throttleInfo(admission.bucket);
        if (info) for (const s of subs) if (s.admission.bucket === admission.bucket) s.sink.rateLimited(info);
      }
      // the first delivery happens after the transport's current tick (headers written)
      queueMicrotask(() => void catchUpSub(sub));
      return sub;
    },

    poke() {
      if (initialized && !closed) void catchUp();
    },

    prune,

    stats() {
      return { subscribers: subs.size, live: live.size, head, cutOff, opened };
    },

    async close() {
      if (closed) return;
      closed = true;
      unsubscribe();
      clock.clearTimeout(keepAliveTimer);
      clock.clearTimeout(recheckTimer);
      clock.clearTimeout(pruneTimer);
      if (gapTimer) clock.clearTimeout(gapTimer);
      early.clear();
      for (const s of [...subs]) finish(s, undefined);
      await ready.catch(() => undefined); // a failed start was logged when it failed (see `ready` above)
    },
  };
}
