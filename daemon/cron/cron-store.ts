// What the cron dispatcher remembers across restarts: the dedup entries (one per job and
// slot, claimed before a fire is dispatched), the last slot of each job (heartbeat anchor),
// the last tick (to tell missed slots), and a bounded fire history per job.
// The file store keeps all of it in one small JSON file replaced atomically by rename.
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "../../common/log.js";
import { silentLogger } from "../../common/log.js";

export type CronFireStatus = "ok" | "failed" | "skipped";

/** One fire of a job, as shown by `ep agent cron history` (mirrors ep.daemon.v1.CronFire). */
export interface CronFire {
  job: string;
  /** The scheduled slot, ISO 8601 UTC. */
  slot: string;
  /** When the dispatcher acted on the slot, ISO 8601 UTC. */
  firedAt: string;
  status: CronFireStatus;
  exitCode?: number;
  output?: string;
  error?: string;
  durationMs?: number;
}

/** Swappable persistence for the dispatcher; every method is synchronous and durable on return. */
export interface CronStore {
  /** Claims (job, slot). False when it was already claimed: the slot must not fire again. */
  claim(job: string, slotMs: number, atMs: number): boolean;
  /** Latest slot claimed for the job, if any (survives gc). */
  lastSlot(job: string): number | undefined;
  /** Appends a fire to the job's history (oldest entries beyond the limit are dropped). */
  record(fire: CronFire): void;
  /** Most recent fires first. */
  history(job: string, limit: number): CronFire[];
  lastTick(): number | undefined;
  setLastTick(ms: number): void;
  /** Removes dedup entries whose slot is older than `beforeMs`; returns how many. */
  gc(beforeMs: number): number;
  dedupCount(): number;
  close(): void;
}

interface StoreState {
  version: 1;
  lastTickAt?: number;
  lastSlot: Record<string, number>;
  /** "<job>\u0000<slot ms>" -> claimed at (ms). */
  dedup: Record<string, number>;
  history: Record<string, CronFire[]>;
}

const emptyState = (): StoreState => ({ version: 1, lastSlot: {}, dedup: {}, history: {} });
const dedupKey = (job: string, slotMs: number) => `${job}\u0000${slotMs}`;

export interface CronStoreOptions {
  /** Fires kept per job (default 100). */
  historyLimit?: number;
  log?: Logger;
}

function createStateStore(state: StoreState, persist: () => void, opts: CronStoreOptions): CronStore {
  const historyLimit = opts.historyLimit ?? 100;
  return {
    claim(job, slotMs, atMs) {
      const key = dedupKey(job, slotMs);
      if (state.dedup[key] !== undefined) return false;
      state.dedup[key] = atMs;
      if ((state.lastSlot[job] ?? -Infinity) < slotMs) state.lastSlot[job] = slotMs;
      persist();
      return true;
    },
    lastSlot: (job) => state.lastSlot[job],
    record(fire) {
      const list = (state.history[fire.job] ??= []);
      list.push(fire);
      if (list.length > historyLimit) list.splice(0, list.length - historyLimit);
      persist();
    },
    history: (job, limit) => (state.history[job] ?? []).slice(-Math.max(0, limit)).reverse(),
    lastTick: () => state.lastTickAt,
    setLastTick(ms) {
      state.lastTickAt = ms;
      persist();
    },
    gc(beforeMs) {
      let removed = 0;
      for (const [key] of Object.entries(state.dedup)) {
        const slot = Number(key.slice(key.lastIndexOf("\u0000") + 1));
        if (slot < beforeMs) {
          delete state.dedup[key];
          removed++;
        }
      }
      if (removed) persist();
      return removed;
    },
    dedupCount: () => Object.keys(state.dedup).length,
    close() {},
  };
}

/** In-process store: same behaviour, nothing survives the process (for embedding and one-off use). */
export function createMemoryCronStore(opts: CronStoreOptions = {}): CronStore {
  return createStateStore(emptyState(), () => {}, opts);
}

/** JSON file store, e.g. `$EP_HOME/epd/cron-state.json`; each change is written to a temp file, fsynced and renamed. */
export function createFileCronStore(path: string, opts: CronStoreOptions = {}): CronStore {
  const log = opts.log ?? silentLogger;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  let state = emptyState();
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as Partial<StoreState>;
    if (parsed && parsed.version === 1) {
      state = { ...emptyState(), ...parsed, version: 1 };
    } else throw new Error("unknown format");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      const aside = `${path}.corrupt-${Date.now()}`;
      try {
        renameSync(path, aside);
      } catch {
        // nothing to move aside
      }
      log.warn("cron state file unreadable; starting with empty dedup and history", {
        path,
        movedTo: aside,
        error: String(err),
      });
    }
  }
  let closed = false;
  const persist = () => {
    if (closed) return;
    const tmp = `${path}.tmp-${process.pid}`;
    const fd = openSync(tmp, "w", 0o600);
    try {
      writeSync(fd, JSON.stringify(state));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  };
  const store = createStateStore(state, persist, opts);
  return {
    ...store,
    close() {
      closed = true;
    },
  };
}
