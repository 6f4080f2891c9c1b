// Submit → claim latency through a real epd with idle enrolled agents (issue 3).
//   node scripts/run-ts.mjs bench/wakeup.ts [--tasks 2000] [--rate 200] [--agents 24] [--poll-ms 60000]
//     [--runs shell|none] [--client lean|connect-node]
// EP_BENCH_PROF=<dir> writes a CPU profile of epd there.
//
// The tower runs in this process (real HTTP on loopback, SQLite file); the submitter is a child
// process of its own (this same file, EP_BENCH_ROLE=submitter), so the tower's event loop carries
// only the tower's work, as in production. Its client is `--client lean` (default: the unary
// transport epd uses, binary Connect on node:http, ~0.3 ms of its CPU per call) or
// `--client connect-node` (JSON over connect-node, what a generated client uses: ~1.7 ms per call
// here). On a 2-core machine the submitter shares the cores with the tower and epd; like
// bench/claim.ts's bare node:http client, the cheap one keeps the load generator from deciding
// the latencies. A task's
// latency is from the moment the submitter starts its CreateTask call to the commit of the claim
// by an epd agent (the hub publishes `task.claimed` right after that commit), both read as
// performance.timeOrigin + now() (wall milliseconds, sub-millisecond). epd is the freshly bundled
// binary in a child process with `shell` agents running `true`; tasks are submitted at a fixed
// rate (open loop) after a warm-up. The poll is 60 s, so every claim comes from a link wake-up.
//
// The target is about waking an idle agent, not about queueing behind busy ones, so the bench
// enrols enough agents for one to be idle whenever a task arrives and reports how many tasks
// arrived while every agent was busy (`created_with_no_idle_agent`, counted from the tower's own
// claimed/succeeded events); the figures mean what the target means only when that is ~0.
import { fork, spawn, type ChildProcess } from "node:child_process";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { fileURLToPath } from "node:url";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { jsonRpcCall } from "../daemon/mgmt/client.js";
import { createUnaryTransport } from "../daemon/link/unary-transport.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, FIXTURES, registerNode, stopChild } from "../tests/epd-harness.js";
import { startTower, tempHome, waitFor } from "../tests/harness.js";
import { epdCpuMs, pct, procCpuMs } from "./figures.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const { values } = parseArgs({
  options: {
    tasks: { type: "string", default: "2000" },
    rate: { type: "string", default: "200" },
    agents: { type: "string", default: "24" },
    "poll-ms": { type: "string", default: "60000" },
    warmup: { type: "string", default: "200" },
    // shell: each task runs `bash -c true`; none: the shell runtime's binary is missing, so a
    // claimed task fails at once without a process (the wake-up path alone, no fork per task)
    runs: { type: "string", default: "shell" },
    client: { type: "string", default: "lean" },
    // print the slowest tasks with what the tower committed for each (to stderr)
    "trace-slow": { type: "string", default: "0" },
  },
});
const N = Number(values.tasks);
const RATE = Number(values.rate);
const AGENTS = Number(values.agents);
const POLL = values["poll-ms"]!;
const WARMUP = Number(values.warmup);

/** Wall-clock milliseconds comparable across processes (sub-millisecond). */
const wallNow = () => performance.timeOrigin + performance.now();

if (process.env.EP_BENCH_ROLE === "submitter") {
  await runSubmitter();
  process.exit(0);
}

const home = tempHome("ep-bench-wakeup-");
const t = await startTower({ home: home.dir, env: { EP_LEASE_MS: "60000" } });

