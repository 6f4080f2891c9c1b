// The watchdog: polls every supervised agent and restarts a dead one, unless it is paused,
// never within the grace after a restart, and — when a restart did not bring it back — at most
// once per throttle window. Optional nightly restart at a local time. Every restart and every
// skipped restart is reported through onEvent (the daemon makes `matrix` events of them).
import { Cron } from "croner";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { iso } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { silentLogger } from "../../common/log.js";
import type { ServiceBackend, SupervisedAgent } from "./service-backend.js";
import { validateAgent } from "./service-backend.js";

export type WatchdogAction = "start" | "restart" | "skip" | "pause" | "resume";

export interface WatchdogEvent {
  agentId: string;
  name: string;
  action: WatchdogAction;
  /** Why, in words (the `matrix` event's reason). */
  reason: string;
  at: string;
  /** Set when a start or restart failed. */
  error?: string;
}

export type SupervisedState = "unknown" | "running" | "dead" | "error";

/** What `ep agent supervise list|status` shows (maps onto ep.daemon.v1.LocalAgent). */
export interface SupervisedStatus {
  id: string;
  name: string;
  backend: ServiceBackend["kind"];
  state: SupervisedState;
  paused: boolean;
  pid?: number;
  restarts: number;
  lastRestartAt?: string;
  lastRestartReason?: string;
  lastCheckAt?: string;
  /** While throttled: the earliest automatic retry. */
  nextRetryAt?: string;
  detail?: string;
}

export interface WatchdogOptions {
  clock: Clock;
  backend: ServiceBackend;
  pollMs?: number;
  graceMs?: number;
  throttleMs?: number;
  /** Local time "HH:MM" for a daily restart of every unpaused agent; off when absent. */
  nightly?: string;
  /** IANA zone for `nightly` (default: the process's local zone). */
  timeZone?: string;
  onEvent?: (event: WatchdogEvent) => void;
  /** Poll on a timer every pollMs (default true); tests may drive poll() themselves. */
  autoPoll?: boolean;
  log?: Logger;
}

export interface Watchdog {
  /**
   * Supervises an agent (replacing an earlier definition with the same id); starts it when it is not running and not
   * paused.
   */
  add(agent: SupervisedAgent, opts?: { paused?: boolean }): Promise<SupervisedStatus>;
  /** Stops supervising; the agent itself is left as it is. False when unknown. */
  remove(id: string): boolean;
  list(): SupervisedStatus[];
  /** Throws agent_not_found. */
  status(id: string): SupervisedStatus;
  /** Operator restart: always happens (also when paused); grace starts again. */
  restart(id: string): Promise<SupervisedStatus>;
  /** Disables auto-restart. */
  pause(id: string): SupervisedStatus;
  /** Re-enables auto-restart. */
  resume(id: string): SupervisedStatus;
  /** One poll of every agent now; resolves with the events it caused. */
  poll(): Promise<WatchdogEvent[]>;
  close(): Promise<void>;
}

interface Supervised {
  agent: SupervisedAgent;
  paused: boolean;
  state: SupervisedState;
  pid?: number;
  restarts: number;
  lastRestartAt?: number;
  lastRestartReason?: string;
  /** A restart happened and has not yet been judged (alive or dead at the first poll after grace). */
  verifying: boolean;
  /** The last restart did not bring the agent back: retries are throttled. */
  failing: boolean;
  /** Category of the last skip event, so a long pause or throttle is reported once, not every poll. */
  lastSkip?: string;
  lastCheckAt?: number;
  detail?: string;
}

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
const minutes = (ms: number) => (ms % 60_000 === 0 ? `${ms / 60_000} min` : seconds(ms));

interface Ctx {
  clock: Clock;
  backend: WatchdogOptions["backend"];
  log: Logger;
  graceMs: number;
  throttleMs: number;
  emit(s: Supervised, action: WatchdogAction, reason: string, error?: string): WatchdogEvent;
}

function parseNightly(nightly: string, timeZone?: string): Cron {
  const m = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(nightly);
  if (!m)
    throw new EpError("invalid_argument", `nightly must be a local time "HH:MM", not "${nightly}"`, {
      field: "nightly",
    });
  try {
    return new Cron(`${Number(m[2])} ${Number(m[1])} * * *`, {
      paused: true,
      ...(timeZone ? { timezone: timeZone } : {}),
    });
  } catch (err) {
    throw new EpError("invalid_argument", `cannot use time zone "${timeZone}": ${(err as Error).message}`, {
      field: "timeZone",
    });
  }
}

