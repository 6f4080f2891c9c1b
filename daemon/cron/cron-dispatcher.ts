// The cron dispatcher: a tick loop (default 1 minute, aligned to the tick grid) that fires each
// due job at most once per tick and exactly once per scheduled slot. A slot is claimed in the
// store before it is dispatched, so a restart or reload inside a minute never fires it twice.
import type { Clock, ClockTimer } from "../../common/clock.js";
import { iso } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { silentLogger } from "../../common/log.js";
import type { CronDispatch, CronDispatchResult } from "./bash-dispatch.js";
import type { CronFileError, CronJob, MissedPolicy } from "./cron-file.js";
import { cronFileError, readCronFile } from "./cron-file.js";
import { DEFAULT_TICK_MS, ceilToTick, floorToTick, latestSlotIn, nextFire, nextSlot, validateTimeZone } from "./cron-schedule.js";
import type { CronFire, CronStore } from "./cron-store.js";

const SLOT_SCAN_CAP = 10_000;

export interface CronDispatcherDeps {
  clock: Clock;
  /** Path of cron.toml (normally `$EP_HOME/epd/cron.toml`); a missing file means no jobs. */
  file: string;
  store: CronStore;
  dispatch: CronDispatch;
  tickMs?: number;
  /** IANA zone the schedules are read in; default: the process's local time zone. */
  timeZone?: string;
  /** Dedup entries older than this are garbage (default 24 h; at least 3 ticks). */
  dedupRetentionMs?: number;
  /** Output kept per fire in the history (default 8 KiB, from the end). */
  maxOutputChars?: number;
  /** Called after every fire or skip is recorded (the daemon turns it into a `matrix` event). */
  onFire?: (fire: CronFire) => void;
  log?: Logger;
}

/** A job as `ep agent cron list/describe` shows it (mirrors ep.daemon.v1.CronJob). */
export interface CronJobView {
  name: string;
  kind: CronJob["kind"];
  schedule?: string;
  interval?: string;
  session?: string;
  prompt: string;
  dispatch: CronJob["dispatch"];
  missed: MissedPolicy;
  line: number;
  /** When the job will next fire (tick-rounded), ISO 8601 UTC; null when it never will. */
  nextFireAt: string | null;
  lastFire?: CronFire;
  running: boolean;
}

export interface CronDispatcher {
  /** Runs a catch-up tick, then ticks on the tick grid. (cron.toml is read when the dispatcher is created; an invalid file is logged and leaves no jobs, see loadErrors.) */
  start(): Promise<void>;
  /** Stops ticking, aborts running dispatches and waits for them to be recorded. The store stays open (its owner closes it). */
  close(): Promise<void>;
  /** One tick now: fires every due job and resolves when those fires are recorded. */
  tick(): Promise<CronFire[]>;
  list(): CronJobView[];
  /** Throws not_found for a job that is not configured. */
  describe(name: string): CronJobView;
  /** Most recent fires first; works for removed jobs that still have history. */
  history(name: string, limit?: number): CronFire[];
  /** Re-reads cron.toml. On any error keeps the running jobs and throws an EpError listing every error with its line. */
  reload(): { jobs: number };
  /** Removes stale dedup entries now; returns how many. */
  gcNow(): number;
  /** The errors of the last failed load (empty after a successful one). */
  loadErrors(): CronFileError[];
  /** Fields of the last load that do not apply and were ignored. */
  loadWarnings(): CronFileError[];
}

