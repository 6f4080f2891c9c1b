// Following the event log live. One feed per tower reads committed events (the hub is
// only the wake-up; the store decides the order), keeps the newest ones serialized once
// in a ring, and moves every subscriber along its own cursor: first from the store
// (replay), then from the ring, then live. A subscriber switches to live in the same
// tick in which it has taken the ring's last event, so no event is missed or sent twice.
// Transports (SSE, WebSocket, Connect) plug in as a StreamSink.
import type { Clock } from "../../../common/clock.js";
import { EpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import type { EventQuery, Store } from "../../store/store.js";
import type { Caller } from "../caller.js";
import type { EventHub } from "../event-hub.js";
import type { OidcSessionCheck } from "../oidc-login/types.js";
import { createStreamRateLimiter, type StreamRateLimiter } from "./limiter.js";
import { eventQuery } from "./events.js";

export type { RateLimitInfo } from "./limiter.js";
export { chunkOf, frameOf, withRateLimit, type FrameBatch, type StreamFrame } from "./frames.js";
export { parseEventId, parseStreamParams, type StreamFilterInput, type StreamRequest } from "./params.js";
import type { StreamFrame } from "./frames.js";
import { EventFeed } from "./feed.js";
import { deliverLive, replay, type DeliveryContext } from "./delivery.js";
import { matchesAll, type StreamRequest } from "./params.js";

export * from "./types.js";
import {
  DEFAULT_STREAM_OPTIONS,
  type Admission,
  type EventStream,
  type EventStreamOptions,
  type StreamEnd,
  type StreamSink,
  type Sub,
} from "./types.js";

/** Keys a caller for rate limiting and credential checks: the token when there is one. */
export function callerKey(caller: Caller): string {
  return caller.tokenId ?? `${caller.via}:${caller.subject}`;
}

const MAX_TIMER_MS = 2 ** 31 - 1;

export function createEventStream(
  deps: { store: Store; hub: EventHub; clock: Clock; log: Logger; oidcSessions?: OidcSessionCheck },
  options: Partial<EventStreamOptions> = {},
): EventStream {
  const { store, clock, log } = deps;
  const opts: EventStreamOptions = { ...DEFAULT_STREAM_OPTIONS, ...options };
  const limiter: StreamRateLimiter = createStreamRateLimiter({ limit: opts.rateLimit, clock });
  const subs = new Set<Sub>();
  const live = new Set<Sub>();
  let closed = false;
  let cutOff = 0;
  let opened = 0;

  const feed: EventFeed = new EventFeed(deps, opts, (frames) => deliver(frames));
  const ready = feed.ready;

  const delivery: DeliveryContext = { feed, store, limiter, opts, live, log, finish, cutOff: () => cutOff++ };
  const deliver = (frames: readonly StreamFrame[]) => deliverLive(delivery, frames);
  const catchUpSub = (sub: Sub) => replay(delivery, sub);

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

  const credentialProblem = (caller: Caller) => credentialProblemOf(store, clock.now(), caller, deps.oidcSessions);

  const stopKeepAlive = every(clock, opts.keepAliveMs, () => {
    for (const s of subs) s.sink.keepAlive();
    limiter.sweep(new Set([...subs].map((s) => s.admission.bucket.key)));
  });
  let rechecking = false;
  const stopRecheck = every(clock, opts.recheckMs, () => {
    if (rechecking) return;
    rechecking = true;
    recheckCredentials(subs, credentialProblem, finish)
      .catch((err: Error) => log.warn("event stream credential check failed", { error: err.message }))
      .finally(() => (rechecking = false));
  });

  const prune = () => pruneBeyond(store, opts.retention);
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
      return feed.head;
    },

    async admit(caller, req) {
      if (closed) throw new EpError("unavailable", "the tower is shutting down");
      const query = streamQuery(caller, req);
      const problem = await credentialProblem(caller);
      if (problem) throw refusal(problem);
      await ready;
      // a resume point past the newest event would wait silently for ids that may never come:
      // refuse it, saying where the log ends (the store decides: another replica may be ahead)
      if (req.afterId !== undefined && req.afterId > feed.head) {
        const last = await store.lastEventId();
        if (req.afterId > last)
          throw new EpError(
            "invalid_argument",
            `last event id ${req.afterId} is past the newest event ` +
              `(${last}); resume from ${last} or omit it to start at the head`,
            { field: "last_event_id", last_event_id: last },
          );
      }
      const { bucket, info } = limiter.take(callerKey(caller));
      return { caller, query, afterId: req.afterId ?? feed.head, bucket, rateLimit: info };
    },

    attach(admission, sink) {
      if (closed) {
        sink.end({ code: "shutting_down", message: "the tower is shutting down", last_event_id: admission.afterId });
        return { cursor: admission.afterId, close() {} };
      }
      opened++;
      const sub = newSub(admission, sink, clock, finish);
      subs.add(sub);
      if (admission.rateLimit.remaining === 0) {
        // this connection used the caller's last token: every stream of the caller hears it now
        const info = limiter.throttleInfo(admission.bucket);
        if (info) for (const s of subs) if (s.admission.bucket === admission.bucket) s.sink.rateLimited(info);
      }
      // the first delivery happens after the transport's current tick (headers written)
      queueMicrotask(() => void catchUpSub(sub));
      return sub;
    },

    poke: () => feed.poke(),

    prune,

    stats() {
      return { subscribers: subs.size, live: live.size, head: feed.head, cutOff, opened };
    },

    async close() {
      if (closed) return;
      closed = true;
      feed.close();
      stopKeepAlive();
      stopRecheck();
      clock.clearTimeout(pruneTimer);
      for (const s of [...subs]) finish(s, undefined);
      await ready.catch(() => undefined); // a failed start was logged when it failed (see `ready` above)
    },
  };
}

