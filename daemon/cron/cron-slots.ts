// Which slots of a job are due. Cron jobs chain slot to slot (as croner does), so a slot moved by a
// DST gap is not lost; heartbeats count from their last slot (the anchor).
import type { CronJob } from "./cron-file.js";
import { ceilToTick, latestSlotIn, nextFire, nextSlot } from "./cron-schedule.js";

const SLOT_SCAN_CAP = 10_000;

const scheduleKey = (job: CronJob) => `${job.kind}\u0000${job.schedule ?? ""}\u0000${job.interval ?? ""}`;

export class SlotCursors {
  private readonly cursors = new Map<string, { key: string; next: number | null }>();

  constructor(
    private readonly tickMs: number,
    private readonly timeZone: string | undefined,
  ) {}

  /** Forgets the cursors of jobs no longer configured. */
  keepOnly(names: { has(name: string): boolean }): void {
    for (const name of this.cursors.keys()) if (!names.has(name)) this.cursors.delete(name);
  }

  /** Due slots of a cron job in (cursor, now]: the latest and how many (exact up to the cap). */
  dueCron(job: CronJob, windowStart: number, now: number): { latest: number | null; count: number } {
    const { tickMs, timeZone } = this;
    let cursor = this.cursors.get(job.name);
    if (!cursor || cursor.key !== scheduleKey(job)) {
      cursor = { key: scheduleKey(job), next: nextSlot(job, windowStart, timeZone, { tickMs }) };
      this.cursors.set(job.name, cursor);
    }
    let latest: number | null = null;
    let count = 0;
    while (cursor.next !== null && cursor.next <= now) {
      latest = cursor.next;
      count++;
      if (count >= SLOT_SCAN_CAP) {
        // A very long downtime with a dense schedule: jump to the present.
        const recent = latestSlotIn(job, Math.max(latest, now - 2 * tickMs), now, timeZone, { tickMs });
        if (recent.latest !== null) latest = recent.latest;
        cursor.next = nextSlot(job, now, timeZone, { tickMs });
        break;
      }
      cursor.next = nextSlot(job, cursor.next, timeZone, { tickMs });
    }
    return { latest, count };
  }

  /** Due slots of a heartbeat in (max(windowStart, anchor), now]. */
  dueHeartbeat(
    job: CronJob,
    anchorMs: number,
    windowStart: number,
    now: number,
  ): { latest: number | null; count: number } {
    const r = latestSlotIn(job, Math.max(windowStart, anchorMs), now, this.timeZone, { anchorMs, tickMs: this.tickMs });
    return { latest: r.latest, count: r.count };
  }

  /** When the job fires next (tick-rounded), after `now` and the last tick; null when it never will. */
  nextFireAt(job: CronJob, now: number, lastTick: number | undefined, anchorMs: number | undefined): number | null {
    const { tickMs, timeZone } = this;
    try {
      const after = Math.max(now, lastTick ?? now);
      const cursor = this.cursors.get(job.name);
      if (job.kind === "heartbeat" && anchorMs === undefined) return ceilToTick(now + 1, tickMs);
      if (job.kind === "cron" && cursor?.key === scheduleKey(job) && cursor.next !== null && cursor.next > after)
        return ceilToTick(cursor.next, tickMs);
      return nextFire(job, after, timeZone, { anchorMs, tickMs });
    } catch {
      return null;
    }
  }
}
