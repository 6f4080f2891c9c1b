// Reconnect delays (SPEC §7): 1 s, doubling, at most 30 s, reset after a good connection —
// with jitter: each delay is cut by a random share (up to 20 % by default), so a thousand
// daemons dropped by one tower restart do not all knock again in the same millisecond.
// The schedule never exceeds the seed's figures; it only spreads callers below them.

export interface BackoffOptions {
  /** the first delay (default 1,000 ms) */
  initialMs?: number;
  /** the longest delay (default 30,000 ms) */
  maxMs?: number;
  /** 0–1: a delay d becomes d × (1 − jitter × random()); default 0.2, 0 for the exact schedule */
  jitter?: number;
  /** the random source (tests pass a fixed one) */
  random?: () => number;
}

export interface Backoff {
  /** The delay before the next attempt; each call doubles the following one up to the cap. */
  next(): number;
  /** After a success: the next delay is the first again. */
  reset(): void;
}

/** The delay before attempt `attempt` (0-based) of a schedule, jitter applied. */
export function backoffDelay(attempt: number, opts: BackoffOptions = {}): number {
  const initial = opts.initialMs ?? 1000;
  const max = opts.maxMs ?? 30_000;
  const base = Math.min(max, initial * 2 ** Math.max(0, Math.min(attempt, 40)));
  const jitter = Math.min(1, Math.max(0, opts.jitter ?? 0.2));
  return Math.round(base * (1 - jitter * (opts.random ?? Math.random)()));
}

export function createBackoff(opts: BackoffOptions = {}): Backoff {
  let attempt = 0;
  return {
    next: () => backoffDelay(attempt++, opts),
    reset() {
      attempt = 0;
    },
  };
}
