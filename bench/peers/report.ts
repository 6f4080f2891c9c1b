// The peers bench's figures as markdown: a table per round, then the medians over the rounds
// with issue 37's targets checked round by round ("in the same run") and on the medians.
import type { System } from "./peer-config.js";
import type { Latency, Throughput } from "./scenarios.js";
import { DISPLAY } from "./system.js";

export interface Round {
  index: number;
  order: System[];
  loadBefore: number;
  loadAfter: number;
  throughput: Throughput[];
  latency: Latency[];
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const f = (x: number | undefined, digits = 2) =>
  x === undefined ? "–" : x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const int = (x: number | undefined) => (x === undefined ? "–" : Math.round(x).toLocaleString("en-US"));

function throughputTable(rows: Throughput[]): string[] {
  const out = [
    "| system | jobs/s | CPU ms per job, all processes | server | worker | submitter | database |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ];
  for (const t of rows) {
    const c = t.cpuMsPerJob;
    out.push(
      `| ${DISPLAY[t.system]} | ${int(t.jobsPerS)} | ${f(c.all)} | ` +
        `${f(c.server)} | ${f(c.worker)} | ${f(c.submitter)} | ${f(c.database)} |`,
    );
  }
  return out;
}

function latencyTable(rows: Latency[]): string[] {
  const out = [
    "| system | submit → start p50 ms | p99 ms | max ms | EP: submit " +
      "→ tower's task.running commit p50 / p99 ms | submits failed |",
    "|---|---:|---:|---:|---:|---:|",
  ];
  for (const l of rows)
    out.push(
      `| ${DISPLAY[l.system]} | ${f(l.p50)} | ${f(l.p99)} | ${f(l.max)} | ` +
        `${l.alt ? `${f(l.alt.p50)} / ${f(l.alt.p99)}` : "–"} | ${l.failedSubmits ?? 0} |`,
    );
  return out;
}

/** Both scenarios in one table, the shape of issue 37's "Where it stands". */
function docsTable(t: Throughput[], l: Latency[]): string[] {
  const out = [
    "| system | jobs/s | CPU ms per job, all processes (server + " +
      "worker + submitter + database) | submit → start p50 / p99 ms |",
    "|---|---:|---:|---:|",
  ];
  for (const x of [...t].sort((a, b) => b.jobsPerS - a.jobsPerS)) {
    const c = x.cpuMsPerJob;
    const lat = l.find((y) => y.system === x.system);
    out.push(
      `| ${DISPLAY[x.system]} | ${int(x.jobsPerS)} | ${f(c.all)} (${f(c.server)} + ${f(c.worker)} ` +
        `+ ${f(c.submitter)} + ${f(c.database)}) | ${lat ? `${f(lat.p50)} / ${f(lat.p99)}` : "–"} |`,
    );
  }
  return out;
}

export function printRound(r: Round): void {
  const lines = [
    `### Round ${r.index} (order: ${r.order.join(", ")}; load average ` +
      `1 min: ${f(r.loadBefore)} before, ${f(r.loadAfter)} after)`,
    "",
  ];
  if (r.throughput.length) lines.push(...throughputTable(r.throughput), "");
  for (const t of r.throughput)
    if (t.outcomes)
      lines.push(
        `${DISPLAY[t.system]} outcomes: ${Object.entries(t.outcomes)
          .map(([k, v]) => `${v} ${k}`)
          .join(", ")}`,
      );
  if (r.latency.length) lines.push("", ...latencyTable(r.latency), "");
  console.log(lines.join("\n"));
}

/** Each system's median over the rounds of every figure. */
function medians(rounds: Round[]): { throughput: Throughput[]; latency: Latency[] } {
  const systems = rounds[0].order
    .slice()
    .sort((a, b) => Object.keys(DISPLAY).indexOf(a) - Object.keys(DISPLAY).indexOf(b));
  const throughput: Throughput[] = [];
  const latency: Latency[] = [];
  for (const s of systems) {
    const ts = rounds.flatMap((r) => r.throughput.filter((t) => t.system === s));
    if (ts.length) {
      const m = (pick: (t: Throughput) => number) => median(ts.map(pick));
      const c = (k: keyof Throughput["cpuMsPerJob"]) => m((t) => t.cpuMsPerJob[k]);
      throughput.push({
        system: s,
        jobs: ts[0].jobs,
        seconds: m((t) => t.seconds),
        jobsPerS: m((t) => t.jobsPerS),
        cpuMsPerJob: {
          all: c("all"),
          server: c("server"),
          worker: c("worker"),
          submitter: c("submitter"),
          database: c("database"),
        },
      });
    }
    const ls = rounds.flatMap((r) => r.latency.filter((l) => l.system === s));
    if (ls.length) {
      const m = (pick: (l: Latency) => number) => median(ls.map(pick));
      const alt = ls[0].alt
        ? { what: ls[0].alt.what, p50: m((l) => l.alt!.p50), p99: m((l) => l.alt!.p99), max: m((l) => l.alt!.max) }
        : undefined;
      const failedSubmits = ls.reduce((sum, l) => sum + (l.failedSubmits ?? 0), 0);
      latency.push({
        system: s,
        jobs: ls[0].jobs,
        rate: ls[0].rate,
        p50: m((l) => l.p50),
        p99: m((l) => l.p99),
        max: m((l) => l.max),
        ...(alt ? { alt } : {}),
        ...(failedSubmits ? { failedSubmits } : {}),
      });
    }
  }
  return { throughput, latency };
}

/** Issue 37's targets on one set of figures (a round's, or the medians); undefined when a system was not run. */
function targets(t: Throughput[], l: Latency[]): string[] {
  const by = (s: System) => t.find((x) => x.system === s);
  const out: string[] = [];
  const ok = (yes: boolean) => (yes ? "met" : "NOT met");
  const [sqlite, pgEp, bull, boss] = [by("ep-sqlite"), by("ep-pg"), by("bullmq"), by("pg-boss")];
  if (sqlite && bull) {
    out.push(
      `EP on SQLite ≥ BullMQ's jobs/s: ${int(sqlite.jobsPerS)} vs ${int(bull.jobsPerS)} ` +
        `(${f(sqlite.jobsPerS / bull.jobsPerS)}×): ${ok(sqlite.jobsPerS >= bull.jobsPerS)}`,
    );
    const ratio = sqlite.cpuMsPerJob.all / bull.cpuMsPerJob.all;
    out.push(
      `EP on SQLite ≤ 2× BullMQ's CPU per job: ${f(sqlite.cpuMsPerJob.all)} ` +
        `vs ${f(bull.cpuMsPerJob.all)} ms (${f(ratio)}×): ${ok(ratio <= 2)}`,
    );
  }
  if (pgEp && boss)
    out.push(
      `EP on PostgreSQL ≥ pg-boss's jobs/s: ${int(pgEp.jobsPerS)} vs ${int(boss.jobsPerS)} ` +
        `(${f(pgEp.jobsPerS / boss.jobsPerS)}×): ${ok(pgEp.jobsPerS >= boss.jobsPerS)}`,
    );
  for (const x of l.filter((x) => x.system.startsWith("ep-")))
    out.push(`${DISPLAY[x.system]}: submit → start p99 ≤ 25 ms at ${x.rate}/s: ${f(x.p99)} ms: ${ok(x.p99 <= 25)}`);
  return out;
}

export function printSummary(
  rounds: Round[],
  setup: { cores: number; jobs: number; workers: number; rate: number; latencyJobs: number; submitConcurrency: number },
): void {
  const m = medians(rounds);
  const loads = rounds.map((r) => `${f(r.loadBefore)}→${f(r.loadAfter)}`).join(", ");
  const lines = [
    `## Medians of ${rounds.length} alternating round${rounds.length > 1 ? "s" : ""} ` +
      `(load average 1 min per round, before→after: ${loads}; ${setup.cores} cores)`,
    "",
  ];
  if (m.throughput.length) {
    lines.push(
      `Throughput: ${setup.jobs.toLocaleString("en-US")} no-op jobs, ${setup.workers} workers, ` +
        `submitted ${setup.submitConcurrency} calls in flight; CPU of every process per job (ms).`,
      "",
      ...throughputTable(m.throughput),
      "",
    );
  }
  if (m.latency.length) {
    lines.push(
      `Latency: ${setup.latencyJobs.toLocaleString("en-US")} jobs at ` +
        `an open-loop ${setup.rate}/s to ${setup.workers} idle workers.`,
      "",
      ...latencyTable(m.latency),
      "",
    );
  }
  if (m.throughput.length && m.latency.length)
    lines.push("For docs/PERFORMANCE.md (medians):", "", ...docsTable(m.throughput, m.latency), "");
  lines.push("Targets (issue 37), round by round and on the medians:", "");
  for (const r of rounds)
    for (const line of targets(r.throughput, r.latency)) lines.push(`- round ${r.index}: ${line}`);
  for (const line of targets(m.throughput, m.latency)) lines.push(`- medians: ${line}`);
  console.log(lines.join("\n"));
}
