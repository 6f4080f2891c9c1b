// The event stream's contract: what a transport provides (StreamSink), what a subscriber holds,
// the options and their defaults.
import type { ClockTimer } from "../../../common/clock.js";
import type { EventQuery } from "../../store/store.js";
import type { Caller } from "../caller.js";
import type { Bucket, RateLimitInfo } from "./limiter.js";
import type { FrameBatch, StreamFrame } from "./frames.js";
import type { StreamRequest } from "./params.js";

export type StreamEndCode =
  | "slow_consumer"
  | "token_revoked"
  | "token_expired"
  | "unauthenticated"
  | "shutting_down"
  | "internal";

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

export interface Sub extends Subscription {
  cursor: number;
  live: boolean;
  closed: boolean;
  readonly admission: Admission;
  readonly sink: StreamSink;
  /** the query has no filter: every event goes to this subscriber */
  readonly matchesAll: boolean;
  expiryTimer?: ClockTimer;
}
