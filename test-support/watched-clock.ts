// The system clock, watched: real time and real timers, plus which timers are pending, so a test
// can wait until the product is waiting (a long-poll held, an approval wait open) instead of
// sleeping and hoping it is.
import { systemClock, type Clock, type ClockTimer } from "../common/clock.js";

export class WatchedClock implements Clock {
  private readonly pending = new Map<number, number>();

  now(): number {
    return Date.now();
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    const timer = systemClock.setTimeout(() => {
      this.pending.delete(timer.id);
      fn();
    }, ms);
    this.pending.set(timer.id, ms);
    return timer;
  }

  clearTimeout(timer: ClockTimer): void {
    this.pending.delete(timer.id);
    systemClock.clearTimeout(timer);
  }

  /** How many pending timers were set for `min` to `max` ms (a long wait, not a sweeper's tick). */
  pendingFor(min: number, max = Infinity): number {
    let n = 0;
    for (const d of this.pending.values()) if (d >= min && d <= max) n++;
    return n;
  }
}
