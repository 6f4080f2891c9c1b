import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../test-support/fake-clock.js";
import { waitFor } from "../../test-support/wait.js";
import { EpError } from "../../common/errors.js";
import type { CronDispatchResult } from "./bash-dispatch.js";
import { createJobDispatch } from "./bash-dispatch.js";
import type { CronJob } from "./cron-file.js";
import type { CronDispatcher, CronDispatcherDeps } from "./cron-dispatcher.js";
import { createCronDispatcher } from "./cron-dispatcher.js";
import { createFileCronStore } from "./cron-store.js";

const NY = "America/New_York";
const settle = () => new Promise<void>((r) => setImmediate(r));

interface Harness {
  dir: string;
  file: string;
  statePath: string;
  clock: FakeClock;
  calls: { job: string; slot: string }[];
  make(overrides?: Partial<CronDispatcherDeps>): CronDispatcher;
  /** Advances fake time minute by minute, letting each tick's fires settle. */
  run(ms: number): Promise<void>;
}

const open: CronDispatcher[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((d) => d.close()));
});

function harness(toml: string, start: string): Harness {
  const dir = mkdtempSync(join(tmpdir(), "ep-cron-"));
  const file = join(dir, "cron.toml");
  writeFileSync(file, toml);
  const clock = new FakeClock(start);
  const calls: { job: string; slot: string }[] = [];
  const statePath = join(dir, "cron-state.json");
  const h: Harness = {
    dir,
    file,
    statePath,
    clock,
    calls,
    make(overrides = {}) {
      const d = createCronDispatcher({
        clock,
        file,
        store: createFileCronStore(statePath),
        timeZone: NY,
        dispatch: async (job: CronJob, slot: number): Promise<CronDispatchResult> => {
          calls.push({ job: job.name, slot: new Date(slot).toISOString() });
          return { status: "ok" };
        },
        ...overrides,
      });
      open.push(d);
      return d;
    },
    async run(ms) {
      for (let left = ms; left > 0; left -= 60_000) {
        clock.advance(Math.min(60_000, left));
        await settle();
      }
    },
  };
  return h;
}

const slotsOf = (h: Harness, job: string) => h.calls.filter((c) => c.job === job).map((c) => c.slot);
const nyHour = (isoTime: string) =>
  new Intl.DateTimeFormat("en-US", { timeZone: NY, hour: "numeric", minute: "2-digit", hourCycle: "h23" }).format(
    new Date(isoTime),
  );

