// A clock for tests: time moves only when the test says so (long waits without sleeping).
import type { Clock, ClockTimer } from "../common/clock.js";

/** A clock that only moves when told to; timers fire in order as it advances. */
export class FakeClock implements Clock {
  private current: number;
  private nextId = 1;
  private timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start: number | string = Date.UTC(2026, 0, 1)) {
    this.current = typeof start === "string" ? Date.parse(start) : start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    const id = this.nextId++;
    this.timers.set(id, { at: this.current + Math.max(0, ms), fn });
    return { id };
  }

  clearTimeout(timer: ClockTimer): void {
    this.timers.delete(timer.id);
  }

  /** Moves time forward, firing due timers in time order (timers set while firing count too). */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      let due: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers) if (entry[1].at <= target && (!due || entry[1].at < due[1].at)) due = entry;
      if (!due) break;
      this.timers.delete(due[0]);
      this.current = Math.max(this.current, due[1].at);
      due[1].fn();
    }
    this.current = target;
  }

  /**
   * How long until each pending timer fires, soonest first: a test waits until the product has set the timer it drives.
   */
  pendingDelays(): number[] {
    return [...this.timers.values()].map((t) => t.at - this.current).sort((a, b) => a - b);
  }

  set(time: number | string): void {
    const t = typeof time === "string" ? Date.parse(time) : time;
    this.advance(t - this.current);
  }
}
