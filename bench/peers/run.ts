// EP against the job queues a TypeScript team would pick instead (issue 37): BullMQ (Redis),
// pg-boss and graphile-worker (PostgreSQL), and EP on SQLite and on PostgreSQL, end to end, the
// same no-op jobs through each, in alternating rounds. See bench/peers/README.md.
//   npm ci --prefix bench/peers   (once; the peer libraries live in bench/peers/node_modules)
//   node scripts/run-ts.mjs bench/peers/run.ts [--rounds 3] [--jobs 5000] [--workers 16]
//     [--rate 200] [--latency-jobs 2000] [--warmup 1000] [--latency-warmup 200]
//     [--submit-concurrency 8] [--submit-in-flight 16]
//     [--systems bullmq,pg-boss,graphile-worker,ep-sqlite,ep-pg] [--scenarios throughput,latency]
//     [--pgboss-batch 50] [--ep-link session|http1] [--json]
// PostgreSQL: EP_TEST_PG_URL (default postgres://127.0.0.1:5432/test), fresh schemas, dropped
// after. Redis: EP_BENCH_REDIS_URL (default redis://127.0.0.1:6379/14), fresh key prefixes,
// deleted after.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { PG_URL } from "../../tests/replicas-harness.js";
import { withDefaultUser } from "../../tower/store/postgres/pg-support.js";
import { HERE } from "./child.js";
import { setupEp } from "./ep-system.js";
import type { System } from "./peer-config.js";
import { setupPeer } from "./peer-systems.js";
import { latency, throughput, type Latency, type Setup, type Throughput } from "./scenarios.js";
import { printRound, printSummary, type Round } from "./report.js";

// Ctrl-C runs the exit hooks that stop the towers and epds this run started
process.once("SIGINT", () => process.exit(130));

const ALL: System[] = ["bullmq", "pg-boss", "graphile-worker", "ep-sqlite", "ep-pg"];
const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    jobs: { type: "string", default: "5000" },
    workers: { type: "string", default: "16" },
    rate: { type: "string", default: "200" },
    "latency-jobs": { type: "string", default: "2000" },
    // V8 is still optimizing the hot paths after a few hundred jobs: EP on SQLite's CPU per job
    // over 1,000 was 4.3 ms after 100 warm-up jobs, 2.05 ms after 1,000 (tower and epd alike)
    warmup: { type: "string", default: "1000" },
    "latency-warmup": { type: "string", default: "200" },
    "submit-concurrency": { type: "string", default: "8" },
    // the latency scenario's cap on outstanding submit calls (a client's connection pool)
    "submit-in-flight": { type: "string", default: "16" },
    systems: { type: "string", default: ALL.join(",") },
    scenarios: { type: "string", default: "throughput,latency" },
    "pgboss-batch": { type: "string", default: "50" },
    // epd's link: session (its default, one HTTP/2 stream both ways) or http1 (the link plus unary calls)
    "ep-link": { type: "string" },
    json: { type: "boolean", default: false },
  },
});

/** A positive integer option, or a clear error naming it. */
function count(name: keyof typeof values): number {
  const raw = values[name] as string;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got '${raw}'`);
  return n;
}
const rounds = count("rounds");
const systems = values.systems!.split(",").map((s) => s.trim()) as System[];
for (const s of systems)
  if (!ALL.includes(s)) throw new Error(`--systems: unknown system '${s}' (known: ${ALL.join(", ")})`);
const scenarios = values.scenarios!.split(",").map((s) => s.trim());
for (const s of scenarios)
  if (s !== "throughput" && s !== "latency")
    throw new Error(`--scenarios: unknown scenario '${s}' (known: throughput, latency)`);
if (systems.some((s) => !s.startsWith("ep-")) && !existsSync(join(HERE, "node_modules", "bullmq"))) {
  throw new Error(
    `the peer libraries are not installed: run \`npm ci --prefix bench/peers\` first (or --systems ep-sqlite,ep-pg)`,
  );
}

const epLink = values["ep-link"];
if (epLink !== undefined && epLink !== "session" && epLink !== "http1")
  throw new Error(`--ep-link must be session or http1, got '${epLink}'`);

const base = {
  concurrency: count("workers"),
  pgUrl: withDefaultUser(PG_URL),
  redisUrl: process.env.EP_BENCH_REDIS_URL ?? "redis://127.0.0.1:6379/14",
  pgBossBatch: count("pgboss-batch"),
  runId: randomBytes(3).toString("hex"),
  ...(epLink ? { epLink: epLink as "session" | "http1" } : {}),
};
const setup: Setup = (system, o) =>
  system === "ep-sqlite" ? setupEp("sqlite", o) : system === "ep-pg" ? setupEp("pg", o) : setupPeer(system, o);
/** A whole-number option (0 allowed), or a clear error naming it. */
function whole(name: "warmup" | "latency-warmup"): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number, got '${values[name]}'`);
  return n;
}
const warmup = whole("warmup");
const latencyWarmup = whole("latency-warmup");

const done: Round[] = [];
for (let r = 0; r < rounds; r++) {
  // the order rotates, so machine noise (another job on the box) spreads over the systems
  const order = systems.map((_, i) => systems[(i + r) % systems.length]);
  const round: Round = { index: r + 1, order, loadBefore: loadavg()[0], loadAfter: 0, throughput: [], latency: [] };
  for (const system of order) {
    if (scenarios.includes("throughput")) {
      const t: Throughput = await throughput(setup, system, {
        ...base,
        latency: false,
        jobs: count("jobs"),
        warmup,
        submitConcurrency: count("submit-concurrency"),
      });
      round.throughput.push(t);
      if (values.json) console.log(JSON.stringify({ round: r + 1, scenario: "throughput", ...t }));
    }
    if (scenarios.includes("latency")) {
      const l: Latency = await latency(setup, system, {
        ...base,
        latency: true,
        jobs: count("latency-jobs"),
        warmup: latencyWarmup,
        rate: count("rate"),
        inFlight: count("submit-in-flight"),
      });
      round.latency.push(l);
      if (values.json) console.log(JSON.stringify({ round: r + 1, scenario: "latency", ...l }));
    }
  }
  round.loadAfter = loadavg()[0];
  done.push(round);
  printRound(round);
}
printSummary(done, {
  cores: cpus().length,
  jobs: count("jobs"),
  workers: count("workers"),
  rate: count("rate"),
  latencyJobs: count("latency-jobs"),
  submitConcurrency: count("submit-concurrency"),
});
process.exit(0);
