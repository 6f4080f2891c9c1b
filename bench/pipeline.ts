// Tasks that wait for other tasks (issue 40) through one real epd.
//   node scripts/run-ts.mjs bench/pipeline.ts [--width 100] [--depth 100] [--agents <width>] [--rounds 1] [--warmup 5]
//     [--prof <dir>] [--json]
//
// `width` chains of `depth` shell tasks (`true`), each task depending on the one before it in its
// chain (10,000 tasks by default), against the same number of independent shell tasks in the same
// run, each set in a domain of its own. Every task is created first while its domain has no agent
// (only the chains' heads are queued then), so what is timed is the tower running the work, not
// creating it: from the moment the domain's agents are enrolled on the real epd to the last
// task's success.
//
// Reported:
// - child latency: from the commit of a parent's success (the hub publishes `task.succeeded`
//   right after it) to the commit of its child's claim (`task.claimed`), p50/p90/p99 — the child is
//   queued in the parent's own commit, in O(children) (task_deps), never by a scan;
// - the tower's CPU per task (this process: the tower runs in it, the benchmark's own work is the
//   event subscription) for chained vs independent tasks, and their ratio; epd's likewise;
// - the tower's commits (hub publishes) and events per task, which tell an extra round trip.
// With --rounds n, n rounds of both sets, alternating which runs first (round 1 chained first),
// each set in fresh domains; the figures are per round, and pooled over the rounds (the ratio of
// the summed CPU: with an even n, the machine's drift between a round's two sets cancels out). Before them, untimed,
// WIDTH × 5 tasks of each set warm the JIT of both processes (--warmup 0: none), which the first timed set paid
// alone; each set starts after a WAL checkpoint and a full GC of the tower (runPhase). The idle
// cost of both processes (5 s, every agent idle) is reported beside. --prof <dir>: a CPU profile of the tower (this
// process) per set, <dir>/<set>-<round>.cpuprofile. EP_BENCH_PROF=<dir>: a CPU profile of epd there, written as it
// exits (each set's window in it on stderr, as "window <set> <from µs> <to µs>" of the monotonic clock the profile's
// times are on); EP_BENCH_EPD_FLAGS="--trace-gc …": Node flags for epd, its stdout shown. epd's CPU includes its spawn
// helper's (the process that forks the runs); epd_without_spawner_ms_per_task is epd's own. The agents of a set
// enroll at once (one after the other took ~0.2 s each while epd ran the first ones' tasks). With
// `node -r ./bench/sql-cost.cjs scripts/run-ts.mjs bench/pipeline.ts …`, each set's SQL statements and their CPU per
// task.
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Session } from "node:inspector/promises";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { jsonRpcCall } from "../daemon/mgmt/client.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, FIXTURES, registerNode } from "../tests/epd-harness.js";
import { startTower, tempHome, waitFor } from "../tests/harness.js";
import { epdCpuMs, pct, procCpuMs } from "./figures.js";

const { values } = parseArgs({
  options: {
    width: { type: "string", default: "100" },
    depth: { type: "string", default: "100" },
    // default: one per chain, so an idle agent can take each child the moment it is queued (fewer: the child waits
    // behind other chains)
    agents: { type: "string" },
    rounds: { type: "string", default: "1" },
    warmup: { type: "string", default: "5" },
    prof: { type: "string" },
    json: { type: "boolean", default: false },
  },
});
const WIDTH = Number(values.width);
const DEPTH = Number(values.depth);
const AGENTS = Number(values.agents ?? values.width);
const N = WIDTH * DEPTH;
const ROUNDS = Number(values.rounds);

const home = tempHome("ep-bench-pipeline-");
const t = await startTower({ home: home.dir, env: { EP_LEASE_MS: "60000" } });
const work = t.client(WorkService);

// what the tower commits, timed as the hub publishes it
const succeededAt = new Map<string, number>();
const claimedAt = new Map<string, number>();
let succeeded = 0;
let publishes = 0;
let events = 0;
t.tower.deps.hub.subscribe((batch) => {
  const now = performance.now();
  publishes++;
  events += batch.length;
  for (const e of batch) {
    if (!e.taskId) continue;
    if (e.name === "task.succeeded" && !succeededAt.has(e.taskId)) succeededAt.set(e.taskId, now), succeeded++;
    else if (e.name === "task.claimed" && !claimedAt.has(e.taskId)) claimedAt.set(e.taskId, now);
  }
});

