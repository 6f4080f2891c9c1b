// Per-caller token bucket for opening event streams: `limit` connections per minute,
// refilled continuously. A caller whose bucket is empty is "throttled" until the next
// token arrives; its open streams carry `rate_limit` in every chunk until then.
import type { Clock } from "../../../common/clock.js";
import { iso } from "../../../common/clock.js";
import { EpError } from "../../../common/errors.js";

/** The seed's `rate_limit` block, as it appears in a chunk. */
export interface RateLimitInfo {
  limit: number;
  remaining: number;
  /** ISO 8601 UTC: when `remaining` next goes up (a new connection is allowed again) */
  reset_at: string;
}

export interface Bucket {
  readonly key: string;
  tokens: number;
  updatedMs: number;
  /** until when the caller is throttled (remaining 0); 0 when not */
  throttledUntilMs: number;
}

export interface StreamRateLimiter {
  /** Takes one connection token for `key`, or throws rate_limited with `retry_after_s` in its details. */
  take(key: string): { bucket: Bucket; info: RateLimitInfo };
  /** The block to put in chunks for this bucket while it is throttled, else undefined. */
  throttleInfo(bucket: Bucket): RateLimitInfo | undefined;
  /** Forgets buckets that are full again and not referenced (`inUse`). */
  sweep(inUse: ReadonlySet<string>): void;
  readonly limit: number;
}

export function createStreamRateLimiter(opts: { limit: number; windowMs?: number; clock: Clock }): StreamRateLimiter {
  const { limit, clock } = opts;
  const windowMs = opts.windowMs ?? 60_000;
  const perTokenMs = windowMs / limit;
  const buckets = new Map<string, Bucket>();
  // the block sent while throttled is the same object for every chunk of that episode
  const blocks = new WeakMap<Bucket, RateLimitInfo>();

  function refill(b: Bucket, now: number): void {
    if (now > b.updatedMs) {
      b.tokens = Math.min(limit, b.tokens + (now - b.updatedMs) / perTokenMs);
      b.updatedMs = now;
    }
  }

  return {
    limit,
    take(key) {
      const now = clock.now();
      let b = buckets.get(key);
      if (!b) {
        b = { key, tokens: limit, updatedMs: now, throttledUntilMs: 0 };
        buckets.set(key, b);
      }
      refill(b, now);
      if (b.tokens < 1) {
        const waitMs = Math.ceil((1 - b.tokens) * perTokenMs);
        const resetAt = iso(now + waitMs);
        throw new EpError(
          "rate_limited",
          `too many stream connections for this token: at most ${limit} per minute; retry after ${resetAt}`,
          {
            limit,
            remaining: 0,
            reset_at: resetAt,
            retry_after_s: Math.max(1, Math.ceil(waitMs / 1000)),
          },
        );
      }
      b.tokens -= 1;
      const remaining = Math.floor(b.tokens);
      const nextMs = now + Math.ceil((1 - (b.tokens - remaining)) * perTokenMs);
      if (remaining === 0) {
        b.throttledUntilMs = nextMs;
        blocks.delete(b);
      }
      return { bucket: b, info: { limit, remaining, reset_at: iso(remaining === 0 ? nextMs : now) } };
    },
    throttleInfo(b) {
      if (b.throttledUntilMs === 0) return undefined;
      if (clock.now() >= b.throttledUntilMs) {
        b.throttledUntilMs = 0;
        return undefined;
      }
      let block = blocks.get(b);
      if (!block) blocks.set(b, (block = { limit, remaining: 0, reset_at: iso(b.throttledUntilMs) }));
      return block;
    },
    sweep(inUse) {
      const now = clock.now();
      for (const [key, b] of buckets) {
        refill(b, now);
        if (b.tokens >= limit && !inUse.has(key)) buckets.delete(key);
      }
    },
  };
}
