import { waitFor } from "../../test-support/wait.js";
import { afterEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../test-support/fake-clock.js";
import { createProcessBackend } from "./process-backend.js";
import type { Watchdog, WatchdogEvent, WatchdogOptions } from "./watchdog.js";
import { createWatchdog } from "./watchdog.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(opts: Partial<WatchdogOptions> = {}, start = "2026-04-01T12:00:00Z") {
  const clock = new FakeClock(start);
  const backend = createProcessBackend();
  const events: WatchdogEvent[] = [];
  const wd = createWatchdog({ clock, backend, autoPoll: false, onEvent: (e) => events.push(e), ...opts });
  cleanups.push(
    () => backend.close(),
    () => wd.close(),
  );
  const agent = { id: "pm-1", name: "pm", command: ["sleep", "1000"] };
  /** Kills the agent's process the way a crash would, and waits until it is really gone. */
  const crash = async (wd: Watchdog) => {
    const pid = wd.status("pm-1").pid!;
    process.kill(pid, "SIGKILL");
    await waitFor(async () => !(await backend.isAlive("pm-1")));
    return pid;
  };
  const step = async (ms: number) => {
    clock.advance(ms);
    return wd.poll();
  };
  return { clock, backend, events, wd, agent, crash, step };
}

const actions = (events: WatchdogEvent[]) => events.map((e) => e.action);

