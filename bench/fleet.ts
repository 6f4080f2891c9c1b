// Fleet simulator (issue 21): K linked nodes on one tower, submit → claim through one real epd.
//   npx esbuild bench/fleet.ts --bundle --platform=node --format=esm --packages=external \
//     --outfile=dist/bench/fleet.mjs && node --expose-gc dist/bench/fleet.mjs --nodes 1000 \
//     [--agents <M, default K>] [--domains 10] [--matching 10] [--tasks 400] [--rate 50] [--epd-agents 8]
//
// The tower runs in this process (real HTTP on loopback, SQLite file), as in bench/wakeup.ts:
// a task's latency is from the start of its CreateTask call to the commit of its claim by an agent
// of the one real epd (a child process, the shell runtime pointed at a missing binary so a claimed
// task fails at once without a fork: the delivery path alone).
//
// The K simulated nodes are registered like any node and hold their link streams (NodeService.Link,
// Connect over HTTP/1.1, as epd holds it) from one child process of this script (`--sim`), a few
// lines per node instead of K processes. M simulated agents are enrolled on them, spread over D
// domains other than the measured one; the real epd's agents are in domain 0, where `--matching`
// simulated nodes also have an agent, so the measured tasks have a fixed number of matching nodes
// whatever K is. Each simulated node opens its link naming its agents busy (as busy nodes would),
// so the tower hands them nothing. Work reaches a node only as an `assign` command (the tower
// claims the task for an idle agent of the node and sends it, lease included): an idle agent of the
// real epd gets each task, and a node is sent nothing for a task it is not assigned. The simulated
// nodes count the assign commands they receive (0 per task when the tower sends work only where
// it is taken).
//
// Tower RSS per link: this process's RSS after a GC, before and after the K links are up, over K
// (the links' client side lives in the child, so it is not counted).
import { fork, spawn } from "node:child_process";
import { setMaxListeners } from "node:events";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { jsonRpcCall } from "../daemon/mgmt/client.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, FIXTURES, registerNode, stopChild } from "../tests/epd-harness.js";
import { startTower, tempHome, waitFor } from "../tests/harness.js";
import { pct, procCpuMs } from "./figures.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const { values } = parseArgs({
  options: {
    sim: { type: "string" },
    nodes: { type: "string", default: "1000" },
    agents: { type: "string" },
    domains: { type: "string", default: "10" },
    matching: { type: "string", default: "10" },
    tasks: { type: "string", default: "400" },
    rate: { type: "string", default: "50" },
    warmup: { type: "string", default: "100" },
    "epd-agents": { type: "string", default: "8" },
  },
});

if (values.sim) await simulate(values.sim);
else await main();

/** The child: holds one link per node (its agents named busy), counts what arrives, answers the parent over IPC. */
async function simulate(file: string): Promise<void> {
  const { url, nodes: sims } = JSON.parse(readFileSync(file, "utf8")) as {
    url: string;
    nodes: { token: string; agentIds: string[] }[];
  };
  let hello = 0;
  let assigned = 0;
  let errors = 0;
  let closed = 0;
  const firstError: string[] = [];
  // one signal ends every simulated link: each adds a listener to it
  const ac = new AbortController();
  setMaxListeners(0, ac.signal);
  for (const { token, agentIds } of sims) {
    const transport = createConnectTransport({
      baseUrl: url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
    });
    const nodes = createClient(NodeService, transport);
    void (async () => {
      try {
        const agents = agentIds.map((agentId) => ({ agentId, leaseIds: [], idle: false }));
        for await (const m of nodes.link(
          { attachSecret: "s".repeat(32), version: "sim", agents },
          { signal: ac.signal },
        )) {
          if (m.command.case === "hello") hello++;
          else if (m.command.case === "assign") assigned++;
        }
        closed++;
      } catch (err) {
        if (ac.signal.aborted) return;
        errors++;
        if (firstError.length < 3) firstError.push((err as Error).message);
      }
    })();
  }
  process.on("message", (msg: string) => {
    if (msg === "stats") process.send!({ hello, assigned, errors, closed, firstError });
    else if (msg === "stop") {
      ac.abort();
      setTimeout(() => process.exit(0), 200);
    }
  });
  process.send!({ started: sims.length });
}