// what the tower commits, timed in this process
const created = new Map<string, number>();
const claimed = new Map<string, number>();
const holding = new Map<string, string>(); // agent -> task it holds
let noIdleAtCreate = 0;
const trail = new Map<string, string[]>(); // task -> "+ms name agent" as committed (--trace-slow)
const TRACE = Number(values["trace-slow"]);
let requeued = 0;
let measuring = false;
t.tower.deps.hub.subscribe((events) => {
  const now = wallNow();
  for (const e of events) {
    if (TRACE && e.taskId && measuring) {
      const first = created.get(e.taskId) ?? now;
      const list = trail.get(e.taskId) ?? [];
      list.push(`+${(now - first).toFixed(1)}ms ${e.name}${e.agentId ? ` ${e.agentId.slice(-6)}` : ""}`);
      trail.set(e.taskId, list);
    }
    if (!e.taskId) continue;
    if (e.name === "task.created") {
      created.set(e.taskId, now);
      if (measuring && holding.size >= AGENTS) noIdleAtCreate++;
    } else if (e.name === "task.claimed" && !claimed.has(e.taskId)) {
      claimed.set(e.taskId, now);
      holding.set(e.agentId, e.taskId);
    } else if ((e.name === "task.succeeded" || e.name === "task.failed") && holding.get(e.agentId) === e.taskId) {
      holding.delete(e.agentId);
    } else if (e.name === "task.requeued") {
      // given back (a push that met a busy slot): whoever held it holds it no more; it is claimed again
      if (measuring) requeued++;
      for (const [agentId, taskId] of holding) if (taskId === e.taskId) holding.delete(agentId);
      claimed.delete(e.taskId);
    }
  }
});

const rpcCounts = new Map<string, number>();
t.tower.app.server.on("request", (req: { url?: string }) => {
  if (measuring) rpcCounts.set(req.url!, (rpcCounts.get(req.url!) ?? 0) + 1);
});

const nodeFile = join(home.dir, "node.json");
await registerNode(t.url, t.adminToken, nodeFile);
const work = t.client(WorkService);
const domainId = (await work.createDomain({ name: "bench" })).domain!.id;
const missionId = (await work.createMission({ domainId, title: "wakeup" })).mission!.id;

