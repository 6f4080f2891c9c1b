// Does a webhook whose receiver is dead or slow slow the work path down? One real ep-tower
// process (SQLite), submitters and workers on the seed's REST paths (submit, claim, complete, as
// bench/claim.ts), in alternating rounds:
//   none  — no webhook in the domain;
//   quiet — a webhook for task.failed to a dead receiver while every task succeeds: what a
//           configured webhook costs the work path when nothing matches (the reader alone);
//   dead  — a webhook for task.succeeded (a delivery for every task) to a loopback port nothing
//           listens on: every attempt fails at once and is retried (the product's backoff, or
//           --retry-ms to retry at that pace all through the round);
//   ok    — the same event to a receiver that answers 200 at once (what delivering itself costs);
//   slow  — the same event to a receiver that answers after 2 s (every sender slot held).
// Reports tasks/s per round and the median per mode, plus the deliveries queued and attempts made.
//   npm run build && node scripts/run-ts.mjs bench/webhooks.ts [--tasks 2000] [--rounds 3] [--workers 8] [--retry-ms
//     100]
import { readFileSync } from "node:fs";
import { Agent, createServer, request } from "node:http";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { freePort, spawnTower, tempHome } from "../tests/harness.js";

const { values } = parseArgs({
  options: {
    tasks: { type: "string", default: "2000" },
    rounds: { type: "string", default: "3" },
    workers: { type: "string", default: "8" },
    submitters: { type: "string", default: "4" },
    "retry-ms": { type: "string" },
  },
});
const TASKS = Number(values.tasks);
const ROUNDS = Number(values.rounds);
const WORKERS = Number(values.workers);
const SUBMITTERS = Number(values.submitters);

const home = tempHome("ep-bench-hooks-");
const RETRY = values["retry-ms"];
const retryEnv: Record<string, string> = RETRY
  ? {
      EP_WEBHOOK_BACKOFF_MS: RETRY,
      EP_WEBHOOK_BACKOFF_MAX_MS: RETRY,
      EP_WEBHOOK_MAX_ATTEMPTS: "50",
      EP_WEBHOOK_POLL_MS: RETRY,
    }
  : {};
const tower = await spawnTower(home.dir, { EP_LOG_LEVEL: "error", ...retryEnv });
const auth = `Bearer ${tower.adminToken}`;
const agent = new Agent({ keepAlive: true, maxSockets: WORKERS + SUBMITTERS + 2 });

function call(method: string, path: string, body?: unknown): Promise<any> {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const { hostname, port } = new URL(tower.url);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { authorization: auth };
    if (payload) Object.assign(headers, { "content-type": "application/json", "content-length": payload.length });
    const req = request({ hostname, port, path, method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const json = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
        if (res.statusCode! >= 300) reject(new Error(`${method} ${path}: ${res.statusCode} ${JSON.stringify(json)}`));
        else resolve(json);
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}

// the live receiver: 200 at once
const ok = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.writeHead(200).end());
});
await new Promise<void>((resolve) => ok.listen(0, "127.0.0.1", resolve));
const okUrl = `http://127.0.0.1:${(ok.address() as { port: number }).port}/ok`;
// the slow receiver: holds every request 2 s, then 200
const slow = createServer((req, res) => {
  req.resume();
  req.on("end", () => setTimeout(() => res.writeHead(200).end(), 2000));
});
await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
const slowUrl = `http://127.0.0.1:${(slow.address() as { port: number }).port}/slow`;
const deadUrl = `http://127.0.0.1:${await freePort()}/dead`;

const { domain } = await call("POST", "/domains", { name: "bench" });
const { mission } = await call("POST", `/domains/${domain.id}/m`, { title: "bench" });
const { createClient } = await import("@connectrpc/connect");
const { createConnectTransport } = await import("@connectrpc/connect-node");
const { AgentService } = await import("../gen/ep/tower/v1/fleet_pb.js");
const { Runtime } = await import("../gen/ep/tower/v1/resources_pb.js");
const agents = createClient(
  AgentService,
  createConnectTransport({
    baseUrl: tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", auth), next(req))],
  }),
);
const agentIds: string[] = [];
for (let i = 0; i < WORKERS; i++)
  agentIds.push((await agents.enrollAgent({ domainId: domain.id, runtime: Runtime.SHELL })).agent!.id);

