// Firing one slot: claimed in the store first (so a restart never fires it twice), skipped while
// the job's previous run is still going, dispatched, and recorded in the history (output trimmed
// to its end) before the daemon hears of it.
import type { Clock } from "../../common/clock.js";
import { iso } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { CronDispatch, CronDispatchResult } from "./bash-dispatch.js";
import type { CronJob } from "./cron-file.js";
import type { CronFire, CronStore } from "./cron-store.js";

export interface FirerDeps {
  clock: Clock;
  store: CronStore;
  log: Logger;
  dispatch: CronDispatch;
  onFire?: (fire: CronFire) => void;
  /** aborts every dispatch (close) */
  signal: AbortSignal;
  /** names of the jobs dispatching now */
  running: Set<string>;
  maxOutputChars: number;
}

export function createFirer({ clock, store, log, dispatch, onFire, signal, running, maxOutputChars }: FirerDeps) {
  function recordFire(fire: CronFire): CronFire {
    store.record(fire);
    try {
      onFire?.(fire);
    } catch (err) {
      log.warn("cron onFire callback failed", { job: fire.job, error: String(err) });
    }
    return fire;
  }

  function skip(job: CronJob, slot: number, now: number, reason: string): CronFire | undefined {
    if (!store.claim(job.name, slot, now)) return undefined;
    log.info("cron slot skipped", { job: job.name, slot: iso(slot), reason });
    return recordFire({ job: job.name, slot: iso(slot), firedAt: iso(now), status: "skipped", error: reason });
  }

  async function fire(job: CronJob, slot: number, now: number): Promise<CronFire | undefined> {
    if (running.has(job.name)) return skip(job, slot, now, "the previous run of this job is still running");
    if (!store.claim(job.name, slot, now)) {
      log.debug("cron slot already fired", { job: job.name, slot: iso(slot) });
      return undefined;
    }
    running.add(job.name);
    log.info("cron fire", { job: job.name, slot: iso(slot), dispatch: job.dispatch });
    let result: CronDispatchResult;
    try {
      result = await dispatch(job, slot, { signal });
    } catch (err) {
      result = { status: "failed", error: err instanceof Error ? err.message : String(err) };
    } finally {
      running.delete(job.name);
    }
    const fire = fireOf(job, slot, now, result, clock.now() - now, maxOutputChars);
    if (fire.status === "failed") log.warn("cron fire failed", { job: job.name, slot: fire.slot, error: fire.error });
    return recordFire(fire);
  }
  return { fire, skip };
}

const trimOutput = (s: string | undefined, max: number) =>
  s === undefined || s.length <= max ? s : `[… ${s.length - max} earlier characters dropped]\n${s.slice(-max)}`;

/** The history entry of a dispatched fire. */
function fireOf(
  job: CronJob,
  slot: number,
  now: number,
  result: CronDispatchResult,
  durationMs: number,
  maxOutputChars: number,
): CronFire {
  return {
    job: job.name,
    slot: iso(slot),
    firedAt: iso(now),
    status: result.status === "ok" ? "ok" : "failed",
    ...(result.exitCode !== undefined ? { exitCode: result.exitCode } : {}),
    ...(result.output !== undefined ? { output: trimOutput(result.output, maxOutputChars) } : {}),
    ...(result.error !== undefined ? { error: result.error } : {}),
    durationMs,
  };
}
