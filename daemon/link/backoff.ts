// Reconnect delays: 1 s doubling to 30 s (SPEC §7), reset after a success.
export interface Backoff {
  /** The delay before the next attempt; each call doubles the following one up to the cap. */
  next(): number;
  reset(): void;
}

export function createBackoff(opts: { initialMs?: number; maxMs?: number } = {}): Backoff {
  const initial = opts.initialMs ?? 1000;
  const max = opts.maxMs ?? 30_000;
  let current = initial;
  return {
    next() {
      const d = current;
      current = Math.min(current * 2, max);
      return d;
    },
    reset() {
      current = initial;
    },
  };
}
