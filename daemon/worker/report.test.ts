// Outcome reports that claim the agent's next task (claim_next): only the first attempt claims,
// and when that attempt got no answer the worker is told its agent may hold a task it never heard
// of (its next claim resumes). The tower client is a stub; the reporter is the real one.
import { describe, expect, it } from "vitest";
import { systemClock } from "../../common/clock.js";
import { silentLogger } from "../../common/log.js";
import type { InflightEntry, Journal } from "./journal.js";
import { createOutcomeReporter } from "./report.js";

function setup(answers: (() => unknown)[]) {
  const calls: { claimNext: boolean }[] = [];
  const lost: string[] = [];
  const tower = {
    work: {
      completeTask: async (req: { claimNext: boolean }) => {
        calls.push({ claimNext: req.claimNext });
        return answers.shift()!();
      },
      heartbeatTask: async () => ({}),
    },
  };
  const journal = { put: async () => {}, remove: async () => {} } as unknown as Journal;
  const reporter = createOutcomeReporter({
    tower: tower as never,
    journal,
    clock: systemClock,
    log: silentLogger,
    backoff: { initialMs: 1, maxMs: 2 },
    closed: () => false,
    nextMayBeHeld: (e) => lost.push(e.taskId),
  });
  const entry: InflightEntry = { taskId: "tsk_1", agentId: "agt_1", state: "reporting", startedAt: "", outcome: { ok: true, output: "", retryable: false } };
  return { reporter, entry, calls, lost };
}

/** The first call's answer never arrives (the connection dropped); the retry is answered. */
const lostThenAnswered = () => [
  () => {
    throw new Error("socket hang up");
  },
  () => ({}),
];

describe("an outcome report with claim_next", () => {
  it("whose first answer is lost: retried without claiming, and the agent's next claim is told to resume", async () => {
    const { reporter, entry, calls, lost } = setup(lostThenAnswered());
    await reporter.deliver(entry, true);
    expect(calls).toEqual([{ claimNext: true }, { claimNext: false }]);
    expect(lost).toEqual(["tsk_1"]);
  });

  it("answered at once: nothing may be held", async () => {
    const { reporter, entry, lost } = setup([() => ({})]);
    await reporter.deliver(entry, true);
    expect(lost).toEqual([]);
  });

  it("without claim_next, a lost answer holds nothing", async () => {
    const { reporter, entry, calls, lost } = setup(lostThenAnswered());
    await reporter.deliver(entry, false);
    expect(calls).toEqual([{ claimNext: false }, { claimNext: false }]);
    expect(lost).toEqual([]);
  });
});