describe("cron dispatcher schedules", () => {
  it("fires the jobs around midnight on the right local day", async () => {
    const h = harness(
      `[[job]]\nname = "late"\nschedule = "59 23 * * *"\nsession = "s"\nprompt = "p"\n` +
        `[[job]]\nname = "midnight"\nschedule = "0 0 * * *"\nsession = "s"\nprompt = "p"\n` +
        `[[job]]\nname = "jan15"\nschedule = "5 0 15 1 *"\nsession = "s"\nprompt = "p"\n`,
      "2026-01-15T04:50:00Z", // 23:50 on Jan 14 in New York
    );
    const d = h.make();
    await d.start();
    expect(d.list().map((j) => [j.name, j.nextFireAt])).toEqual([
      ["late", "2026-01-15T04:59:00.000Z"],
      ["midnight", "2026-01-15T05:00:00.000Z"],
      ["jan15", "2026-01-15T05:05:00.000Z"],
    ]);
    await h.run(20 * 60_000);
    expect(slotsOf(h, "late")).toEqual(["2026-01-15T04:59:00.000Z"]);
    expect(slotsOf(h, "midnight")).toEqual(["2026-01-15T05:00:00.000Z"]);
    expect(slotsOf(h, "jan15")).toEqual(["2026-01-15T05:05:00.000Z"]);
    expect(d.describe("midnight").lastFire).toMatchObject({ status: "ok", slot: "2026-01-15T05:00:00.000Z" });
    expect(d.describe("late").nextFireAt).toBe("2026-01-16T04:59:00.000Z");
  });

  it("follows local time through the spring-forward DST change in New York (March 8 2026)", async () => {
    const h = harness(
      `[[job]]\nname = "hourly"\nschedule = "0 * * * *"\nsession = "s"\nprompt = "p"\n` +
        `[[job]]\nname = "two-thirty"\nschedule = "30 2 * * *"\nsession = "s"\nprompt = "p"\n` +
        `[[job]]\nname = "nine"\nschedule = "0 9 * * *"\nsession = "s"\nprompt = "p"\n`,
      "2026-03-08T04:59:30Z", // 23:59:30 EST on March 7
    );
    const d = h.make();
    await d.start();
    await h.run(24 * 3_600_000);
    const hourly = slotsOf(h, "hourly");
    // 23 hours in that local day: 02:00 does not exist.
    expect(hourly).toHaveLength(24);
    expect(hourly.slice(0, 23).map(nyHour)).toEqual(
      [0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23].map(
        (n) => `${String(n).padStart(2, "0")}:00`,
      ),
    );
    expect(hourly[23]).toBe("2026-03-09T04:00:00.000Z"); // midnight EDT on March 9
    // The skipped wall time fires once that day (croner moves it past the gap), never twice.
    expect(slotsOf(h, "two-thirty")).toEqual(["2026-03-08T07:30:00.000Z"]);
    // 09:00 EDT is 13:00 UTC after the change (14:00 UTC before it).
    expect(slotsOf(h, "nine")).toEqual(["2026-03-08T13:00:00.000Z"]);
  });

  it("fires a time inside the repeated hour of the fall-back change once (November 1 2026)", async () => {
    const h = harness(
      `[[job]]\nname = "one-thirty"\nschedule = "30 1 * * *"\nsession = "s"\nprompt = "p"\n`,
      "2026-11-01T04:00:00Z",
    );
    const d = h.make();
    await d.start();
    await h.run(4 * 3_600_000);
    expect(slotsOf(h, "one-thirty")).toEqual(["2026-11-01T05:30:00.000Z"]);
  });

  it("sub-minute schedules and heartbeat intervals never fire faster than the tick", async () => {
    const h = harness(
      `[[job]]\nname = "every10s"\nschedule = "*/10 * * * * *"\nsession = "s"\nprompt = "p"\n` +
        `[[job]]\nname = "hb15s"\nkind = "heartbeat"\ninterval = "15s"\nsession = "s"\nprompt = "p"\n` +
        `[[job]]\nname = "hb90s"\nkind = "heartbeat"\ninterval = "90s"\nsession = "s"\nprompt = "p"\n` +
        `[[job]]\nname = "hb2h30m"\nkind = "heartbeat"\ninterval = "2h30m"\nsession = "s"\nprompt = "p"\n`,
      "2026-05-01T12:00:00Z",
    );
    const d = h.make();
    await d.start();
    expect(d.list().find((j) => j.name === "every10s")!.nextFireAt).toBe("2026-05-01T12:01:00.000Z");
    await h.run(10 * 60_000);
    const gaps = (slots: string[]) => slots.slice(1).map((s, i) => (Date.parse(s) - Date.parse(slots[i])) / 1000);
    // start tick at 12:00 plus one per tick for ten minutes
    expect(slotsOf(h, "every10s")).toHaveLength(11);
    expect(gaps(slotsOf(h, "every10s")).every((g) => g === 60)).toBe(true);
    expect(slotsOf(h, "hb15s")).toHaveLength(11);
    expect(gaps(slotsOf(h, "hb15s")).every((g) => g >= 60)).toBe(true);
    // 90 s heartbeat: slots on its own grid, fired at the first tick at or after each slot
    expect(slotsOf(h, "hb90s").map((s) => s.slice(11, 19))).toEqual([
      "12:00:00",
      "12:01:30",
      "12:03:00",
      "12:04:30",
      "12:06:00",
      "12:07:30",
      "12:09:00",
    ]);
    expect(slotsOf(h, "hb2h30m")).toEqual(["2026-05-01T12:00:00.000Z"]);
    expect(d.describe("hb2h30m").nextFireAt).toBe("2026-05-01T14:30:00.000Z");
    await h.run(2 * 3_600_000 + 20 * 60_000);
    expect(slotsOf(h, "hb2h30m")).toEqual(["2026-05-01T12:00:00.000Z", "2026-05-01T14:30:00.000Z"]);
  });
});

