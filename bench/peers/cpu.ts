// CPU time of every process a measured run involves, from /proc: the bench's own children by pid,
// redis-server by name, and PostgreSQL's processes by what pg_stat_activity says they are.
//
// PostgreSQL serves other clients on this machine too (other engineers' tests): a client backend
// counts only when its application_name is one this run gave its own connections; the server's
// own processes (postmaster, WAL writer, checkpointer, background writer, autovacuum) count
// always, since the run's writes are what they work on (and another client's writes add noise
// there that cannot be told apart). Backends come and go (pools open connections as they need
// them): the sampler reads every tracked pid every SAMPLE_MS, so a backend that ends inside the
// window still counts up to its last reading.
import { readdirSync, readFileSync } from "node:fs";
import pg from "pg";

const SAMPLE_MS = 200;

/** User + system CPU of a process so far in ms (clock ticks of 10 ms), undefined once it is gone. */
export function cpuMs(pid: number): number | undefined {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
  } catch {
    return undefined;
  }
}

/** Pids whose command name (/proc/PID/comm) is `name`, like `pgrep -x name`. */
export function pidsNamed(name: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === name) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** CPU over a window of a set of processes that may change while it runs. */
class Tracked {
  private first = new Map<number, number>();
  private last = new Map<number, number>();
  /** Starts tracking `pid` (at 0 when it was born inside the window, at its reading otherwise). */
  add(pid: number, fromZero: boolean): void {
    if (this.first.has(pid)) return;
    const now = cpuMs(pid);
    if (now === undefined) return;
    this.first.set(pid, fromZero ? 0 : now);
    this.last.set(pid, now);
  }
  sample(): void {
    for (const pid of this.last.keys()) {
      const now = cpuMs(pid);
      if (now !== undefined) this.last.set(pid, now);
    }
  }
  has(pid: number): boolean {
    return this.first.has(pid);
  }
  get size(): number {
    return this.first.size;
  }
  totalMs(): number {
    let sum = 0;
    for (const [pid, first] of this.first) sum += this.last.get(pid)! - first;
    return sum;
  }
}

export type Role = "server" | "worker" | "submitter" | "database";

export interface CpuWindow {
  /** CPU ms of each role since start(), and how many database processes counted */
  stop(): Promise<Record<Role, number> & { databaseProcesses: number }>;
}

export interface CpuTargets {
  server?: number[];
  worker: number[];
  submitter: number[];
  /** which database serves the run: its processes are found by name (none: SQLite, inside the server) */
  database: "postgres" | "redis" | "none";
  /** PostgreSQL: the application_name prefix of this run's connections */
  pgAppPrefix?: string;
  pgUrl?: string;
}

/** Starts measuring the CPU of every process of a run; stop() gives each role's total. */
export async function startCpuWindow(t: CpuTargets): Promise<CpuWindow> {
  const roles: Record<Role, Tracked> = {
    server: new Tracked(),
    worker: new Tracked(),
    submitter: new Tracked(),
    database: new Tracked(),
  };
  for (const pid of t.server ?? []) roles.server.add(pid, false);
  for (const pid of t.worker) roles.worker.add(pid, false);
  for (const pid of t.submitter) roles.submitter.add(pid, false);
  let monitor: pg.Client | undefined;
  const ignored = new Set<number>();
  const findDatabase = async (fromZero: boolean) => {
    if (t.database === "none") return;
    if (t.database === "redis") {
      for (const pid of pidsNamed("redis-server")) roles.database.add(pid, fromZero);
      return;
    }
    const res = await monitor!.query<{ pid: number; backend_type: string; application_name: string }>(
      "SELECT pid, backend_type, application_name FROM pg_stat_activity",
    );
    const known = new Map(res.rows.map((r) => [r.pid, r]));
    for (const pid of pidsNamed("postgres")) {
      if (roles.database.has(pid) || ignored.has(pid)) continue;
      const row = known.get(pid);
      // not in pg_stat_activity: the postmaster (or a backend still starting; it shows next time)
      if (!row) {
        if (!fromZero) roles.database.add(pid, false);
        continue;
      }
      const ours = row.backend_type !== "client backend" || row.application_name.startsWith(t.pgAppPrefix!);
      if (ours) roles.database.add(pid, fromZero);
      // another client's backend (an unnamed one may be ours, still starting)
      else if (row.application_name) ignored.add(pid);
    }
  };
  if (t.database === "postgres") {
    monitor = new pg.Client({ connectionString: t.pgUrl, application_name: "ep-bench-peers-monitor" });
    await monitor.connect();
  }
  await findDatabase(false);
  let sampling = Promise.resolve();
  const timer = setInterval(() => {
    sampling = sampling.then(async () => {
      for (const r of Object.values(roles)) r.sample();
      await findDatabase(true);
    });
  }, SAMPLE_MS);
  return {
    async stop() {
      clearInterval(timer);
      await sampling;
      for (const r of Object.values(roles)) r.sample();
      await monitor?.end();
      const database = roles.database.totalMs();
      return {
        server: roles.server.totalMs(),
        worker: roles.worker.totalMs(),
        submitter: roles.submitter.totalMs(),
        database,
        databaseProcesses: roles.database.size,
      };
    },
  };
}