export function createWatchdog(opts: WatchdogOptions): Watchdog {
  const { clock, backend } = opts;
  const { pollMs, graceMs, throttleMs } = timings(opts);
  const log = opts.log ?? silentLogger;
  const nightly = opts.nightly ? parseNightly(opts.nightly, opts.timeZone) : undefined;
  let nextNightlyAt = nightly?.nextRun(new Date(clock.now()))?.getTime();

  const agents = new Map<string, Supervised>();
  const ctx: Ctx = {
    clock,
    backend,
    log,
    graceMs,
    throttleMs,
    emit: (s, action, reason, error) => emit(s, action, reason, error),
  };
  let closed = false;
  let timer: ClockTimer | undefined;
  let chain: Promise<unknown> = Promise.resolve();

  function emit(s: Supervised, action: WatchdogAction, reason: string, error?: string): WatchdogEvent {
    const event: WatchdogEvent = {
      agentId: s.agent.id,
      name: s.agent.name,
      action,
      reason,
      at: iso(clock.now()),
      ...(error ? { error } : {}),
    };
    log.info("watchdog", { ...event });
    try {
      opts.onEvent?.(event);
    } catch (err) {
      log.warn("watchdog onEvent callback failed", { error: String(err) });
    }
    return event;
  }

  function get(id: string): Supervised {
    const s = agents.get(id);
    if (!s)
      throw new EpError("agent_not_found", `No supervised agent "${id}"; list them with 'ep agent supervise list'.`, {
        id,
      });
    return s;
  }

  const view = (s: Supervised) => statusOf(s, backend.kind, throttleMs, clock.now());

  async function pollOnce(): Promise<WatchdogEvent[]> {
    const events: WatchdogEvent[] = [];
    const now = clock.now();
    if (nightly && nextNightlyAt !== undefined && now >= nextNightlyAt) {
      nextNightlyAt = nightly.nextRun(new Date(now))?.getTime();
      for (const s of agents.values()) {
        if (s.paused)
          events.push(emit(s, "skip", `nightly restart at ${opts.nightly} skipped: auto-restart is paused`));
        else {
          s.failing = false;
          await restartNow(ctx, s, "restart", `nightly restart at ${opts.nightly}`, events);
        }
      }
    }
    await Promise.all([...agents.values()].map((s) => check(ctx, s, events)));
    return events;
  }

  /** Runs fn after everything queued before it; the caller sees its error, the queue goes on. */
  function serially<T>(fn: () => Promise<T>): Promise<T> {
    const run = chain.then(fn);
    chain = run.catch(() => undefined);
    return run;
  }

  const poll = (): Promise<WatchdogEvent[]> => (closed ? Promise.resolve([]) : serially(pollOnce));

  function schedule() {
    if (closed || opts.autoPoll === false) return;
    timer = clock.setTimeout(() => {
      schedule();
      poll().catch((err) => log.error("watchdog poll failed", { error: String(err) }));
    }, pollMs);
  }
  schedule();

  return {
    async add(agent, addOpts = {}) {
      validateAgent(agent);
      const existing = agents.get(agent.id);
      const s: Supervised = existing ?? {
        agent,
        paused: !!addOpts.paused,
        state: "unknown",
        restarts: 0,
        verifying: false,
        failing: false,
      };
      s.agent = agent;
      if (addOpts.paused !== undefined) s.paused = addOpts.paused;
      agents.set(agent.id, s);
      const events: WatchdogEvent[] = [];
      await serially(() => firstLook(ctx, s, events));
      return view(s);
    },
    remove: (id) => agents.delete(id),
    list: () => [...agents.values()].map(view),
    status: (id) => view(get(id)),
    async restart(id) {
      const s = get(id);
      await serially(() => {
        s.failing = false;
        return restartNow(ctx, s, "restart", "restart requested by an operator", []);
      });
      return view(s);
    },
    pause(id) {
      const s = get(id);
      if (!s.paused) {
        s.paused = true;
        emit(s, "pause", "auto-restart paused by an operator");
      }
      return view(s);
    },
    resume(id) {
      const s = get(id);
      if (s.paused) {
        s.paused = false;
        s.lastSkip = undefined;
        emit(s, "resume", "auto-restart resumed by an operator");
      }
      return view(s);
    },
    poll,
    async close() {
      closed = true;
      if (timer) clock.clearTimeout(timer);
      await chain;
    },
  };
}

function timings(opts: WatchdogOptions) {
  const t = {
    pollMs: opts.pollMs ?? 60_000,
    graceMs: opts.graceMs ?? 90_000,
    throttleMs: opts.throttleMs ?? 30 * 60_000,
  };
  for (const [field, v] of Object.entries(t)) {
    if (!(v >= 0) || !Number.isFinite(v))
      throw new EpError("invalid_argument", `${field} must be a non-negative number`, { field });
  }
  return t;
}

function statusOf(
  s: Supervised,
  backendKind: SupervisedStatus["backend"],
  throttleMs: number,
  now: number,
): SupervisedStatus {
  const nextRetry = s.failing && s.lastRestartAt !== undefined ? s.lastRestartAt + throttleMs : undefined;
  return {
    id: s.agent.id,
    name: s.agent.name,
    backend: backendKind,
    state: s.state,
    paused: s.paused,
    ...(s.pid !== undefined ? { pid: s.pid } : {}),
    restarts: s.restarts,
    ...(s.lastRestartAt !== undefined ? { lastRestartAt: iso(s.lastRestartAt) } : {}),
    ...(s.lastRestartReason ? { lastRestartReason: s.lastRestartReason } : {}),
    ...(s.lastCheckAt !== undefined ? { lastCheckAt: iso(s.lastCheckAt) } : {}),
    ...(nextRetry !== undefined && nextRetry > now ? { nextRetryAt: iso(nextRetry) } : {}),
    ...(s.detail ? { detail: s.detail } : {}),
  };
}