describe("watchdog", () => {
  it("restarts a dead agent at the next poll, not before", async () => {
    const { wd, agent, events, crash, step } = setup();
    const added = await wd.add(agent);
    expect(added).toMatchObject({ state: "running", paused: false, restarts: 0 });
    expect(actions(events)).toEqual(["start"]);
    expect(await step(100_000)).toEqual([]); // alive after the grace: the start is confirmed

    const oldPid = await crash(wd);
    expect(wd.status("pm-1").pid).toBe(oldPid); // nothing happens between polls
    const polled = await step(60_000);
    expect(polled).toEqual([
      expect.objectContaining({
        action: "restart",
        agentId: "pm-1",
        name: "pm",
        reason: "found dead by the watchdog poll",
      }),
    ]);
    const now = wd.status("pm-1");
    expect(now).toMatchObject({ state: "running", restarts: 1, lastRestartAt: "2026-04-01T12:02:40.000Z" });
    expect(now.pid).not.toBe(oldPid);
  });

  it(
    "never restarts inside the grace, and throttles retries " +
      "for 30 minutes after a restart that did not bring it back",
    async () => {
      const { wd, agent, events, crash, step } = setup();
      await wd.add(agent);
      await step(100_000);
      await crash(wd);
      await step(60_000); // restart at t = 160 s
      const restartAt = Date.parse(wd.status("pm-1").lastRestartAt!);
      await crash(wd); // dies again straight away

      const inGrace = await step(60_000); // 60 s after the restart
      expect(inGrace).toEqual([
        expect.objectContaining({ action: "skip", reason: expect.stringMatching(/within the 90 s grace/) }),
      ]);
      expect(wd.status("pm-1")).toMatchObject({ state: "dead", restarts: 1 });

      const throttled = await step(60_000); // 120 s after: the restart did not bring it back
      expect(throttled).toEqual([
        expect.objectContaining({
          action: "skip",
          reason: expect.stringMatching(/did not bring it back; at most one retry per 30 min/),
        }),
      ]);
      expect(wd.status("pm-1").nextRetryAt).toBe(new Date(restartAt + 30 * 60_000).toISOString());

      // 30 minutes of polls: no restart, and the throttle is reported once, not every minute
      const during: WatchdogEvent[] = [];
      for (let t = 180_000; t < 30 * 60_000; t += 60_000) during.push(...(await step(60_000)));
      expect(during).toEqual([]);
      expect(wd.status("pm-1").restarts).toBe(1);

      const retry = await step(60_000); // exactly 30 minutes after the failed restart
      expect(retry).toEqual([
        expect.objectContaining({ action: "restart", reason: expect.stringMatching(/throttled retry/) }),
      ]);
      expect(Date.parse(retry[0].at) - restartAt).toBe(30 * 60_000);
      expect(wd.status("pm-1")).toMatchObject({ state: "running", restarts: 2 });

      // that one worked: once confirmed after the grace, a later death is restarted at once again
      await step(120_000);
      expect(wd.status("pm-1").nextRetryAt).toBeUndefined();
      await crash(wd);
      expect(actions(await step(60_000))).toEqual(["restart"]);
      expect(actions(events)).toEqual(["start", "restart", "skip", "skip", "restart", "restart"]);
    },
  );

  it("honours pause and resume", async () => {
    const { wd, agent, events, crash, step } = setup();
    await wd.add(agent);
    await step(100_000);
    expect(wd.pause("pm-1").paused).toBe(true);
    await crash(wd);
    expect(await step(60_000)).toEqual([
      expect.objectContaining({ action: "skip", reason: expect.stringMatching(/paused/) }),
    ]);
    expect(await step(60_000)).toEqual([]);
    expect(await step(60_000)).toEqual([]);
    expect(wd.status("pm-1")).toMatchObject({ state: "dead", paused: true, restarts: 0 });

    expect(wd.resume("pm-1").paused).toBe(false);
    expect(await step(60_000)).toEqual([expect.objectContaining({ action: "restart" })]);
    expect(wd.status("pm-1")).toMatchObject({ state: "running", restarts: 1 });
    expect(actions(events)).toEqual(["start", "pause", "skip", "resume", "restart"]);
  });

  it("an operator restart happens even when paused; remove stops supervising", async () => {
    const { wd, agent, step, backend } = setup();
    await wd.add(agent, { paused: true });
    expect(wd.status("pm-1")).toMatchObject({ state: "dead", paused: true });
    const restarted = await wd.restart("pm-1");
    expect(restarted).toMatchObject({
      state: "running",
      paused: true,
      restarts: 1,
      lastRestartReason: "restart requested by an operator",
    });
    expect(wd.remove("pm-1")).toBe(true);
    expect(wd.list()).toEqual([]);
    expect(() => wd.status("pm-1")).toThrow(expect.objectContaining({ code: "agent_not_found" }));
    expect(() => wd.pause("nope")).toThrow(expect.objectContaining({ code: "agent_not_found" }));
    process.kill(restarted.pid!, "SIGKILL");
    await waitFor(async () => !(await backend.isAlive("pm-1")));
    expect(await step(200_000)).toEqual([]);
  });

  it("restarts every unpaused agent at the nightly local time", async () => {
    // 02:50 EDT on April 1 2026 in New York
    const { wd, agent, events, step, backend } = setup(
      { nightly: "03:00", timeZone: "America/New_York" },
      "2026-04-01T06:50:00Z",
    );
    await wd.add(agent);
    await wd.add({ id: "paused-1", name: "quiet", command: ["sleep", "1000"] });
    wd.pause("paused-1");
    const before = wd.status("pm-1").pid;
    for (let i = 0; i < 9; i++) await step(60_000);
    expect(events.filter((e) => e.reason.includes("nightly"))).toEqual([]);
    const at3 = await step(60_000); // 07:00 UTC = 03:00 EDT
    expect(at3).toEqual([
      expect.objectContaining({
        agentId: "pm-1",
        action: "restart",
        reason: "nightly restart at 03:00",
        at: "2026-04-01T07:00:00.000Z",
      }),
      expect.objectContaining({
        agentId: "paused-1",
        action: "skip",
        reason: expect.stringMatching(/nightly restart at 03:00 skipped/),
      }),
    ]);
    expect(wd.status("pm-1").pid).not.toBe(before);
    expect(await backend.isAlive("pm-1")).toBe(true);
    for (let i = 0; i < 60; i++) expect(await step(60_000)).toEqual([]);
  });

  it("polls on its own every pollMs of clock time", async () => {
    const { wd, agent, events, clock, crash } = setup({ autoPoll: true });
    await wd.add(agent);
    clock.advance(120_000); // polls at 60 s (inside the grace) and 120 s (confirms the start)
    await wd.poll();
    await crash(wd);
    clock.advance(60_000);
    await waitFor(() => events.some((e) => e.action === "restart"));
    expect(wd.status("pm-1").restarts).toBe(1);
  });

  it("rejects bad settings with the field named", () => {
    const clock = new FakeClock();
    const backend = createProcessBackend();
    expect(() => createWatchdog({ clock, backend, nightly: "25:00" })).toThrow(
      expect.objectContaining({ details: { field: "nightly" } }),
    );
    expect(() => createWatchdog({ clock, backend, graceMs: -1 })).toThrow(
      expect.objectContaining({ details: { field: "graceMs" } }),
    );
  });
});