describe("cron dispatcher restarts", () => {
  it("a dispatcher recreated within the same minute does not fire the slot again", async () => {
    const h = harness(
      `[[job]]\nname = "m"\nschedule = "* * * * *"\nsession = "s"\nprompt = "p"\n`,
      "2026-02-02T10:00:00Z",
    );
    const a = h.make();
    await a.start();
    expect(slotsOf(h, "m")).toEqual(["2026-02-02T10:00:00.000Z"]);
    await a.close();

    h.clock.advance(30_000);
    const b = h.make();
    await b.start();
    await b.tick();
    expect(slotsOf(h, "m")).toEqual(["2026-02-02T10:00:00.000Z"]);
    await h.run(30_000);
    expect(slotsOf(h, "m")).toEqual(["2026-02-02T10:00:00.000Z", "2026-02-02T10:01:00.000Z"]);
    expect(b.history("m").map((f) => f.slot)).toEqual(["2026-02-02T10:01:00.000Z", "2026-02-02T10:00:00.000Z"]);
  });

  it("a slot claimed just before a crash (tick not recorded) is not fired again by the next process", async () => {
    const h = harness(
      `[[job]]\nname = "m"\nschedule = "* * * * *"\nsession = "s"\nprompt = "p"\n`,
      "2026-02-02T10:00:20Z",
    );
    const crashed = createFileCronStore(h.statePath);
    crashed.setLastTick(Date.parse("2026-02-02T09:59:00Z"));
    crashed.claim("m", Date.parse("2026-02-02T10:00:00Z"), Date.parse("2026-02-02T10:00:00Z"));
    const d = h.make();
    await d.start();
    expect(h.calls).toEqual([]);
  });

  it("missed slots while down follow each job's policy: skip (default) or run_once", async () => {
    const toml =
      `[[job]]\nname = "skipper"\nschedule = "0 * * * *"\nsession = "s"\nprompt = "p"\n` +
      `[[job]]\nname = "catchup"\nschedule = "0 * * * *"\nsession = "s"\nprompt = "p"\nmissed = "run_once"\n` +
      `[[job]]\nname = "hb"\nkind = "heartbeat"\ninterval = "1h"\nsession = "s"\nprompt = "p"\n` +
      (`[[job]]\nname = "hb-once"\nkind = "heartbeat"\ninterval ` +
        `= "1h"\nsession = "s"\nprompt = "p"\nmissed = "run_once"\n`);
    const h = harness(toml, "2026-02-02T10:00:00Z");
    const a = h.make();
    await a.start();
    expect(h.calls.map((c) => c.job).sort()).toEqual(["catchup", "hb", "hb-once", "skipper"]);
    await a.close();
    h.calls.length = 0;

    h.clock.set("2026-02-02T13:05:00Z"); // down for three hours
    const b = h.make();
    await b.start();
    expect(h.calls.map((c) => `${c.job} ${c.slot}`).sort()).toEqual([
      "catchup 2026-02-02T13:00:00.000Z",
      "hb-once 2026-02-02T13:00:00.000Z",
    ]);
    expect(b.history("skipper")[0]).toMatchObject({ status: "skipped", slot: "2026-02-02T13:00:00.000Z" });
    expect(b.history("skipper")[0].error).toMatch(/^3 slots missed .*missed = "skip"/);
    expect(b.history("hb")[0]).toMatchObject({ status: "skipped", slot: "2026-02-02T13:00:00.000Z" });
    // Skipping re-anchors the heartbeat: its next slot is an interval after the skipped one.
    expect(b.describe("hb").nextFireAt).toBe("2026-02-02T14:00:00.000Z");
    await h.run(60 * 60_000);
    expect(h.calls.map((c) => `${c.job} ${c.slot}`).sort()).toEqual([
      "catchup 2026-02-02T13:00:00.000Z",
      "catchup 2026-02-02T14:00:00.000Z",
      "hb 2026-02-02T14:00:00.000Z",
      "hb-once 2026-02-02T13:00:00.000Z",
      "hb-once 2026-02-02T14:00:00.000Z",
      "skipper 2026-02-02T14:00:00.000Z",
    ]);
  });

  it("the state file is plain JSON written by rename", async () => {
    const h = harness(
      `[[job]]\nname = "m"\nschedule = "* * * * *"\nsession = "s"\nprompt = "p"\n`,
      "2026-02-02T10:00:00Z",
    );
    await h.make().start();
    const state = JSON.parse(readFileSync(h.statePath, "utf8"));
    expect(state.version).toBe(1);
    expect(state.lastTickAt).toBe(Date.parse("2026-02-02T10:00:00Z"));
    expect(state.history.m).toHaveLength(1);
  });
});

