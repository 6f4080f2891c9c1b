// The cron dispatcher: a tick loop (default 1 minute, aligned to the tick grid) that fires each
// due job at most once per tick and exactly once per scheduled slot. A slot is claimed in the
// store before it is dispatched, so a restart or reload inside a minute never fires it twice.
import type { Clock, ClockTimer } from "../../common/clock.js";
import { iso } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { silentLogger } from "../../common/log.js";
import type { CronDispatch } from "./bash-dispatch.js";
import type { CronFileError, CronJob, MissedPolicy } from "./cron-file.js";
import { cronFileError, readCronFile } from "./cron-file.js";
import { DEFAULT_TICK_MS, ceilToTick, floorToTick, validateTimeZone } from "./cron-schedule.js";
import { SlotCursors } from "./cron-slots.js";
import { createFirer } from "./cron-fire.js";
import type { CronFire, CronStore } from "./cron-store.js";

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
  /**
   * Runs a catch-up tick, then ticks on the tick grid. (cron.toml is read when the dispatcher is created; an invalid
   * file is logged and leaves no jobs, see loadErrors.)
   */
  start(): Promise<void>;
  /**
   * Stops ticking, aborts running dispatches and waits for them to be recorded. The store stays open (its owner closes
   * it).
   */
  close(): Promise<void>;
  /** One tick now: fires every due job and resolves when those fires are recorded. */
  tick(): Promise<CronFire[]>;
  list(): CronJobView[];
  /** Throws not_found for a job that is not configured. */
  describe(name: string): CronJobView;
  /** Most recent fires first; works for removed jobs that still have history. */
  history(name: string, limit?: number): CronFire[];
  /**
   * Re-reads cron.toml. On any error keeps the running jobs and throws an EpError listing every error with its line.
   */
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
  const { tickMs, timeZone, log, maxOutputChars, retentionMs } = settingsOf(deps);

  let jobs = new Map<string, CronJob>();
  const slots = new SlotCursors(tickMs, timeZone);
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
    slots.keepOnly(jobs);
    errors = [];
    return { ok: true };
  }

  const initial = load();
  if (!initial.ok) {
    errors = initial.errors;
    log.error("cron.toml is invalid; no cron jobs run until it is fixed and reloaded", {
      file,
      errors: initial.errors,
    });
  } else log.info("cron jobs loaded", { file, jobs: jobs.size });

  const { fire, skip } = createFirer({
    clock,
    store,
    log,
    dispatch: deps.dispatch,
    onFire: deps.onFire,
    signal: abort.signal,
    running,
    maxOutputChars,
  });

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
    const pending: Promise<CronFire | undefined>[] = [];
    const done: (CronFire | undefined)[] = [];
    for (const step of planTick(jobs.values(), { store, slots, log, tickMs }, windowStart, now)) {
      try {
        if (step.action === "fire") pending.push(fire(step.job, step.slot, now));
        else done.push(skip(step.job, step.slot, now, step.reason));
      } catch (err) {
        log.error("cron job evaluation failed", { job: step.job.name, error: String(err) });
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
    if (!closed)
      timer = onNextTick(clock, tickMs, (at) => {
        timer = undefined;
        scheduleNext();
        void tick(at).catch((err) => log.error("cron tick failed", { error: String(err) }));
      });
  }

  const view = (job: CronJob): CronJobView =>
    jobView(
      job,
      store.history(job.name, 1)[0],
      slots.nextFireAt(job, clock.now(), store.lastTick(), store.lastSlot(job.name)),
      running.has(job.name),
    );

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
      if (!Number.isInteger(limit) || limit < 0)
        throw new EpError("invalid_argument", "limit must be a non-negative integer", { field: "limit" });
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

/**
 * Calls `fn` at the next instant of the tick grid (a timer may wake a hair early or late; the tick belongs to its grid
 * instant).
 */
function onNextTick(clock: Clock, tickMs: number, fn: (at: number) => void): ClockTimer {
  const now = clock.now();
  const target = ceilToTick(now + 1, tickMs);
  return clock.setTimeout(() => fn(Math.max(clock.now(), target)), target - now);
}

const notFound = (name: string) =>
  new EpError("not_found", `No cron job named "${name}"; list them with 'ep agent cron list'.`, {
    field: "name",
    name,
  });

function jobView(job: CronJob, lastFire: CronFire | undefined, next: number | null, running: boolean): CronJobView {
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
    running,
  };
}

function settingsOf(deps: CronDispatcherDeps) {
  const tickMs = deps.tickMs ?? DEFAULT_TICK_MS;
  if (!(tickMs > 0)) throw new EpError("invalid_argument", "tickMs must be positive", { field: "tickMs" });
  if (deps.timeZone) {
    try {
      validateTimeZone(deps.timeZone);
    } catch {
      throw new EpError("invalid_argument", `unknown time zone "${deps.timeZone}"`, { field: "timeZone" });
    }
  }
  return {
    tickMs,
    timeZone: deps.timeZone,
    log: deps.log ?? silentLogger,
    maxOutputChars: deps.maxOutputChars ?? 8 * 1024,
    retentionMs: Math.max(deps.dedupRetentionMs ?? 24 * 3_600_000, 3 * tickMs),
  };
}

type TickStep = { job: CronJob; slot: number } & ({ action: "fire" } | { action: "skip"; reason: string });

/**
 * What one tick does with each job (see tick): fire its latest current slot, or for slots missed
 * while the daemon was not ticking, follow `missed` (skip records the latest, run_once fires it).
 */
function planTick(
  jobs: Iterable<CronJob>,
  ctx: { store: CronStore; slots: SlotCursors; log: Logger; tickMs: number },
  windowStart: number,
  now: number,
): TickStep[] {
  const { store, slots, log, tickMs } = ctx;
  const missedBefore = now - 2 * tickMs;
  const steps: TickStep[] = [];
  for (const job of jobs) {
    try {
      const anchorMs = store.lastSlot(job.name);
      if (job.kind === "heartbeat" && anchorMs === undefined) {
        steps.push({ job, slot: floorToTick(now, tickMs), action: "fire" });
        continue;
      }
      const due =
        job.kind === "heartbeat"
          ? slots.dueHeartbeat(job, anchorMs!, windowStart, now)
          : slots.dueCron(job, windowStart, now);
      if (due.latest === null) continue;
      if (due.latest > missedBefore || job.missed === "run_once") {
        steps.push({ job, slot: due.latest, action: "fire" });
        continue;
      }
      const what =
        `${due.count === 1 ? "1 slot" : `${due.count} slots`} missed ` +
        `since ${iso(windowStart)} while the daemon was not ticking`;
      steps.push({ job, slot: due.latest, action: "skip", reason: `${what} (missed = "skip")` });
    } catch (err) {
      log.error("cron job evaluation failed", { job: job.name, error: String(err) });
    }
  }
  return steps;
}
