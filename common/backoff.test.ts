import { describe, expect, it } from "vitest";
import { backoffDelay, createBackoff } from "./backoff.js";

describe("backoff", () => {
  it("starts at 1 s, doubles to 30 s and resets after a success (no jitter)", () => {
    const b = createBackoff({ jitter: 0 });
    expect(Array.from({ length: 7 }, () => b.next())).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    b.reset();
    expect(b.next()).toBe(1000);
  });

  it("spreads callers below the schedule, never above it", () => {
    expect(backoffDelay(0, { random: () => 0 })).toBe(1000);
    expect(backoffDelay(0, { random: () => 1 })).toBe(800);
    expect(backoffDelay(10, { random: () => 0.5 })).toBe(27000);
    const delays = Array.from({ length: 1000 }, () => backoffDelay(3));
    expect(Math.max(...delays)).toBeLessThanOrEqual(8000);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(6400);
    expect(new Set(delays).size).toBeGreaterThan(100); // not one instant for everybody
  });

  it("takes other schedules", () => {
    expect(Array.from({ length: 4 }, (_, i) => backoffDelay(i, { initialMs: 250, maxMs: 1000, jitter: 0 }))).toEqual([
      250, 500, 1000, 1000,
    ]);
  });
});