/**
 * What to do about an agent found dead: wait (paused, within the grace after a restart, or
 * throttled after a restart that did not bring it back) or restart it, with why. A first look
 * after the grace that finds it dead again marks it failing.
 */
function afterDeath(
  s: Supervised,
  sinceRestart: number,
  t: { graceMs: number; throttleMs: number },
): { skip: string; reason: string } | { restart: string } {
  if (s.paused) return { skip: "paused", reason: "not restarting a dead agent: auto-restart is paused" };
  if (sinceRestart < t.graceMs)
    return {
      skip: "grace",
      reason: `not restarting: within the ${seconds(t.graceMs)} grace after the restart at ${iso(s.lastRestartAt!)}`,
    };
  if (s.verifying) {
    // First look after the grace: the restart did not bring it back.
    s.verifying = false;
    s.failing = true;
  }
  if (s.failing && sinceRestart < t.throttleMs) {
    const last = s.lastRestartAt!;
    return {
      skip: "throttle",
      reason:
        `not restarting: the restart at ${iso(last)} did not bring it back; at most ` +
        `one retry per ${minutes(t.throttleMs)}, next at ${iso(last + t.throttleMs)}`,
    };
  }
  return {
    restart: s.failing
      ? `still dead after the restart at ${iso(s.lastRestartAt!)}; throttled retry`
      : "found dead by the watchdog poll",
  };
}

/** Stops whatever is left and starts it again; counts as a restart either way. */
async function restartNow(
  ctx: Ctx,
  s: Supervised,
  action: "start" | "restart",
  reason: string,
  events: WatchdogEvent[],
) {
  const { clock, backend, log } = ctx;
  const at = clock.now();
  s.lastRestartAt = at;
  s.lastRestartReason = reason;
  s.verifying = true;
  s.lastSkip = undefined;
  if (action === "restart") s.restarts++;
  let error: string | undefined;
  try {
    if (action === "restart")
      await backend
        .stop(s.agent.id)
        .catch((err) => log.warn("stop before restart failed", { agentId: s.agent.id, error: String(err) }));
    await backend.start(s.agent);
    s.pid = await backend.pid(s.agent.id);
    s.state = "running";
    s.detail = undefined;
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
    s.state = "dead";
    s.pid = undefined;
    s.detail = `${action} failed: ${error}`;
  }
  events.push(ctx.emit(s, action, reason, error));
}

/** One look at an agent: alive (settles a restart past its grace), or dead and restarted unless it must wait. */
async function check(ctx: Ctx, s: Supervised, events: WatchdogEvent[]) {
  const { clock, backend, graceMs, throttleMs } = ctx;
  let alive: boolean;
  try {
    alive = await backend.isAlive(s.agent.id);
  } catch (err) {
    s.state = "error";
    s.detail = `cannot check: ${err instanceof Error ? err.message : String(err)}`;
    return;
  }
  const now = clock.now();
  s.lastCheckAt = now;
  const sinceRestart = s.lastRestartAt === undefined ? Infinity : now - s.lastRestartAt;
  if (alive) {
    s.state = "running";
    s.pid = await backend.pid(s.agent.id).catch(() => undefined); // no pid yet is "unknown", shown as such
    s.detail = undefined;
    s.lastSkip = undefined;
    if (s.verifying && sinceRestart >= graceMs) {
      s.verifying = false;
      s.failing = false;
    }
    return;
  }
  s.state = "dead";
  s.pid = undefined;
  const next = afterDeath(s, sinceRestart, { graceMs, throttleMs });
  if ("skip" in next) return skipOnce(ctx, s, next.skip, next.reason, events);
  const reason = next.restart;
  await restartNow(ctx, s, "restart", reason, events);
}

/** When supervision starts: adopt an agent that is running, start one that is not (unless paused). */
async function firstLook(ctx: Ctx, s: Supervised, events: WatchdogEvent[]): Promise<void> {
  let alive = false;
  try {
    alive = await ctx.backend.isAlive(s.agent.id);
  } catch (err) {
    s.state = "error";
    s.detail = `cannot check: ${err instanceof Error ? err.message : String(err)}`;
    return;
  }
  s.lastCheckAt = ctx.clock.now();
  if (alive) {
    s.state = "running";
    s.pid = await ctx.backend.pid(s.agent.id).catch(() => undefined); // no pid yet is "unknown", shown as such
  } else if (!s.paused) {
    await restartNow(ctx, s, "start", "supervision started and the agent was not running", events);
  } else s.state = "dead";
}

/** A skip event, once per category until something changes. */
function skipOnce(ctx: Ctx, s: Supervised, category: string, reason: string, events: WatchdogEvent[]): void {
  if (s.lastSkip === category) return;
  s.lastSkip = category;
  events.push(ctx.emit(s, "skip", reason));
}
