// Tasks that wait for other tasks (issue 40) through one real epd.
//   node scripts/run-ts.mjs bench/pipeline.ts [--width 100] [--depth 100] [--agents <width>] [--json]
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
//   event subscription) for chained vs independent tasks, and their ratio; epd's likewise.
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { jsonRpcCall } from "../daemon/mgmt/client.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, FIXTURES, registerNode } from "../tests/epd-harness.js";
import { startTower, tempHome, waitFor } from "../tests/harness.js";
import { pct, procCpuMs } from "./figures.js";

const { values } = parseArgs({
  options: {
    width: { type: "string", default: "100" },
    depth: { type: "string", default: "100" },
    // default: one per chain, so an idle agent can take each child the moment it is queued (fewer: the child waits behind other chains)
    agents: { type: "string" },
    json: { type: "boolean", default: false },
  },
});
const WIDTH = Number(values.width);
const DEPTH = Number(values.depth);
const AGENTS = Number(values.agents ?? values.width);
const N = WIDTH * DEPTH;

const home = tempHome("ep-bench-pipeline-");
const t = await startTower({ home: home.dir, env: { EP_LEASE_MS: "60000" } });
const work = t.client(WorkService);

// what the tower commits, timed as the hub publishes it
const succeededAt = new Map<string, number>();
const claimedAt = new Map<string, number>();
t.tower.deps.hub.subscribe((events) => {
  const now = performance.now();
  for (const e of events) {
    if (!e.taskId) continue;
    if (e.name === "task.succeeded") succeededAt.set(e.taskId, now);
    else if (e.name === "task.claimed" && !claimedAt.has(e.taskId)) claimedAt.set(e.taskId, now);
  }
});

// the one real epd; agents are enrolled per phase
const nodeFile = join(home.dir, "node.json");
await registerNode(t.url, t.adminToken, nodeFile);
mkdirSync(join(home.dir, "epd"), { recursive: true, mode: 0o700 });
const { epd: epdMain } = await buildBinaries();
const epd = spawn(process.execPath, [epdMain, "run", "--backend-url", t.url], {
  env: { ...process.env, EP_HOME: home.dir, EP_NODE_FILE: nodeFile, EP_LOG_LEVEL: "warn", EP_POLL_MS: "60000", PATH: `${FIXTURES}:${process.env.PATH}` },
  stdio: ["ignore", "ignore", "inherit"],
});
process.on("exit", () => epd.exitCode === null && epd.kill("SIGKILL"));
// stopped from outside (timeout, Ctrl-C): epd goes with it
for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => process.exit(1));
const mgmt = join(home.dir, "epd", "mgmt.sock");
const call = <T,>(method: string, params: Record<string, unknown> = {}) => jsonRpcCall<T>(mgmt, method, params, { timeoutMs: 60_000 });
await waitFor(async () => (await call<{ link: string }>("daemon.status").catch(() => undefined))?.link === "connected", 15_000);

/** Creates the phase's tasks in a domain of its own (no agent yet); `chained`: WIDTH chains of DEPTH. Returns [child, parent] pairs and every id. */
async function createPhase(name: string, chained: boolean): Promise<{ domainId: string; ids: string[]; edges: [string, string][] }> {
  const domainId = (await work.createDomain({ name })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: name })).mission!.id;
  const ids: string[] = [];
  const edges: [string, string][] = [];
  const last: string[] = [];
  for (let level = 0; level < DEPTH; level++) {
    const batch = [];
    for (let c = 0; c < WIDTH; c++) {
      const parent = chained && level > 0 ? last[c] : undefined;
      batch.push(work.createTask({ missionId, title: `${name} ${level}/${c}`, runtime: Runtime.SHELL, input: { command: "true" }, dependsOn: parent ? [parent] : [] }).then((r) => ({ c, id: r.task!.id, parent })));
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
async function runPhase(phase: { domainId: string; ids: string[] }, label: string) {
  const tower0 = procCpuMs("self");
  const epd0 = procCpuMs(epd.pid!);
  const t0 = performance.now();
  for (let i = 0; i < AGENTS; i++) await call("agent.enroll", { domainId: phase.domainId, runtime: "shell", name: `${label}-${i}` });
  await waitFor(() => phase.ids.every((id) => succeededAt.has(id)), 1_800_000, 50);
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, towerMsPerTask: (procCpuMs("self") - tower0) / phase.ids.length, epdMsPerTask: (procCpuMs(epd.pid!) - epd0) / phase.ids.length };
}

const chains = await createPhase("chains", true);
const independent = await createPhase("independent", false);
const chainRun = await runPhase(chains, "chain");
const indepRun = await runPhase(independent, "indep");

const latencies = chains.edges.map(([child, parent]) => claimedAt.get(child)! - succeededAt.get(parent)!);
const result = {
  tasks: N,
  width: WIDTH,
  depth: DEPTH,
  agents: AGENTS,
  child_claim_after_parent_ms: { p50: pct(latencies, 50), p90: pct(latencies, 90), p99: pct(latencies, 99), max: pct(latencies, 100) },
  chained: { seconds: +chainRun.seconds.toFixed(1), tasks_per_s: Math.round(N / chainRun.seconds), tower_cpu_ms_per_task: +chainRun.towerMsPerTask.toFixed(3), epd_cpu_ms_per_task: +chainRun.epdMsPerTask.toFixed(3) },
  independent: { seconds: +indepRun.seconds.toFixed(1), tasks_per_s: Math.round(N / indepRun.seconds), tower_cpu_ms_per_task: +indepRun.towerMsPerTask.toFixed(3), epd_cpu_ms_per_task: +indepRun.epdMsPerTask.toFixed(3) },
  tower_cpu_ratio_chained_vs_independent: +(chainRun.towerMsPerTask / indepRun.towerMsPerTask).toFixed(3),
};
console.log(values.json ? JSON.stringify(result) : JSON.stringify(result, null, 2));
epd.kill("SIGTERM");
await t.close();
home.cleanup();
process.exit(0);
