// The two scenarios of issue 37 on one system, each on a fresh setup:
//   throughput: a warm-up, then `jobs` no-op jobs submitted as fast as the system's API takes
//     them; jobs/s from the first submit to the last outcome committed, and the CPU of every
//     process over that window, per job.
//   latency: a warm-up, then `jobs` jobs at an open-loop `rate` to idle workers; submit → start.
import { performance } from "node:perf_hooks";
import { pct } from "../figures.js";
import { startCpuWindow, type Role } from "./cpu.js";
import type { System } from "./peer-config.js";
import type { SetupOptions, SystemRun } from "./system.js";

const POLL_MS = 20;
const TIMEOUT_MS = 600_000;

export interface Throughput {
  system: System;
  jobs: number;
  seconds: number;
  jobsPerS: number;
  /** CPU ms per job by role, and in all */
  cpuMsPerJob: Record<Role | "all", number>;
  /** how many processes of PostgreSQL or Redis the database CPU is the sum of */
  databaseProcesses?: number;
  outcomes?: Record<string, number>;
}

export interface Latency {
  system: System;
  jobs: number;
  rate: number;
  p50: number;
  p99: number;
  max: number;
  alt?: { what: string; p50: number; p99: number; max: number };
  /** submit calls that failed (an overloaded system); their jobs are not in the figures */
  failedSubmits?: number;
}

export type Setup = (system: System, o: SetupOptions) => Promise<SystemRun>;

/** Waits until `before + count` outcomes are committed and the submitter has answered `command`. */
async function submitAndWait<T>(run: SystemRun, command: object, before: number, count: number): Promise<T> {
  let answer: T | undefined;
  let failed: unknown;
  const asked = run.submitter.request<T>(command).then(
    (a) => (answer = a),
    (err) => (failed = err),
  );
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    if (failed) throw failed;
    if (answer !== undefined && (await run.committed(before + count)) >= before + count) break;
    if (Date.now() > deadline)
      throw new Error(
        `${run.system}: ${before + count} outcomes not committed within ` +
          `${TIMEOUT_MS / 1000} s (${await run.committed(before + count)} are)`,
      );
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  await asked;
  return answer!;
}

export async function throughput(
  setup: Setup,
  system: System,
  o: SetupOptions & { jobs: number; warmup: number; submitConcurrency: number },
): Promise<Throughput> {
  const run = await setup(system, { ...o, latency: false });
  try {
    if (o.warmup)
      await submitAndWait(
        run,
        { cmd: "burst", count: o.warmup, concurrency: o.submitConcurrency, label: "warm" },
        0,
        o.warmup,
      );
    const cpu = await startCpuWindow({ ...run.cpu, submitter: [run.submitter.pid] });
    const t0 = performance.now();
    await submitAndWait(
      run,
      { cmd: "burst", count: o.jobs, concurrency: o.submitConcurrency, label: "go" },
      o.warmup,
      o.jobs,
    );
    const seconds = (performance.now() - t0) / 1000;
    const ms = await cpu.stop();
    const per = (x: number) => +(x / o.jobs).toFixed(3);
    const all = ms.server + ms.worker + ms.submitter + ms.database;
    return {
      system,
      jobs: o.jobs,
      seconds: +seconds.toFixed(2),
      jobsPerS: Math.round(o.jobs / seconds),
      cpuMsPerJob: {
        server: per(ms.server),
        worker: per(ms.worker),
        submitter: per(ms.submitter),
        database: per(ms.database),
        all: per(all),
      },
      databaseProcesses: ms.databaseProcesses,
      outcomes: await run.outcomes?.(),
    };
  } finally {
    await run.close();
  }
}

export async function latency(
  setup: Setup,
  system: System,
  o: SetupOptions & { jobs: number; warmup: number; rate: number; inFlight: number },
): Promise<Latency> {
  const run = await setup(system, { ...o, latency: true });
  let committed = 0;
  let failedSubmits = 0;
  try {
    const offer = async (label: string, count: number) => {
      type Offered = { started: [string, number][]; failed: number; error?: string };
      // how many outcomes to wait for is known once the submitter says how many calls failed
      const a = await run.submitter.request<Offered>({ cmd: "rate", count, rate: o.rate, inFlight: o.inFlight, label });
      failedSubmits += a.failed;
      if (a.failed) console.error(`${system}: ${a.failed} of ${count} submits failed at ${o.rate}/s (${a.error})`);
      await waitCommitted(run, committed + a.started.length);
      committed += a.started.length;
      return run.startTimes(label, a.started.length, a.started);
    };
    if (o.warmup) await offer("warm", o.warmup);
    failedSubmits = 0;
    const times = await offer("lat", o.jobs);
    const figures = (xs: number[]) => ({ p50: pct(xs, 50), p99: pct(xs, 99), max: pct(xs, 100) });
    return {
      system,
      jobs: o.jobs,
      rate: o.rate,
      ...figures(times.start),
      ...(times.alt ? { alt: { what: times.alt.what, ...figures(times.alt.values) } } : {}),
      ...(failedSubmits ? { failedSubmits } : {}),
    };
  } finally {
    await run.close();
  }
}

async function waitCommitted(run: SystemRun, target: number): Promise<void> {
  const deadline = Date.now() + TIMEOUT_MS;
  while ((await run.committed(target)) < target) {
    if (Date.now() > deadline)
      throw new Error(
        `${run.system}: ${target} outcomes not committed within ` +
          `${TIMEOUT_MS / 1000} s (${await run.committed(target)} are)`,
      );
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