export function createCronDispatcher(deps: CronDispatcherDeps): CronDispatcher {
  const { clock, store, file } = deps;
  const tickMs = deps.tickMs ?? DEFAULT_TICK_MS;
  const timeZone = deps.timeZone;
  const log = deps.log ?? silentLogger;
  const maxOutputChars = deps.maxOutputChars ?? 8 * 1024;
  const retentionMs = Math.max(deps.dedupRetentionMs ?? 24 * 3_600_000, 3 * tickMs);
  if (!(tickMs > 0)) throw new EpError("invalid_argument", "tickMs must be positive", { field: "tickMs" });
  if (timeZone) {
    try {
      validateTimeZone(timeZone);
    } catch {
      throw new EpError("invalid_argument", `unknown time zone "${timeZone}"`, { field: "timeZone" });
    }
  }

  let jobs = new Map<string, CronJob>();
  /** Cron jobs chain slot to slot (as croner does), so a slot moved by a DST gap is not lost. */
  const cursors = new Map<string, { key: string; next: number | null }>();
  let errors: CronFileError[] = [];
  let warnings: CronFileError[] = [];
  let timer: ClockTimer | undefined;
  let closed = false;
  let started = false;
  const running = new Set<string>();
  const inFlight = new Set<Promise<unknown>>();
  const abort = new AbortController();

  function load(): { ok: true } | { ok: false; errors: CronFileError[] } {
    const result = readCronFile(file);
    warnings = result.warnings ?? [];
    if (warnings.length) log.warn("cron.toml has fields that do not apply; they are ignored", { file, warnings });
    if (!result.ok) return result;
    jobs = new Map(result.jobs.map((j) => [j.name, j]));
    for (const name of cursors.keys()) if (!jobs.has(name)) cursors.delete(name);
    errors = [];
    return { ok: true };
  }

  const initial = load();
  if (!initial.ok) {
    errors = initial.errors;
    log.error("cron.toml is invalid; no cron jobs run until it is fixed and reloaded", { file, errors: initial.errors });
  } else log.info("cron jobs loaded", { file, jobs: jobs.size });

  const trimOutput = (s: string | undefined) =>
    s === undefined || s.length <= maxOutputChars ? s : `[… ${s.length - maxOutputChars} earlier characters dropped]\n${s.slice(-maxOutputChars)}`;

  function recordFire(fire: CronFire): CronFire {
    store.record(fire);
    try {
      deps.onFire?.(fire);
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
      result = await deps.dispatch(job, slot, { signal: abort.signal });
    } catch (err) {
      result = { status: "failed", error: err instanceof Error ? err.message : String(err) };
    } finally {
      running.delete(job.name);
    }
    const fire: CronFire = {
      job: job.name,
      slot: iso(slot),
      firedAt: iso(now),
      status: result.status === "ok" ? "ok" : "failed",
      ...(result.exitCode !== undefined ? { exitCode: result.exitCode } : {}),
      ...(result.output !== undefined ? { output: trimOutput(result.output) } : {}),
      ...(result.error !== undefined ? { error: result.error } : {}),
      durationMs: clock.now() - now,
    };
    if (fire.status === "failed") log.warn("cron fire failed", { job: job.name, slot: fire.slot, error: fire.error });
    return recordFire(fire);
  }

  const scheduleKey = (job: CronJob) => `${job.kind}\u0000${job.schedule ?? ""}\u0000${job.interval ?? ""}`;

  /** Due slots of a cron job in (cursor, now]: the latest and how many (exact up to the cap). */
  function dueCronSlots(job: CronJob, windowStart: number, now: number): { latest: number | null; count: number } {
    let cursor = cursors.get(job.name);
    if (!cursor || cursor.key !== scheduleKey(job)) {
      cursor = { key: scheduleKey(job), next: nextSlot(job, windowStart, timeZone, { tickMs }) };
      cursors.set(job.name, cursor);
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
  function dueHeartbeatSlots(job: CronJob, anchorMs: number, windowStart: number, now: number) {
    const r = latestSlotIn(job, Math.max(windowStart, anchorMs), now, timeZone, { anchorMs, tickMs });
    return { latest: r.latest, count: r.count };
  }

  /**
   * Slots in (lastTick, now] are due. A due slot no older than two ticks is current: the latest
   * current slot fires. Older ones were missed while the daemon was down (or stalled) and
   * follow the job's `missed` policy: `skip` records one skipped entry for the latest of them,
   * `run_once` fires that one once. Either way at most one fire per job per tick.
   */
  async function tick(at?: number): Promise<CronFire[]> {
    if (closed) return [];
    const now = at ?? clock.now();
    const prev = store.lastTick();
    const windowStart = prev === undefined || prev > now ? now - 1 : prev;
    const missedBefore = now - 2 * tickMs;
    const pending: Promise<CronFire | undefined>[] = [];
    const done: (CronFire | undefined)[] = [];

    for (const job of jobs.values()) {
      try {
        const anchorMs = store.lastSlot(job.name);
        if (job.kind === "heartbeat" && anchorMs === undefined) {
          pending.push(fire(job, floorToTick(now, tickMs), now));
          continue;
        }
        const due =
          job.kind === "heartbeat" ? dueHeartbeatSlots(job, anchorMs!, windowStart, now) : dueCronSlots(job, windowStart, now);
        if (due.latest === null) continue;
        if (due.latest > missedBefore) {
          pending.push(fire(job, due.latest, now));
          continue;
        }
        const what = `${due.count === 1 ? "1 slot" : `${due.count} slots`} missed since ${iso(windowStart)} while the daemon was not ticking`;
        if (job.missed === "run_once") pending.push(fire(job, due.latest, now));
        else done.push(skip(job, due.latest, now, `${what} (missed = "skip")`));
      } catch (err) {
        log.error("cron job evaluation failed", { job: job.name, error: String(err) });
      }
    }
    store.setLastTick(now);
    store.gc(now - retentionMs);
    const all = Promise.all(pending);
    inFlight.add(all);
    try {
      done.push(...(await all));
    } finally {
      inFlight.delete(all);
    }
    return done.filter((f): f is CronFire => f !== undefined);
  }

  function scheduleNext() {
    if (closed) return;
    const now = clock.now();
    const target = ceilToTick(now + 1, tickMs);
    timer = clock.setTimeout(() => {
      timer = undefined;
      scheduleNext();
      // A timer may wake a hair early or late; the tick belongs to its grid instant.
      void tick(Math.max(clock.now(), target)).catch((err) => log.error("cron tick failed", { error: String(err) }));
    }, target - now);
  }

  function view(job: CronJob): CronJobView {
    const lastFire = store.history(job.name, 1)[0];
    const now = clock.now();
    let next: number | null = null;
    try {
      const anchorMs = store.lastSlot(job.name);
      const after = Math.max(now, store.lastTick() ?? now);
      const cursor = cursors.get(job.name);
      if (job.kind === "heartbeat" && anchorMs === undefined) next = ceilToTick(now + 1, tickMs);
      else if (job.kind === "cron" && cursor?.key === scheduleKey(job) && cursor.next !== null && cursor.next > after) {
        next = ceilToTick(cursor.next, tickMs);
      } else next = nextFire(job, after, timeZone, { anchorMs, tickMs });
    } catch {
      next = null;
    }
    return {
      name: job.name,
      kind: job.kind,
      ...(job.schedule !== undefined ? { schedule: job.schedule } : {}),
      ...(job.interval !== undefined ? { interval: job.interval } : {}),
      ...(job.session !== undefined ? { session: job.session } : {}),
      prompt: job.prompt,
      dispatch: job.dispatch,
      missed: job.missed,
      line: job.line,
      nextFireAt: next === null ? null : iso(next),
      ...(lastFire ? { lastFire } : {}),
      running: running.has(job.name),
    };
  }

  const notFound = (name: string) =>
    new EpError("not_found", `No cron job named "${name}"; list them with 'ep agent cron list'.`, { field: "name", name });

  return {
    async start() {
      if (started || closed) return;
      started = true;
      await tick();
      scheduleNext();
    },
    async close() {
      if (closed) return;
      closed = true;
      if (timer) clock.clearTimeout(timer);
      abort.abort();
      await Promise.allSettled([...inFlight]);
    },
    tick: () => tick(),
    list: () => [...jobs.values()].map(view),
    describe(name) {
      const job = jobs.get(name);
      if (!job) throw notFound(name);
      return view(job);
    },
    history(name, limit = 20) {
      if (!Number.isInteger(limit) || limit < 0) {
        throw new EpError("invalid_argument", "limit must be a non-negative integer", { field: "limit" });
      }
      const fires = store.history(name, limit || 20);
      if (!fires.length && !jobs.has(name)) throw notFound(name);
      return fires;
    },
    reload() {
      const result = load();
      if (!result.ok) {
        errors = result.errors;
        log.warn("cron reload rejected; keeping the running jobs", { file, errors: result.errors });
        throw cronFileError(file, result.errors);
      }
      log.info("cron jobs reloaded", { file, jobs: jobs.size });
      return { jobs: jobs.size };
    },
    gcNow: () => store.gc(clock.now() - retentionMs),
    loadErrors: () => errors,
    loadWarnings: () => warnings,
  };
}