describe("cron dispatcher management", () => {
  it("reload with a broken cron.toml keeps the running jobs and reports every error with its line", async () => {
    const h = harness(
      `[[job]]\nname = "keep"\nschedule = "* * * * *"\nsession = "s"\nprompt = "p"\n`,
      "2026-02-02T10:00:30Z",
    );
    const d = h.make();
    await d.start();
    writeFileSync(
      h.file,
      `[[job]]\nname = "keep"\nschedule = "nope"\nsession = "s"\nprompt = "p"\n\n[[job]]\nname = "x"\nprompt = "p"\n`,
    );
    let caught: unknown;
    try {
      d.reload();
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(EpError);
    const err = caught as EpError;
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toMatch(/line 3, job "keep", field schedule/);
    expect(err.message).toMatch(/line 7, job "x", field schedule/);
    expect(err.details?.errors as unknown[]).toHaveLength(3);
    expect(d.loadErrors()).toHaveLength(3);
    expect(d.list().map((j) => j.name)).toEqual(["keep"]);
    await h.run(60_000);
    expect(slotsOf(h, "keep")).toEqual(["2026-02-02T10:01:00.000Z"]);

    writeFileSync(h.file, `[[job]]\nname = "new"\nschedule = "* * * * *"\ndispatch = "bash"\nprompt = "true"\n`);
    expect(d.reload()).toEqual({ jobs: 1 });
    expect(d.loadErrors()).toEqual([]);
    expect(d.list().map((j) => j.name)).toEqual(["new"]);
    // history of a removed job stays readable; an unknown name is not_found
    expect(d.history("keep")).toHaveLength(1);
    expect(() => d.describe("keep")).toThrow(expect.objectContaining({ code: "not_found" }));
    expect(() => d.history("never")).toThrow(expect.objectContaining({ code: "not_found" }));
  });

  it("starts with no jobs when cron.toml is invalid and recovers on reload", async () => {
    const h = harness(`[[job]\n`, "2026-02-02T10:00:30Z");
    const d = h.make();
    await d.start();
    expect(d.list()).toEqual([]);
    expect(d.loadErrors()[0].line).toBe(1);
    writeFileSync(h.file, `[[job]]\nname = "a"\nschedule = "@hourly"\nsession = "s"\nprompt = "p"\n`);
    expect(d.reload().jobs).toBe(1);
  });

  it("bash dispatch keeps output and exit code in the history", async () => {
    const h = harness(
      `[[job]]\nname = "fails"\nschedule = "* * * * *"\ndispatch ` +
        `= "bash"\nprompt = "echo out; echo err >&2; exit 3"\n` +
        `[[job]]\nname = "works"\nschedule = "* * * * *"\ndispatch = "bash"\nprompt = "printf '%s' \\"$((6*7))\\""\n` +
        `[[job]]\nname = "signals"\nschedule = "* * * * *"\nsession = "pm"\nprompt = "/standup"\n`,
      "2026-02-02T10:00:00Z",
    );
    const signalled: string[] = [];
    const fired: string[] = [];
    const d = h.make({
      dispatch: createJobDispatch({
        signal: async (job) => {
          signalled.push(`${job.session}: ${job.prompt}`);
          return { status: "ok" };
        },
      }),
      onFire: (f) => fired.push(`${f.job} ${f.status}`),
    });
    await d.start();
    expect(signalled).toEqual(["pm: /standup"]);
    expect(fired.sort()).toEqual(["fails failed", "signals ok", "works ok"]);
    const fail = d.history("fails")[0];
    expect(fail).toMatchObject({ status: "failed", exitCode: 3, error: "exited with code 3" });
    expect(fail.output).toContain("out\n");
    expect(fail.output).toContain("err\n");
    expect(d.history("works")[0]).toMatchObject({ status: "ok", exitCode: 0, output: "42" });
    expect(d.describe("works").lastFire?.output).toBe("42");
  });

  it("a job still running when its next slot comes is skipped for that slot", async () => {
    const h = harness(
      `[[job]]\nname = "slow"\nschedule = "* * * * *"\nsession = "s"\nprompt = "p"\n`,
      "2026-02-02T10:00:00Z",
    );
    let release!: () => void;
    const d = h.make({
      dispatch: () => new Promise<CronDispatchResult>((r) => (release = () => r({ status: "ok" }))),
    });
    const first = d.tick();
    h.clock.advance(60_000);
    const second = await d.tick();
    expect(second).toEqual([
      expect.objectContaining({ status: "skipped", error: expect.stringMatching(/still running/) }),
    ]);
    expect(d.describe("slow").running).toBe(true);
    release();
    expect((await first).map((f) => f.status)).toEqual(["ok"]);
  });

  it("gcNow removes stale dedup entries", async () => {
    const h = harness(
      `[[job]]\nname = "m"\nschedule = "* * * * *"\ndispatch = "bash"\nprompt = "true"\n`,
      "2026-02-02T10:00:00Z",
    );
    const store = createFileCronStore(join(h.dir, "gc.json"));
    const d = h.make({ store, dedupRetentionMs: 10 * 60_000, dispatch: async () => ({ status: "ok" }) });
    for (let i = 0; i < 5; i++) {
      await d.tick();
      h.clock.advance(60_000);
    }
    expect(store.dedupCount()).toBe(5);
    expect(d.gcNow()).toBe(0);
    h.clock.advance(13 * 60_000);
    expect(d.gcNow()).toBe(5);
    expect(store.dedupCount()).toBe(0);
    // the heartbeat anchor / last slot survives gc
    expect(store.lastSlot("m")).toBe(Date.parse("2026-02-02T10:04:00Z"));
  });

  it("close aborts a running bash job and records it", async () => {
    const h = harness(
      `[[job]]\nname = "long"\nschedule = "* * * * *"\ndispatch = "bash"\nprompt = "sleep 30"\n`,
      "2026-02-02T10:00:00Z",
    );
    const d = h.make({ dispatch: createJobDispatch({ signal: async () => ({ status: "ok" }) }) });
    const ticking = d.tick();
    await waitFor(() => d.describe("long").running);
    await d.close();
    const [fire] = await ticking;
    expect(fire).toMatchObject({ status: "failed", error: expect.stringMatching(/cancelled/) });
  });

  it("rejects an unknown time zone", () => {
    const h = harness("", "2026-02-02T10:00:00Z");
    expect(() => h.make({ timeZone: "Mars/Olympus" })).toThrow(expect.objectContaining({ code: "invalid_argument" }));
  });
});
