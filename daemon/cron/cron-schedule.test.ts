import { describe, expect, it } from "vitest";
import type { CronJob } from "./cron-file.js";
import { latestSlotIn, nextFire, nextSlot, validateSchedule } from "./cron-schedule.js";

const cron = (schedule: string): CronJob => ({
  name: "j",
  kind: "cron",
  schedule,
  prompt: "p",
  dispatch: "bash",
  missed: "skip",
  line: 1,
});
const heartbeat = (interval: string, intervalMs: number): CronJob => ({
  name: "h",
  kind: "heartbeat",
  interval,
  intervalMs,
  prompt: "p",
  dispatch: "bash",
  missed: "skip",
  line: 1,
});
const t = (s: string) => Date.parse(s);
const at = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

describe("nextFire", () => {
  it("reads schedules in the given time zone and is strictly after", () => {
    expect(at(nextFire(cron("0 9 * * *"), t("2026-06-01T12:00:00Z"), "America/New_York"))).toBe(
      "2026-06-01T13:00:00.000Z",
    );
    expect(at(nextFire(cron("0 9 * * *"), t("2026-06-01T13:00:00Z"), "America/New_York"))).toBe(
      "2026-06-02T13:00:00.000Z",
    );
    expect(at(nextFire(cron("0 9 * * *"), t("2026-06-01T12:00:00Z"), "Asia/Tokyo"))).toBe("2026-06-02T00:00:00.000Z");
    expect(at(nextFire(cron("* * * * *"), t("2026-06-01T12:00:00Z"), "UTC"))).toBe("2026-06-01T12:01:00.000Z");
  });

  it("rounds sub-minute slots up to the tick", () => {
    const job = cron("*/10 * * * * *");
    expect(at(nextSlot(job, t("2026-06-01T12:00:00Z"), "UTC"))).toBe("2026-06-01T12:00:10.000Z");
    expect(at(nextFire(job, t("2026-06-01T12:00:00Z"), "UTC"))).toBe("2026-06-01T12:01:00.000Z");
    expect(at(nextFire(job, t("2026-06-01T12:00:00Z"), "UTC", { tickMs: 5_000 }))).toBe("2026-06-01T12:00:10.000Z");
    expect(
      at(nextFire(heartbeat("20s", 20_000), t("2026-06-01T12:00:00Z"), "UTC", { anchorMs: t("2026-06-01T12:00:00Z") })),
    ).toBe("2026-06-01T12:01:00.000Z");
  });

  it("heartbeats repeat from their anchor, or start at the next tick", () => {
    const hb = heartbeat("2h30m", 9_000_000);
    const anchor = t("2026-06-01T10:00:00Z");
    expect(at(nextFire(hb, t("2026-06-01T11:00:00Z"), undefined, { anchorMs: anchor }))).toBe(
      "2026-06-01T12:30:00.000Z",
    );
    expect(at(nextFire(hb, t("2026-06-01T12:30:00Z"), undefined, { anchorMs: anchor }))).toBe(
      "2026-06-01T15:00:00.000Z",
    );
    expect(at(nextFire(hb, t("2026-06-01T11:00:20Z")))).toBe("2026-06-01T11:01:00.000Z");
    expect(latestSlotIn(hb, anchor, t("2026-06-02T10:00:00Z"), undefined, { anchorMs: anchor })).toEqual({
      latest: t("2026-06-02T08:30:00Z"),
      count: 9,
    });
  });

  it("finds the latest slot of a long window cheaply", () => {
    const r = latestSlotIn(cron("* * * * *"), t("2025-06-01T00:00:00Z"), t("2026-06-01T00:00:30Z"), "UTC");
    expect(at(r.latest)).toBe("2026-06-01T00:00:00.000Z");
    expect(
      latestSlotIn(cron("0 0 1 1 *"), t("2026-01-02T00:00:00Z"), t("2026-06-01T00:00:00Z"), "UTC").latest,
    ).toBeNull();
  });

  it("validates expressions", () => {
    expect(validateSchedule("*/5 * * * *")).toBeUndefined();
    expect(validateSchedule("0 9 * * mon-fri")).toBeUndefined();
    expect(validateSchedule("@daily")).toBeUndefined();
    expect(validateSchedule("@sometimes")).toMatch(/nickname/);
    expect(validateSchedule("* * *")).toMatch(/3 fields/);
    expect(validateSchedule("0 25 * * *")).toMatch(/invalid/);
    expect(validateSchedule(" ")).toMatch(/empty/);
  });
});
