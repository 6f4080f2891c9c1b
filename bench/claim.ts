// End-to-end claim benchmark through the real HTTP API: a real ep-tower process,
// submitters creating tasks, 8 workers claiming (long poll) and completing them.
// Reports tasks/s, submit→claim latency p50/p99, and CPU per task on both sides.
//   npm run build && node scripts/run-ts.mjs bench/claim.ts [--tasks 5000] [--workers 8] [--client http|fetch] [--pg
//     [--replicas 2]]
// EP_BENCH_PROF=<dir> writes a CPU profile of the tower there.
//
// --pg [--replicas N] runs the towers on PostgreSQL (EP_TEST_PG_URL, default
// postgres://127.0.0.1:5432/test; a fresh schema, dropped after) instead of SQLite: the
// freshly bundled ep-tower (tests/epd-harness.ts), N replicas on the same schema with the
// submitters and workers spread over them, and first a raw reference on the same database:
// the same submit/claim/complete loop written directly with pg (INSERT; UPDATE … WHERE id =
// (SELECT … FOR UPDATE SKIP LOCKED) RETURNING; UPDATE … succeeded) on the same migrated
// tables in another fresh schema. Target (issue 11): EP ≥ 70% of the reference at 8 workers.
// On both stores, after EP, a reference puts the same HTTP in front: a bare node:http server
// (child process; pg pool of 10 or better-sqlite3 with the tower's pragmas; no auth, no
// events, in-process long-poll wake-up) serving the same three REST paths with those
// statements, driven by the same client loop: tasks/s and CPU per task beside EP's
// (bench/claim-references.ts). Issue 21 compares the tower's CPU per task with it.
//
// Every task is three real HTTP/1.1 requests on the seed's REST paths (submit, claim,
// complete), each one JSON request and one JSON response. The default client is
// node:http with a keep-alive agent (one connection per loop, as any real client keeps);
// `--client fetch` uses the global fetch (undici), which costs this process about
// three times the CPU per request and was the bottleneck of the first figures.
import { request, Agent } from "node:http";
import { readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { join } from "node:path";
import { spawnTower, tempHome } from "../tests/harness.js";
import { freshSchema, spawnReplica } from "../tests/replicas-harness.js";
import { httpReference, pgReference } from "./claim-references.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const { values } = parseArgs({
  options: {
    tasks: { type: "string", default: "5000" },
    workers: { type: "string", default: "8" },
    submitters: { type: "string", default: "4" },
    client: { type: "string", default: "http" },
    pg: { type: "boolean", default: false },
    replicas: { type: "string", default: "1" },
    // workers complete with claim_next (the next task comes back with the completion, started)
    fused: { type: "boolean", default: false },
  },
});
const TASKS = Number(values.tasks);
const WORKERS = Number(values.workers);
const SUBMITTERS = Number(values.submitters);
if (values.client !== "http" && values.client !== "fetch") throw new Error("--client must be http or fetch");

const REPLICAS = Number(values.replicas);
if (!values.pg && REPLICAS !== 1) throw new Error("--replicas needs --pg");

