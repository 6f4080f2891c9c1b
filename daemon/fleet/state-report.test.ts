import { describe, expect, it } from "vitest";
import { FakeClock } from "../../test-support/fake-clock.js";
import { silentLogger } from "../../common/log.js";
import { createStateReporter } from "./state-report.js";

const settle = () => new Promise((r) => setImmediate(r));

function setup(send: (n: number) => Promise<unknown> = async () => undefined) {
  const clock = new FakeClock();
  let version = 0;
  const sent: number[] = [];
  const reporter = createStateReporter({
    clock,
    log: silentLogger,
    intervalMs: 60_000,
    debounceMs: 250,
    snapshot: () => version,
    send: async (n) => {
      await send(n);
      sent.push(n);
    },
  });
  return { clock, reporter, sent, bump: () => ++version };
}

describe("createStateReporter", () => {
  it("pushes at start, every interval, and soon after a burst of changes (once)", async () => {
    const { clock, reporter, sent, bump } = setup();
    reporter.start();
    await settle();
    expect(sent).toEqual([0]);
    bump();
    reporter.changed();
    bump();
    reporter.changed();
    clock.advance(249);
    await settle();
    expect(sent).toEqual([0]);
    clock.advance(1);
    await settle();
    expect(sent).toEqual([0, 2]);
    clock.advance(60_000);
    await settle();
    expect(sent).toEqual([0, 2, 2]);
    reporter.close();
    reporter.changed();
    clock.advance(120_000);
    await settle();
    expect(sent).toEqual([0, 2, 2]);
  });

  it("never overlaps pushes: a change during a push is sent right after it", async () => {
    let release: (() => void) | undefined;
    const { reporter, sent, bump } = setup((n) =>
      n === 0 ? new Promise<void>((r) => (release = r)) : Promise.resolve(),
    );
    const first = reporter.flush();
    await settle();
    bump();
    const second = reporter.flush();
    expect(second).toBe(first);
    release!();
    await first;
    expect(sent).toEqual([0, 1]);
    reporter.close();
  });

  it("survives a tower that is down and delivers at the next trigger", async () => {
    let down = true;
    const { clock, reporter, sent } = setup(async () => {
      if (down) throw new Error("connect ECONNREFUSED");
    });
    reporter.start();
    await settle();
    expect(sent).toEqual([]);
    down = false;
    clock.advance(60_000);
    await settle();
    expect(sent).toEqual([0]);
    reporter.close();
  });
});
