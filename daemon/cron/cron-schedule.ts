// When a job's slots fall. A slot is the nominal instant a job is scheduled for; the dispatcher
// fires at most one slot per job per tick, so the effective fire time is the slot rounded up to
// the tick grid (sub-minute schedules and intervals never fire faster than the tick).
import { Cron } from "croner";
import type { CronJob } from "./cron-types.js";

export const DEFAULT_TICK_MS = 60_000;

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000 } as const;
const MAX_INTERVAL_MS = 366 * UNIT_MS.d;

/** `30s`, `15m`, `2h`, `1d`, or compound in descending units such as `1d12h` or `2h30m`. */
export function parseInterval(text: string): number {
  const m = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/.exec(text.trim());
  if (!text.trim() || !m) {
    throw new Error(
      `interval "${text}" is not like "30s", "15m", "2h", "1d" or "2h30m" (units d, h, m, s, largest first)`,
    );
  }
  const [, d, h, min, s] = m;
  const ms =
    Number(d ?? 0) * UNIT_MS.d + Number(h ?? 0) * UNIT_MS.h + Number(min ?? 0) * UNIT_MS.m + Number(s ?? 0) * UNIT_MS.s;
  if (ms <= 0) throw new Error(`interval "${text}" must be longer than zero`);
  if (ms > MAX_INTERVAL_MS) throw new Error(`interval "${text}" is longer than 366 days`);
  return ms;
}

const NICKNAMES = new Set(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]);

/** Returns why a schedule is unusable, or undefined when it is fine. */
export function validateSchedule(schedule: string): string | undefined {
  const expr = schedule.trim();
  if (!expr) return "schedule must not be empty";
  if (expr.startsWith("@")) {
    if (!NICKNAMES.has(expr.toLowerCase()))
      return `unknown schedule nickname "${expr}"; use ${[...NICKNAMES].join(", ")}`;
  } else {
    const fields = expr.split(/\s+/).length;
    if (fields !== 5 && fields !== 6) {
      return `schedule "${expr}" has ${fields} fields; write 5 (minute hour day-of-month month day-of-week)`;
    }
  }
  try {
    cronFor(expr, undefined);
  } catch (err) {
    return `schedule "${expr}" is invalid: ${(err as Error).message.replace(/^CronPattern: /, "")}`;
  }
  return undefined;
}

/** Throws when the time zone is not a valid IANA name. */
export function validateTimeZone(timeZone: string): void {
  new Intl.DateTimeFormat("en-US", { timeZone });
}

const cronCache = new Map<string, Cron>();
function cronFor(schedule: string, timeZone: string | undefined): Cron {
  const key = `${schedule}\u0000${timeZone ?? ""}`;
  let cron = cronCache.get(key);
  if (!cron) {
    cron = new Cron(schedule, { paused: true, ...(timeZone ? { timezone: timeZone } : {}) });
    if (cronCache.size > 512) cronCache.clear();
    cronCache.set(key, cron);
  }
  return cron;
}

export interface SlotOptions {
  /** Last slot the job fired or skipped; heartbeat slots are anchor + k * interval. */
  anchorMs?: number;
  tickMs?: number;
}

export const ceilToTick = (ms: number, tickMs: number): number => Math.ceil(ms / tickMs) * tickMs;
export const floorToTick = (ms: number, tickMs: number): number => Math.floor(ms / tickMs) * tickMs;

/**
 * The first nominal slot strictly after `afterMs`, or null when there is none.
 * Cron jobs follow their schedule in `timeZone` (default: the process's local zone).
 * A heartbeat with an anchor repeats every interval from it; without one (never fired)
 * its first slot is the next tick boundary.
 */
export function nextSlot(job: CronJob, afterMs: number, timeZone?: string, opts: SlotOptions = {}): number | null {
  const tickMs = opts.tickMs ?? DEFAULT_TICK_MS;
  if (job.kind === "heartbeat") {
    const interval = job.intervalMs ?? parseInterval(job.interval ?? "");
    if (opts.anchorMs === undefined) return floorToTick(afterMs, tickMs) + tickMs;
    const k = Math.max(1, Math.floor((afterMs - opts.anchorMs) / interval) + 1);
    return opts.anchorMs + k * interval;
  }
  const next = cronFor(job.schedule ?? "", timeZone).nextRun(new Date(afterMs));
  return next ? next.getTime() : null;
}

/** When the job will actually fire after `afterMs`: its next slot rounded up to the tick grid. */
export function nextFire(job: CronJob, afterMs: number, timeZone?: string, opts: SlotOptions = {}): number | null {
  const slot = nextSlot(job, afterMs, timeZone, opts);
  return slot === null ? null : ceilToTick(slot, opts.tickMs ?? DEFAULT_TICK_MS);
}

/** The latest slot in (fromExclusive, toInclusive] and how many slots it holds (counting stops at `cap`). */
export function latestSlotIn(
  job: CronJob,
  fromExclusive: number,
  toInclusive: number,
  timeZone?: string,
  opts: SlotOptions & { cap?: number } = {},
): { latest: number | null; count: number } {
  if (toInclusive <= fromExclusive) return { latest: null, count: 0 };
  if (job.kind === "heartbeat") {
    if (opts.anchorMs === undefined) return { latest: null, count: 0 };
    const interval = job.intervalMs ?? parseInterval(job.interval ?? "");
    const last = Math.floor((toInclusive - opts.anchorMs) / interval);
    const first = Math.max(1, Math.floor((fromExclusive - opts.anchorMs) / interval) + 1);
    if (last < first) return { latest: null, count: 0 };
    return { latest: opts.anchorMs + last * interval, count: last - first + 1 };
  }
  const cap = opts.cap ?? 10_000;
  // Walk back in growing windows so a long downtime with a dense schedule stays cheap.
  let count = 0;
  for (let width = 60_000; ; width *= 8) {
    const from = Math.max(fromExclusive, toInclusive - width);
    let latest: number | null = null;
    let n = 0;
    for (
      let s = nextSlot(job, from, timeZone, opts);
      s !== null && s <= toInclusive;
      s = nextSlot(job, s, timeZone, opts)
    ) {
      latest = s;
      if (++n >= cap) break;
    }
    if (latest !== null || from === fromExclusive) {
      count = n;
      if (latest !== null && from > fromExclusive)
        count = n + (nextSlot(job, fromExclusive, timeZone, opts)! <= from ? 1 : 0);
      return { latest, count };
    }
  }
}