/**
 * The one real epd (no process is spawned per task: the shell command does not exist) with `agents` agents in the
 * domain.
 */
async function startRealEpd(t: { url: string; adminToken: string }, home: string, domainId: string, agents: number) {
  const nodeFile = join(home, "node.json");
  await registerNode(t.url, t.adminToken, nodeFile);
  mkdirSync(join(home, "epd"), { recursive: true, mode: 0o700 });
  writeFileSync(join(home, "epd", "runtimes.toml"), '[shell]\ncommand = "/nonexistent/ep-bench-no-process"\n');
  const { epd: epdMain } = await buildBinaries();
  const epd = spawn(process.execPath, [epdMain, "run", "--backend-url", t.url], {
    env: {
      ...process.env,
      EP_HOME: home,
      EP_NODE_FILE: nodeFile,
      EP_LOG_LEVEL: "warn",
      EP_POLL_MS: "60000",
      PATH: `${FIXTURES}:${process.env.PATH}`,
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  process.on("exit", () => epd.exitCode === null && epd.kill("SIGKILL")); // not left behind by a failed run
  const mgmt = join(home, "epd", "mgmt.sock");
  const call = <T>(method: string, params: Record<string, unknown> = {}) =>
    jsonRpcCall<T>(mgmt, method, params, { timeoutMs: 10_000 });
  await waitFor(
    async () => (await call<{ link: string }>("daemon.status").catch(() => undefined))?.link === "connected",
    15_000,
  );
  for (let i = 0; i < agents; i++) await call("agent.enroll", { domainId, runtime: "shell", name: `bench-${i}` });
  return epd;
}

/** Submits `count` tasks at `rate` per second; resolves with each task's submit time once all are claimed. */
async function offerTasks(
  count: number,
  label: string,
  submit: (title: string) => Promise<{ task?: { id: string } }>,
  rate: number,
  claimed: Map<string, number>,
): Promise<Map<string, number>> {
  const startedAt = new Map<string, number>();
  const start = performance.now();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t0 = performance.now();
    pending.push(submit(`${label} ${i}`).then((r) => startedAt.set(r.task!.id, t0)));
  }
  await Promise.all(pending);
  await waitFor(() => [...startedAt.keys()].every((id) => claimed.has(id)), 300_000, 20);
  return startedAt;
}

async function main(): Promise<void> {
  const K = Number(values.nodes);
  const M = Number(values.agents ?? values.nodes);
  const D = Number(values.domains);
  const MATCHING = Math.min(Number(values.matching), K);
  const N = Number(values.tasks);
  const RATE = Number(values.rate);
  const WARMUP = Number(values.warmup);
  const EPD_AGENTS = Number(values["epd-agents"]);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error("run with node --expose-gc (tower RSS per link is measured after a GC)");
  const rss = () => {
    gc();
    gc();
    return process.memoryUsage().rss;
  };

  const home = tempHome("ep-bench-fleet-");
  const t = await startTower({ home: home.dir, env: { EP_LEASE_MS: "60000" } });
  const created = new Map<string, number>();
  const claimed = new Map<string, number>();
  t.tower.deps.hub.subscribe((events) => {
    const now = performance.now();
    for (const e of events) {
      if (!e.taskId) continue;
      if (e.name === "task.created") created.set(e.taskId, now);
      else if (e.name === "task.claimed" && !claimed.has(e.taskId)) claimed.set(e.taskId, now);
    }
  });

  const work = t.client(WorkService);
  const nodesApi = t.client(NodeService);
  const agentsApi = t.client(AgentService);
  const domains: string[] = [];
  for (let d = 0; d <= D; d++) domains.push((await work.createDomain({ name: `fleet-${d}` })).domain!.id);
  const missionId = (await work.createMission({ domainId: domains[0], title: "fleet bench" })).mission!.id;

  // the one real epd, its agents in domain 0
  const epd = await startRealEpd(t, home.dir, domains[0], EPD_AGENTS);

  // K simulated nodes with M agents over D domains
  const setupStart = performance.now();
  const sims: { id: string; token: string; agentIds: string[] }[] = [];
  for (let i = 0; i < K; i++) {
    const r = await nodesApi.registerNode({ hostname: `sim-${i}` });
    sims.push({ id: r.node!.id, token: r.token, agentIds: [] });
  }
  for (let i = 0; i < M; i++) {
    const r = await agentsApi.enrollAgent({
      nodeId: sims[i % K].id,
      domainId: domains[1 + (i % D)],
      runtime: Runtime.SHELL,
      name: `sim-agent-${i}`,
    });
    sims[i % K].agentIds.push(r.agent!.id);
  }
  for (let i = 0; i < MATCHING; i++) {
    const r = await agentsApi.enrollAgent({
      nodeId: sims[i].id,
      domainId: domains[0],
      runtime: Runtime.SHELL,
      name: `sim-match-${i}`,
    });
    sims[i].agentIds.push(r.agent!.id);
  }
  const rssBefore = rss();
  const simFile = join(home.dir, "sim.json");
  writeFileSync(
    simFile,
    JSON.stringify({ url: t.url, nodes: sims.map((s) => ({ token: s.token, agentIds: s.agentIds })) }),
  );
  const child = fork(process.argv[1], ["--sim", simFile], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  let stats: { hello: number; assigned: number; errors: number; closed: number; firstError: string[] } | undefined;
  child.on("message", (m: typeof stats) => {
    if (m && "hello" in m) stats = m;
  });
  const askStats = async () => {
    stats = undefined;
    child.send("stats");
    await waitFor(() => stats !== undefined, 30_000, 10);
    return stats!;
  };
  await waitFor(async () => (await askStats()).hello + stats!.errors >= K, 600_000, 200);
  const linkedIn = (performance.now() - setupStart) / 1000;
  await new Promise((r) => setTimeout(r, 2000));
  const rssAfter = rss();

  const submit = (title: string) =>
    work.createTask({ missionId, title, runtime: Runtime.SHELL, input: { command: "true" } });
  const offer = (count: number, label: string) => offerTasks(count, label, submit, RATE, claimed);
  await offer(WARMUP, "warm");
  const assignedBefore = (await askStats()).assigned;
  const load0 = loadavg()[0];
  const selfCpu0 = procCpuMs("self");
  const t0 = performance.now();
  const startedAt = await offer(N, "task");
  const elapsed = (performance.now() - t0) / 1000;
  const selfCpu = procCpuMs("self") - selfCpu0;
  const after = await askStats();
  const fromSubmit = [...startedAt].map(([id, s]) => claimed.get(id)! - s);
  console.log(
    JSON.stringify({
      nodes: K,
      sim_agents: M,
      domains: D,
      matching_sim_nodes: MATCHING,
      tasks: N,
      offered_rate: RATE,
      submit_to_claim_ms: {
        p50: pct(fromSubmit, 50),
        p90: pct(fromSubmit, 90),
        p99: pct(fromSubmit, 99),
        max: pct(fromSubmit, 100),
      },
      tower_and_submitter_cpu_ms_per_task: +(selfCpu / N).toFixed(3),
      tower_rss_kb_per_link: +((rssAfter - rssBefore) / 1024 / K).toFixed(1),
      sim_assign_per_task: +((after.assigned - assignedBefore) / N).toFixed(2),
      link_errors: after.errors,
      links_closed: after.closed,
      first_errors: after.firstError,
      setup_seconds: +linkedIn.toFixed(1),
      seconds: +elapsed.toFixed(2),
      load_average_1m: { before: +load0.toFixed(2), after: +loadavg()[0].toFixed(2) },
      cores: cpus().length,
    }),
  );
  child.send("stop");
  await stopChild(epd, "SIGTERM");
  await t.close();
  home.cleanup();
  process.exit(0);
}