if (values.runs === "none") {
  mkdirSync(join(home.dir, "epd"), { recursive: true, mode: 0o700 });
  writeFileSync(join(home.dir, "epd", "runtimes.toml"), '[shell]\ncommand = "/nonexistent/ep-bench-no-process"\n');
} else if (values.runs !== "shell") throw new Error("--runs must be shell or none");
const { epd: epdMain } = await buildBinaries();
const prof = process.env.EP_BENCH_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.EP_BENCH_PROF}`] : [];
const epd = spawn(process.execPath, [...prof, epdMain, "run", "--backend-url", t.url], {
  env: {
    ...process.env,
    EP_HOME: home.dir,
    EP_NODE_FILE: nodeFile,
    EP_LOG_LEVEL: "warn",
    EP_POLL_MS: POLL,
    PATH: `${FIXTURES}:${process.env.PATH}`,
  },
  stdio: ["ignore", "ignore", "inherit"],
});
// a bench that fails (a condition not met) must not leave its epd behind, reconnecting forever
process.on("exit", () => epd.exitCode === null && epd.kill("SIGKILL"));
const mgmt = join(home.dir, "epd", "mgmt.sock");
const call = <T>(method: string, params: Record<string, unknown> = {}) =>
  jsonRpcCall<T>(mgmt, method, params, { timeoutMs: 10_000 });
await waitFor(
  async () => (await call<{ link: string }>("daemon.status").catch(() => undefined))?.link === "connected",
  15_000,
);
for (let i = 0; i < AGENTS; i++) await call("agent.enroll", { domainId, runtime: "shell", name: `bench-${i}` });

// the submitter: a child process that submits at RATE when told to and answers each task's submit time
const submitter: ChildProcess = fork(fileURLToPath(import.meta.url), process.argv.slice(2), {
  env: {
    ...process.env,
    EP_BENCH_ROLE: "submitter",
    EP_BENCH_URL: t.url,
    EP_BENCH_TOKEN: t.adminToken,
    EP_BENCH_MISSION: missionId,
  },
  stdio: ["ignore", "inherit", "inherit", "ipc"],
});

/** Open-loop submission at RATE by the submitter; returns each task's submit start time (wall ms). */
async function offer(count: number, label: string): Promise<Map<string, number>> {
  const done = new Promise<[string, number][]>((resolve) =>
    submitter.once("message", (m) => resolve(m as [string, number][])),
  );
  submitter.send({ count, label });
  const startedAt = new Map(await done);
  await waitFor(() => [...startedAt.keys()].every((id) => claimed.has(id)), 120_000, 20);
  await waitFor(() => holding.size === 0, 60_000, 20);
  return startedAt;
}

async function runSubmitter(): Promise<void> {
  const token = process.env.EP_BENCH_TOKEN!;
  const baseUrl = process.env.EP_BENCH_URL!;
  const connectNode = createConnectTransport({
    baseUrl,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
  });
  if (values.client !== "lean" && values.client !== "connect-node")
    throw new Error("--client must be lean or connect-node");
  const work = createClient(
    WorkService,
    values.client === "lean"
      ? createUnaryTransport({ baseUrl, headers: { authorization: `Bearer ${token}` }, streams: connectNode })
      : connectNode,
  );
  const missionId = process.env.EP_BENCH_MISSION!;
  await new Promise<void>((resolveAll) => {
    process.on("message", async (m: { count: number; label: string }) => {
      const startedAt: [string, number][] = [];
      const start = performance.now();
      const pending: Promise<unknown>[] = [];
      for (let i = 0; i < m.count; i++) {
        const due = start + (i * 1000) / RATE;
        // timers only, no busy wait; each task's latency starts at its actual submit time
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const t0 = wallNow();
        pending.push(
          work
            .createTask({ missionId, title: `${m.label} ${i}`, runtime: Runtime.SHELL, input: { command: "true" } })
            .then((r) => startedAt.push([r.task!.id, t0])),
        );
      }
      await Promise.all(pending);
      process.send!(startedAt);
    });
    process.on("disconnect", resolveAll);
  });
}

// warm-up at the same rate: JIT, connections, the SQLite page cache
await offer(WARMUP, "warm");
const load0 = loadavg()[0];
const epdCpu0 = epdCpuMs(epd.pid!);
const selfCpu0 = procCpuMs("self");
const subCpu0 = procCpuMs(submitter.pid!);
// stalls of the tower's event loop (it shares this process with the submitter): a slow commit or
// checkpoint shows here before it shows in the latencies
const loopDelay = monitorEventLoopDelay({ resolution: 1 });
loopDelay.enable();
measuring = true;
const t0 = performance.now();
const startedAt = await offer(N, "task");
const elapsed = (performance.now() - t0) / 1000;
measuring = false;
loopDelay.disable();
const epdCpu = epdCpuMs(epd.pid!) - epdCpu0;
const selfCpu = procCpuMs("self") - selfCpu0;
const subCpu = procCpuMs(submitter.pid!) - subCpu0;

const fromSubmit = [...startedAt].map(([id, s]) => claimed.get(id)! - s);
if (TRACE) {
  const slowest = [...startedAt]
    .map(([id, s]) => [id, claimed.get(id)! - s] as const)
    .sort((a, b) => b[1] - a[1])
    .slice(0, TRACE);
  for (const [id, ms] of slowest) console.error(`slow ${id} ${ms.toFixed(1)} ms: ${(trail.get(id) ?? []).join(", ")}`);
}
const fromCommit = [...startedAt.keys()].map((id) => claimed.get(id)! - created.get(id)!);
console.log(
  JSON.stringify({
    tasks: N,
    offered_rate: RATE,
    agents: AGENTS,
    runs: values.runs,
    client: values.client,
    poll_ms: Number(POLL),
    submit_to_claim_ms: {
      p50: pct(fromSubmit, 50),
      p90: pct(fromSubmit, 90),
      p99: pct(fromSubmit, 99),
      max: pct(fromSubmit, 100),
    },
    commit_to_claim_ms: { p50: pct(fromCommit, 50), p90: pct(fromCommit, 90), p99: pct(fromCommit, 99) },
    created_with_no_idle_agent: noIdleAtCreate,
    requeued,
    tower_event_loop_delay_ms: {
      p99: +(loopDelay.percentile(99) / 1e6).toFixed(2),
      max: +(loopDelay.max / 1e6).toFixed(2),
    },
    requests_per_task: Object.fromEntries(
      [...rpcCounts].map(([u, c]) => [u.replace(/^\/ep\.tower\.v1\./, ""), +(c / N).toFixed(2)]),
    ),
    cpu_ms_per_task: {
      epd: +(epdCpu / N).toFixed(3),
      tower: +(selfCpu / N).toFixed(3),
      submitter: +(subCpu / N).toFixed(3),
    },
    seconds: +elapsed.toFixed(2),
    load_average_1m: { before: +load0.toFixed(2), after: +loadavg()[0].toFixed(2) },
    cores: cpus().length,
  }),
);
submitter.disconnect();
await stopChild(epd, "SIGTERM");
await t.close();
home.cleanup();
process.exit(0);