// the one real epd; agents are enrolled per phase
const nodeFile = join(home.dir, "node.json");
await registerNode(t.url, t.adminToken, nodeFile);
mkdirSync(join(home.dir, "epd"), { recursive: true, mode: 0o700 });
const { epd: epdMain } = await buildBinaries();
// epd's Node flags: its CPU profile (EP_BENCH_PROF), any others (EP_BENCH_EPD_FLAGS)
const epdFlags = [
  ...(process.env.EP_BENCH_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.EP_BENCH_PROF}`] : []),
  ...(process.env.EP_BENCH_EPD_FLAGS?.split(" ").filter(Boolean) ?? []),
];
const epd = spawn(process.execPath, [...epdFlags, epdMain, "run", "--backend-url", t.url], {
  env: {
    ...process.env,
    EP_HOME: home.dir,
    EP_NODE_FILE: nodeFile,
    EP_LOG_LEVEL: "warn",
    EP_POLL_MS: "60000",
    PATH: `${FIXTURES}:${process.env.PATH}`,
  },
  stdio: ["ignore", process.env.EP_BENCH_EPD_FLAGS ? "inherit" : "ignore", "inherit"],
});
process.on("exit", () => epd.exitCode === null && epd.kill("SIGKILL"));
// stopped from outside (timeout, Ctrl-C): epd goes with it
for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => process.exit(1));
const mgmt = join(home.dir, "epd", "mgmt.sock");
const call = <T>(method: string, params: Record<string, unknown> = {}) =>
  jsonRpcCall<T>(mgmt, method, params, { timeoutMs: 60_000 });
await waitFor(
  async () => (await call<{ link: string }>("daemon.status").catch(() => undefined))?.link === "connected",
  15_000,
);

/**
 * Creates the phase's tasks in a domain of its own (no agent yet); `chained`: WIDTH chains of DEPTH. Returns [child,
 * parent] pairs and every id.
 */
async function createPhase(
  name: string,
  chained: boolean,
  depth = DEPTH,
): Promise<{ domainId: string; ids: string[]; edges: [string, string][] }> {
  const domainId = (await work.createDomain({ name })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: name })).mission!.id;
  const ids: string[] = [];
  const edges: [string, string][] = [];
  const last: string[] = [];
  for (let level = 0; level < depth; level++) {
    const batch = [];
    for (let c = 0; c < WIDTH; c++) {
      const parent = chained && level > 0 ? last[c] : undefined;
      batch.push(
        work
          .createTask({
            missionId,
            title: `${name} ${level}/${c}`,
            runtime: Runtime.SHELL,
            input: { command: "true" },
            dependsOn: parent ? [parent] : [],
          })
          .then((r) => ({ c, id: r.task!.id, parent })),
      );
    }
    for (const { c, id, parent } of await Promise.all(batch)) {
      last[c] = id;
      ids.push(id);
      if (parent) edges.push([id, parent]);
    }
  }
  return { domainId, ids, edges };
}

/** Enrolls the agents, waits for every task of the phase to succeed; the tower's and epd's CPU over that span. */
const profiler = values.prof ? new Session() : undefined;
if (profiler) {
  mkdirSync(values.prof!, { recursive: true });
  profiler.connect();
  await profiler.post("Profiler.enable");
}

// Each timed set starts from the same state: the WAL checkpointed (SQLite's automatic checkpoint
// would otherwise copy the creation's pages during whichever set ran first) and a full GC done
// (the creation's garbage likewise). Without either, the set run first read up to 2× the other.
setFlagsFromString("--expose-gc");
const fullGc = runInNewContext("gc") as () => void;
const sqlite = (t.tower.deps.store as unknown as { db?: { pragma(p: string): unknown } }).db;

/** bench/sql-cost.cjs, when preloaded: each set's statements and their CPU, on stderr. */
const sqlCost = (globalThis as { __epSqlCost?: { start(): void; stop(n: number): string } }).__epSqlCost;

async function runPhase(phase: { domainId: string; ids: string[] }, label: string) {
  // a transaction of the tower's may be open (SQLITE_LOCKED): again once it is done
  for (let i = 0; sqlite && i < 100; i++) {
    try {
      sqlite.pragma("wal_checkpoint(TRUNCATE)");
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  fullGc();
  sqlCost?.start();
  await profiler?.post("Profiler.start");
  const tower0 = procCpuMs("self");
  const epd0 = epdCpuMs(epd.pid!);
  const epdAlone0 = procCpuMs(epd.pid!);
  const [succeeded0, publishes0, events0] = [succeeded, publishes, events];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: AGENTS }, (_, i) =>
      call("agent.enroll", { domainId: phase.domainId, runtime: "shell", name: `${label}-${i}` }),
    ),
  );
  const enrolledS = (performance.now() - t0) / 1000;
  const h0 = process.hrtime.bigint() / 1000n;
  await waitFor(() => succeeded - succeeded0 >= phase.ids.length, 1_800_000, 50);
  if (process.env.EP_BENCH_PROF) console.error("window", label, h0, process.hrtime.bigint() / 1000n);
  const seconds = (performance.now() - t0) / 1000;
  const n = phase.ids.length;
  const out = {
    seconds: +seconds.toFixed(1),
    enrolled_s: +enrolledS.toFixed(2),
    tasks_per_s: Math.round(n / seconds),
    tower_cpu_ms_per_task: +((procCpuMs("self") - tower0) / n).toFixed(3),
    epd_cpu_ms_per_task: +((epdCpuMs(epd.pid!) - epd0) / n).toFixed(3),
    epd_without_spawner_ms_per_task: +((procCpuMs(epd.pid!) - epdAlone0) / n).toFixed(3),
    commits_per_task: +((publishes - publishes0) / n).toFixed(3),
    events_per_task: +((events - events0) / n).toFixed(3),
  };
  if (sqlCost) console.error(`sql cost, ${label}:\n${sqlCost.stop(n)}`);
  if (profiler)
    writeFileSync(
      join(values.prof!, `${label}.cpuprofile`),
      JSON.stringify((await profiler.post("Profiler.stop")).profile),
    );
  return out;
}

if (Number(values.warmup) > 0) {
  for (const chained of [true, false])
    await runPhase(
      await createPhase(`warm-${chained}`, chained, Number(values.warmup)),
      `warm-${chained ? "chain" : "indep"}`,
    );
}
type SetFigures = { tower_cpu_ms_per_task: number };
const rounds: { chained: SetFigures; independent: SetFigures; [figure: string]: unknown }[] = [];
for (let r = 1; r <= ROUNDS; r++) {
  const chains = await createPhase(`chains-${r}`, true);
  const independent = await createPhase(`independent-${r}`, false);
  const chainedFirst = r % 2 === 1;
  const first = chainedFirst ? await runPhase(chains, `chain-${r}`) : await runPhase(independent, `indep-${r}`);
  const second = chainedFirst ? await runPhase(independent, `indep-${r}`) : await runPhase(chains, `chain-${r}`);
  const [chained, indep] = chainedFirst ? [first, second] : [second, first];
  const latencies = chains.edges.map(([child, parent]) => claimedAt.get(child)! - succeededAt.get(parent)!);
  rounds.push({
    round: r,
    first: chainedFirst ? "chained" : "independent",
    child_claim_after_parent_ms: {
      p50: pct(latencies, 50),
      p90: pct(latencies, 90),
      p99: pct(latencies, 99),
      max: pct(latencies, 100),
    },
    chained,
    independent: indep,
    tower_cpu_ratio_chained_vs_independent: +(chained.tower_cpu_ms_per_task / indep.tower_cpu_ms_per_task).toFixed(3),
  });
}
// what each process costs doing nothing for 5 s with every agent enrolled and idle: a set that
// takes longer pays more of it per task (timers, the link's pings), which is not the set's work
await profiler?.post("Profiler.start");
const idle0 = { tower: procCpuMs("self"), epd: epdCpuMs(epd.pid!), at: performance.now() };
await new Promise((r) => setTimeout(r, 5000));
if (profiler)
  writeFileSync(join(values.prof!, "idle.cpuprofile"), JSON.stringify((await profiler.post("Profiler.stop")).profile));
const idleS = (performance.now() - idle0.at) / 1000;
const idle = {
  tower_cpu_ms_per_s: +((procCpuMs("self") - idle0.tower) / idleS).toFixed(2),
  epd_cpu_ms_per_s: +((epdCpuMs(epd.pid!) - idle0.epd) / idleS).toFixed(2),
};
// over every round: the sets' CPU summed (each round alternates which set runs first, so a drift
// of the machine's speed between the two sets of a round cancels out over an even number of them)
const total = (set: "chained" | "independent") => rounds.reduce((sum, r) => sum + r[set].tower_cpu_ms_per_task, 0);
const pooled = {
  tower_cpu_ms_per_task_chained: +(total("chained") / ROUNDS).toFixed(3),
  tower_cpu_ms_per_task_independent: +(total("independent") / ROUNDS).toFixed(3),
  tower_cpu_ratio_chained_vs_independent: +(total("chained") / total("independent")).toFixed(3),
};
const result = { tasks: N, width: WIDTH, depth: DEPTH, agents: AGENTS, idle, rounds, pooled };
console.log(values.json ? JSON.stringify(result) : JSON.stringify(result, null, 2));
epd.kill("SIGTERM");
// its profile (EP_BENCH_PROF) is written as it exits
await new Promise((r) => {
  epd.once("exit", r);
  setTimeout(r, 10_000).unref();
});
await t.close();
home.cleanup();
process.exit(0);
