import { describe, expect, it } from "vitest";
import { attemptOfFrame, attemptsOf, ranMs } from "./task-attempts.js";

const at = (ms: number) => new Date(Date.UTC(2026, 11, 1, 20, 0, 0) + ms).toISOString();

describe("a task's attempts from its events", () => {
  it("starts one per claim, times it from its run's start, and ends it with its outcome", () => {
    const attempts = attemptsOf([
      { id: 1, name: "task.created", at: at(0) },
      { id: 2, name: "task.claimed", at: at(10) },
      { id: 3, name: "task.running", at: at(20) },
      { id: 5, name: "task.failed", at: at(29) },
      { id: 6, name: "task.retried", at: at(7_000) },
      { id: 7, name: "task.claimed", at: at(7_010) },
      { id: 9, name: "task.requeued", at: at(67_010) },
      { id: 10, name: "task.claimed", at: at(67_100) },
    ]);
    expect(attempts.map((a) => [a.n, a.outcome, ranMs(a)])).toEqual([
      [1, "failed", 9],
      [2, "requeued", 60_000],
      [3, undefined, undefined],
    ]);
    expect(attemptOfFrame(attempts, 4)?.n).toBe(1);
    expect(attemptOfFrame(attempts, 8)?.n).toBe(2);
    expect(attemptOfFrame(attempts, 11)?.n).toBe(3);
    expect(attemptOfFrame(attempts, 1)).toBeUndefined();
  });

  it("a cancel while queued ends no attempt; events out of order are sorted by id", () => {
    const attempts = attemptsOf([
      { id: 4, name: "task.succeeded", at: at(50) },
      { id: 2, name: "task.cancelled", at: at(5) },
      { id: 3, name: "task.claimed", at: at(40) },
    ]);
    expect(attempts).toEqual([{ n: 1, fromId: 3, startedAt: at(40), endedAt: at(50), outcome: "succeeded" }]);
  });
});
