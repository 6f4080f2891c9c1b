// Time comes from a Clock so tests can drive leases, throttles and cron in milliseconds.

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer): void;
}

export interface ClockTimer {
  readonly id: number;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const handle = setTimeout(fn, ms);
    handle.unref?.();
    return { id: Number(handle[Symbol.toPrimitive]()), handle } as ClockTimer;
  },
  clearTimeout(timer) {
    clearTimeout((timer as ClockTimer & { handle: NodeJS.Timeout }).handle);
  },
};

export const iso = (ms: number): string => new Date(ms).toISOString();