/** utime + stime of a process in ms (Linux /proc; USER_HZ = 100). */
function procCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

async function round(): Promise<number> {
  let next = 0;
  let completed = 0;
  const start = performance.now();
  const submitters = Array.from({ length: SUBMITTERS }, async () => {
    while (next < TASKS) {
      next++;
      await call("POST", `/work/missions/${mission.id}/tasks`, { title: "t" });
    }
  });
  const workers = agentIds.map(async (agentId) => {
    while (completed < TASKS) {
      const { task } = await call("POST", `/work/agents/${agentId}/claim`, { wait_ms: 200 });
      if (!task) continue;
      await call("POST", `/work/tasks/${task.id}/complete`, { agent_id: agentId, result: { output: "ok" } });
      completed++;
    }
  });
  await Promise.all([...submitters, ...workers]);
  return TASKS / ((performance.now() - start) / 1000);
}

type Mode = "none" | "quiet" | "ok" | "dead" | "slow";
const MODES: Mode[] = ["none", "quiet", "ok", "dead", "slow"];
const URLS: Record<Mode, string> = { none: "", quiet: deadUrl, ok: okUrl, dead: deadUrl, slow: slowUrl };
const empty = (): Record<Mode, number[]> => ({ none: [], quiet: [], ok: [], dead: [], slow: [] });
const results = empty();
/** the tower's CPU per task in the round (ms): less at the mercy of other load on the machine than tasks/s */
const cpuPerTask = empty();
const queued = empty();
const attempts = empty();
for (let r = 0; r < ROUNDS; r++) {
  for (const mode of MODES) {
    let hookId: string | undefined;
    if (mode !== "none") {
      const res = await call("POST", `/domains/${domain.id}/webhooks`, {
        url: URLS[mode],
        events: [mode === "quiet" ? "task.failed" : "task.succeeded"],
      });
      hookId = res.webhook.id;
    }
    const cpu0 = procCpuMs(tower.child.pid!);
    results[mode].push(Math.round(await round()));
    cpuPerTask[mode].push(Number(((procCpuMs(tower.child.pid!) - cpu0) / TASKS).toFixed(3)));
    if (hookId) {
      const log = await call("GET", `/domains/${domain.id}/webhooks/${hookId}/deliveries?page_size=1000`);
      queued[mode].push(log.deliveries.length);
      attempts[mode].push(log.deliveries.reduce((n: number, d: { attempts?: number }) => n + (d.attempts ?? 0), 0));
      await call("DELETE", `/domains/${domain.id}/webhooks/${hookId}`);
    }
  }
}
await tower.stop();
for (const server of [ok, slow]) {
  server.closeAllConnections();
  server.close();
}
agent.destroy();
home.cleanup();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  JSON.stringify(
    {
      tasks_per_round: TASKS,
      rounds: ROUNDS,
      workers: WORKERS,
      tasks_per_s: results,
      median_tasks_per_s: Object.fromEntries(MODES.map((m) => [m, median(results[m])])),
      tower_cpu_ms_per_task: cpuPerTask,
      median_tower_cpu_ms_per_task: Object.fromEntries(MODES.map((m) => [m, median(cpuPerTask[m])])),
      ratio_to_none: Object.fromEntries(
        MODES.slice(1).map((m) => [m, Number((median(results[m]) / median(results.none)).toFixed(3))]),
      ),
      ratio_to_ok: {
        dead: Number((median(results.dead) / median(results.ok)).toFixed(3)),
        slow: Number((median(results.slow) / median(results.ok)).toFixed(3)),
      },
      retry: RETRY ? `every ${RETRY} ms` : "the product's backoff (10 s doubling)",
      deliveries_in_log_after_round: {
        ok: queued.ok,
        dead: queued.dead,
        slow: queued.slow,
        note: "the newest 1000 at most; one per task expected",
      },
      attempts_made_during_round: {
        ok: attempts.ok,
        dead: attempts.dead,
        slow: attempts.slow,
        note: "over those 1000",
      },
      load_average_1m: loadavg()[0],
    },
    null,
    2,
  ),
);