/** Why a caller's credential no longer admits a stream (undefined while it does). */
export async function credentialProblemOf(
  store: Store,
  now: number,
  caller: Caller,
  oidcSessions?: OidcSessionCheck,
): Promise<StreamEnd | undefined> {
  if (caller.expiresMs !== undefined && caller.expiresMs <= now) {
    return { code: "token_expired", message: "the credential expired; reconnect with a current one", last_event_id: 0 };
  }
  if (caller.tokenId) {
    const row = await store.getToken(caller.tokenId);
    if (!row) return { code: "unauthenticated", message: "the token no longer exists", last_event_id: 0 };
    if (row.revokedAt)
      return { code: "token_revoked", message: `token ${row.id} was revoked at ${row.revokedAt}`, last_event_id: 0 };
    if (row.expiresAt && Date.parse(row.expiresAt) <= now)
      return { code: "token_expired", message: `token ${row.id} expired at ${row.expiresAt}`, last_event_id: 0 };
  }
  if (caller.sessionHash && !(await store.findTicket(caller.sessionHash, now))) {
    return { code: "unauthenticated", message: "the console session has ended; sign in again", last_event_id: 0 };
  }
  // from an identity provider's sign-in: asked again at its interval, as every request is
  if (caller.oidc && oidcSessions) {
    try {
      await oidcSessions.check(caller.oidc, caller);
    } catch (err) {
      if (err instanceof EpError && err.code === "unauthenticated")
        return { code: "unauthenticated", message: err.message, last_event_id: 0 };
      throw err;
    }
  }
  return undefined;
}

/** Runs `fn` every `ms` until the returned stop is called. */
function every(clock: Clock, ms: number, fn: () => void): () => void {
  let timer = clock.setTimeout(function tick() {
    fn();
    timer = clock.setTimeout(tick, ms);
  }, ms);
  return () => clock.clearTimeout(timer);
}

/** Checks each caller's credential once for all its streams; ends the streams of a caller it no longer admits. */
async function recheckCredentials(
  subs: Iterable<Sub>,
  problemOf: (caller: Caller) => Promise<StreamEnd | undefined>,
  finish: (sub: Sub, why: StreamEnd) => void,
): Promise<void> {
  const byKey = new Map<string, Sub[]>();
  for (const s of subs) {
    const k = callerKey(s.admission.caller);
    const list = byKey.get(k);
    if (list) list.push(s);
    else byKey.set(k, [s]);
  }
  for (const list of byKey.values()) {
    const problem = await problemOf(list[0].admission.caller);
    if (problem) for (const s of list) finish(s, { ...problem, last_event_id: s.cursor });
  }
}

/** A subscriber at its admission's resume point, ended by `finish` when its credential expires. */
function newSub(
  admission: Admission,
  sink: StreamSink,
  clock: Clock,
  finish: (sub: Sub, why: StreamEnd | undefined) => void,
): Sub {
  const sub: Sub = {
    cursor: admission.afterId,
    live: false,
    closed: false,
    admission,
    sink,
    matchesAll: matchesAll(admission.query),
    close: () => finish(sub, undefined),
  };
  const exp = admission.caller.expiresMs;
  if (exp !== undefined && exp - clock.now() < MAX_TIMER_MS) {
    sub.expiryTimer = clock.setTimeout(
      () =>
        finish(sub, {
          code: "token_expired",
          message: "the credential expired; reconnect with a current one",
          last_event_id: sub.cursor,
        }),
      Math.max(0, exp - clock.now()),
    );
  }
  return sub;
}

/** The store query a caller's stream reads: its filter within the caller's scope. */
function streamQuery(caller: Caller, req: StreamRequest): EventQuery {
  return eventQuery(caller, 0, {
    types: [...(req.filter.types ?? [])],
    domainId: req.filter.domainId ?? "",
    missionId: req.filter.missionId ?? "",
    agentId: req.filter.agentId ?? "",
    sessionId: req.filter.sessionId ?? "",
    taskId: req.filter.taskId ?? "",
  } as Parameters<typeof eventQuery>[2]);
}

/** The error that refuses a stream to a caller whose credential has a problem. */
function refusal(problem: StreamEnd): EpError {
  return new EpError(
    problem.code === "token_revoked"
      ? "token_revoked"
      : problem.code === "token_expired"
        ? "token_expired"
        : "unauthenticated",
    problem.message,
  );
}

/** Retention: drops every event but the newest `retention` (0 keeps all); answers how many went. */
async function pruneBeyond(store: Store, retention: number): Promise<number> {
  if (!retention) return 0;
  const last = await store.lastEventId();
  if (last <= retention) return 0;
  return store.pruneEvents(last - retention + 1);
}