const home = tempHome("ep-bench-claim-");
const loop = { tasks: TASKS, workers: WORKERS, submitters: SUBMITTERS };
const reference = values.pg ? await pgReference(loop) : undefined;
const schema = values.pg ? await freshSchema() : undefined;
const towers: { child: import("node:child_process").ChildProcess; url: string; stop(): Promise<void> }[] = [];
let adminToken: string;
const profileArgs = process.env.EP_BENCH_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.EP_BENCH_PROF}`] : [];
if (schema) {
  for (let i = 0; i < REPLICAS; i++)
    towers.push(await spawnReplica(schema, home.dir, { EP_LOG_LEVEL: "error" }, profileArgs));
  adminToken = readFileSync(join(home.dir, "tower", "admin.token"), "utf8").trim();
} else {
  const t = await spawnTower(home.dir, { EP_LOG_LEVEL: "error" }, profileArgs);
  towers.push(t);
  adminToken = t.adminToken;
}
const tower = towers[0];
const auth = `Bearer ${adminToken}`;
const agent = new Agent({ keepAlive: true, maxSockets: WORKERS + SUBMITTERS + 2 });

function postHttp(path: string, body: unknown, base = tower.url): Promise<any> {
  const payload = Buffer.from(JSON.stringify(body));
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname,
        port,
        path,
        method: "POST",
        agent,
        headers: { authorization: auth, "content-type": "application/json", "content-length": payload.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const json = JSON.parse(Buffer.concat(chunks).toString("utf8"));
          if (res.statusCode! >= 300) reject(new Error(`${path}: ${res.statusCode} ${JSON.stringify(json)}`));
          else resolve(json);
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

async function postFetch(path: string, body: unknown, base = tower.url): Promise<any> {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { authorization: auth, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as any;
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}
const post = values.client === "fetch" ? postFetch : postHttp;

const { domain } = await post("/domains", { name: "bench" });
const { mission } = await post(`/domains/${domain.id}/m`, { title: "bench" });
// agents are enrolled by an admin for the bench (no daemon involved)
const { createClient } = await import("@connectrpc/connect");
const { createConnectTransport } = await import("@connectrpc/connect-node");
const { AgentService } = await import("../gen/ep/tower/v1/fleet_pb.js");
const agentsClient = createClient(
  AgentService,
  createConnectTransport({
    baseUrl: tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", auth), next(req))],
  }),
);
const agents: string[] = [];
for (let i = 0; i < WORKERS; i++)
  agents.push((await agentsClient.enrollAgent({ domainId: domain.id, runtime: Runtime.SHELL })).agent!.id);

/** utime + stime of a process in ms (Linux /proc). */
function procCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ = 100 on Linux
}

const submittedAt = new Map<string, number>();
const latencies: number[] = [];
let completed = 0;
const load0 = loadavg()[0];
const towersCpu = () => towers.reduce((sum, t) => sum + procCpuMs(t.child.pid!), 0);
const towerCpu0 = towersCpu();
/** With several replicas, loop i talks to replica i mod N. */
const baseOf = (i: number) => towers[i % towers.length].url;
const benchCpu0 = process.cpuUsage();
const start = performance.now();

let next = 0;
const submitters = Array.from({ length: SUBMITTERS }, async (_, i) => {
  while (next < TASKS) {
    next++;
    const t0 = performance.now();
    const { task } = await post(`/work/missions/${mission.id}/tasks`, { title: "t" }, baseOf(i));
    if (!submittedAt.has(task.id)) submittedAt.set(task.id, t0);
  }
});
let requests = 0;
const workers = agents.map(async (agentId, i) => {
  let task: { id: string } | undefined;
  while (completed < TASKS) {
    if (!task) {
      requests++;
      ({ task } = await post(
        `/work/agents/${agentId}/claim`,
        values.fused ? { wait_ms: 200, start: true } : { wait_ms: 200 },
        baseOf(i + 1),
      ));
      if (!task) continue;
    }
    const t0 = submittedAt.get(task.id);
    if (t0 !== undefined) latencies.push(performance.now() - t0);
    requests++;
    const done = await post(
      `/work/tasks/${task.id}/complete`,
      values.fused
        ? { agent_id: agentId, result: { output: "ok" }, claim_next: true }
        : { agent_id: agentId, result: { output: "ok" } },
      baseOf(i + 1),
    );
    task = values.fused ? done.next : undefined;
    completed++;
  }
});
await Promise.all([...submitters, ...workers]);
const seconds = (performance.now() - start) / 1000;
const towerCpuMs = towersCpu() - towerCpu0;
const benchCpu = process.cpuUsage(benchCpu0);
const load1 = loadavg()[0];
for (const t of towers) await t.stop();
await schema?.drop();
home.cleanup();
const httpRef = await httpReference(values.pg ? "pg" : "sqlite", loop, post);
agent.destroy();

latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
const line = {
  tasks: TASKS,
  workers: WORKERS,
  submitters: SUBMITTERS,
  client: values.client,
  store: values.pg ? `postgres (${REPLICAS} replica${REPLICAS > 1 ? "s" : ""})` : "sqlite",
  seconds: Number(seconds.toFixed(2)),
  tasks_per_s: Math.round(TASKS / seconds),
  fused: values.fused,
  requests_per_task: Number(((requests + TASKS) / TASKS).toFixed(2)),
  requests_per_s: Math.round((requests + TASKS) / seconds),
  submit_to_claim_ms: { p50: Number(pct(50).toFixed(2)), p99: Number(pct(99).toFixed(2)) },
  cpu_ms_per_task: {
    tower: Number((towerCpuMs / TASKS).toFixed(3)),
    bench_client: Number(((benchCpu.user + benchCpu.system) / 1000 / TASKS).toFixed(3)),
  },
  ...(reference
    ? {
        pg_reference: {
          ...reference,
          note: "raw pg: INSERT / UPDATE … FOR UPDATE SKIP LOCKED / UPDATE, same loop and tables",
        },
        ratio_to_reference: Number((TASKS / seconds / reference.tasks_per_s).toFixed(3)),
      }
    : {}),
  http_reference: {
    ...httpRef,
    note:
      `bare node:http + ${values.pg ? "pg" : "better-sqlite3"} server, ` +
      `the same statements without events or auth, same client loop`,
  },
  ratio_to_http_reference: Number((TASKS / seconds / httpRef.tasks_per_s).toFixed(3)),
  cpu_ratio_to_http_reference: Number((towerCpuMs / TASKS / httpRef.cpu_ms_per_task!).toFixed(2)),
  load_average_1m: { before: Number(load0.toFixed(2)), after: Number(load1.toFixed(2)) },
  cores: cpus().length,
};
console.log(JSON.stringify(line, null, 2));
