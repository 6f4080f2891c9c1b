// Issue 38 (metrics): the real Prometheus (Debian's package) scrapes a real tower, on its public
// port with a viewer token, and a real epd on its EP_METRICS_LISTEN address; promtool finds both
// scrapes clean; after known work (tasks run by epd's shell agent, tasks left queued in a domain
// no agent serves) PromQL through Prometheus's HTTP API gives the queue depth and the claim
// latency the tower's own records say. The doors: /metrics on the public port refuses anonymous
// callers and nodes' and agents' tokens; the tower's metrics address serves /metrics alone.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { Role, Runtime, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import {
  adminClient,
  buildBinaries,
  registerNode,
  spawnEpd,
  spawnTowerProcess,
  stopChild,
  type EpdProcess,
  type TowerProcess,
} from "./epd-harness.js";
import { freePort, ROOT, tempHome, waitFor } from "./harness.js";
import { optionalTool } from "./optional-tools.js";
import { writeNodeIdentity } from "../common/node-identity.js";
import { CLAIM_LATENCY_BUCKETS } from "../tower/metrics/work-meter.js";

const prometheusTool = optionalTool("prometheus", { pkg: "prometheus", suite: "metrics-prometheus" });
const promtoolTool = optionalTool("promtool", { pkg: "prometheus", suite: "metrics-prometheus" });

/** what a tower on SQLite (this test's) does not export: the relay between PostgreSQL replicas */
const ONLY_ON_POSTGRES = ["ep_event_replication_lag"];
const SERVED_TASKS = 4;
const QUEUED_TASKS = 3;

interface Setup {
  tower: TowerProcess;
  epd: EpdProcess;
  towerMetricsUrl: string;
  epdMetricsUrl: string;
  viewerToken: string;
  agentToken: string;
  nodeToken: string;
  served: { name: string; taskIds: string[] };
  unserved: { name: string };
  prometheus: { child: ChildProcess; url: string };
}

let s: Setup;
const home = tempHome("ep-metrics-");

async function startPrometheus(
  dir: string,
  towerPort: number,
  epdPort: number,
  tokenFile: string,
): Promise<Setup["prometheus"]> {
  const port = await freePort();
  // scrape_interval short so the test waits on values, not on the clock; promtool checks the file first
  const config = [
    "global:",
    "  scrape_interval: 250ms",
    "  scrape_timeout: 250ms",
    "scrape_configs:",
    "  - job_name: tower",
    "    authorization:",
    "      type: Bearer",
    `      credentials_file: ${tokenFile}`,
    "    static_configs:",
    `      - targets: ["127.0.0.1:${towerPort}"]`,
    "  - job_name: epd",
    "    static_configs:",
    `      - targets: ["127.0.0.1:${epdPort}"]`,
    "",
  ].join("\n");
  const file = join(dir, "prometheus.yml");
  writeFileSync(file, config);
  const checked = spawnSync(promtoolTool.require(), ["check", "config", file], { encoding: "utf8" });
  expect(checked.status, checked.stdout + checked.stderr).toBe(0);
  const child = spawn(
    prometheusTool.require(),
    [`--config.file=${file}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let log = "";
  child.stderr!.on("data", (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}: ${log}`);
    return (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok === true;
  }, 30_000);
  return { child, url };
}

/** One PromQL instant query through Prometheus's HTTP API: each series' labels and value. */
async function promql(query: string): Promise<{ metric: Record<string, string>; value: number }[]> {
  const res = await fetch(`${s.prometheus.url}/api/v1/query?query=${encodeURIComponent(query)}`);
  const body = (await res.json()) as {
    status: string;
    error?: string;
    data: { result: { metric: Record<string, string>; value: [number, string] }[] };
  };
  if (body.status !== "success") throw new Error(`${query}: ${body.error}`);
  return body.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
}

/** The single value of `query`, or undefined while Prometheus has none (not scraped yet). */
async function one(query: string): Promise<number | undefined> {
  const r = await promql(query);
  return r.length === 1 ? r[0].value : undefined;
}

function promtoolCheck(text: string): { status: number | null; output: string } {
  const r = spawnSync(promtoolTool.require(), ["check", "metrics"], { input: text, encoding: "utf8" });
  return { status: r.status, output: (r.stdout + r.stderr).trim() };
}

describe.skipIf(prometheusTool.skip || promtoolTool.skip)("metrics scraped by the real Prometheus", () => {
  beforeAll(async () => {
    await buildBinaries();
    const [towerMetricsPort, epdMetricsPort] = [await freePort(), await freePort()];
    const tower = await spawnTowerProcess(home.dir, { EP_METRICS_LISTEN: `127.0.0.1:${towerMetricsPort}` });
    const nodeFile = join(home.dir, "node.json");
    const node = await registerNode(tower.url, tower.adminToken, nodeFile);
    const epd = await spawnEpd({
      home: home.dir,
      nodeFile,
      backendUrl: tower.url,
      env: { EP_METRICS_LISTEN: `127.0.0.1:${epdMetricsPort}` },
    });
    const work = adminClient(tower, WorkService);
    const auth = adminClient(tower, AuthService);
    const served = (await work.createDomain({ name: "served" })).domain!;
    const unserved = (await work.createDomain({ name: "unserved" })).domain!;
    const viewerToken = (await auth.createToken({ name: "prometheus", role: Role.VIEWER })).secret;
    const agentToken = (await auth.createToken({ name: "an-agent", role: Role.AGENT, domainId: served.id })).secret;
    const promDir = join(home.dir, "prometheus");
    mkdirSync(promDir, { recursive: true });
    writeFileSync(join(promDir, "token"), viewerToken, { mode: 0o600 });
    const prometheus = await startPrometheus(
      promDir,
      Number(new URL(tower.url).port),
      epdMetricsPort,
      join(promDir, "token"),
    );

    // the known work: a shell agent in "served" runs SERVED_TASKS tasks; QUEUED_TASKS wait in "unserved", where no
    // agent is
    await epd.call("agent.enroll", { domainId: served.id, runtime: "shell" });
    const servedMission = (await work.createMission({ domainId: served.id, title: "m" })).mission!.id;
    const unservedMission = (await work.createMission({ domainId: unserved.id, title: "m" })).mission!.id;
    const taskIds: string[] = [];
    for (let i = 0; i < SERVED_TASKS; i++)
      taskIds.push(
        (
          await work.createTask({
            missionId: servedMission,
            title: `run ${i}`,
            runtime: Runtime.SHELL,
            input: { command: `echo run-${i}` },
          })
        ).task!.id,
      );
    for (let i = 0; i < QUEUED_TASKS; i++)
      await work.createTask({
        missionId: unservedMission,
        title: `wait ${i}`,
        runtime: Runtime.SHELL,
        input: { command: "true" },
      });
    await waitFor(async () => {
      for (const id of taskIds)
        if ((await work.getTask({ taskId: id })).task!.status !== TaskStatus.SUCCEEDED) return false;
      return true;
    }, 30_000);
    s = {
      tower,
      epd,
      towerMetricsUrl: `http://127.0.0.1:${towerMetricsPort}/metrics`,
      epdMetricsUrl: `http://127.0.0.1:${epdMetricsPort}/metrics`,
      viewerToken,
      agentToken,
      nodeToken: node.token,
      served: { name: served.name, taskIds },
      unserved: { name: unserved.name },
      prometheus,
    };
  }, 120_000);

  afterAll(async () => {
    if (s?.prometheus.child.exitCode === null) await stopChild(s.prometheus.child, "SIGTERM");
    await s?.epd.stop();
    await s?.tower.stop();
    home.cleanup();
  });

  it("scrapes both targets: the tower on its public port with a viewer token, epd on its metrics address", async () => {
    await waitFor(async () => (await one('up{job="tower"}')) === 1 && (await one('up{job="epd"}')) === 1, 20_000);
  });

  it("promtool check metrics finds nothing to say about either scrape", async () => {
    const tower = await fetch(`${s.tower.url}/metrics`, { headers: { authorization: `Bearer ${s.viewerToken}` } });
    expect(tower.status).toBe(200);
    expect(tower.headers.get("content-type")).toContain("text/plain; version=0.0.4");
    const towerText = await tower.text();
    const epdText = await (await fetch(s.epdMetricsUrl)).text();
    for (const [who, text, a] of [
      ["tower", towerText, "ep_task_claim_latency_seconds_bucket"],
      ["epd", epdText, "ep_node_run_duration_seconds_bucket"],
    ] as const) {
      expect(text, who).toContain(a);
      expect(text, who).toContain("process_cpu_seconds_total");
      expect(promtoolCheck(text), who).toEqual({ status: 0, output: "" });
    }
    // no task id, agent id or raw path in any label
    for (const text of [towerText, epdText]) expect(text).not.toMatch(/(tsk|agt|nod|dom|msn)_[A-Za-z0-9]{6,}/);
  });

  it(
    "PromQL gives the queue depth by domain name: the unserved " +
      "domain's tasks wait, the served one's queue is empty",
    async () => {
      await waitFor(
        async () =>
          (await one(`ep_queue_depth{domain="${s.unserved.name}"}`)) === QUEUED_TASKS &&
          (await one(`ep_queue_depth{domain="${s.served.name}"}`)) === 0,
        20_000,
      );
      expect(await one(`ep_tasks{domain="${s.unserved.name}",state="queued"}`)).toBe(QUEUED_TASKS);
      // nothing is held once the runs are over: no claimed or running series at all
      expect(await promql('ep_tasks{state=~"claimed|running"}')).toEqual([]);
    },
  );

  it(
    "PromQL gives the claim latency the tower's records say: " +
      "one observation per task run, its sum the submit→claim times",
    async () => {
      const work = adminClient(s.tower, WorkService);
      const events = adminClient(s.tower, EventService);
      // submit→claim per task from the API: the task's creation, its task.claimed event
      const claimedAt = new Map<string, number>();
      for (const e of (await events.listEvents({ types: ["task"], limit: 1000 } as never)).events) {
        if (e.name === "task.claimed" && s.served.taskIds.includes(e.taskId) && !claimedAt.has(e.taskId))
          claimedAt.set(e.taskId, timestampMs(e.createdAt!));
      }
      expect(claimedAt.size).toBe(SERVED_TASKS);
      const latencies: number[] = [];
      for (const id of s.served.taskIds)
        latencies.push(
          (claimedAt.get(id)! - timestampMs((await work.getTask({ taskId: id })).task!.createdAt!)) / 1000,
        );
      const expectedSum = latencies.reduce((a, b) => a + b, 0);

      await waitFor(async () => (await one("ep_task_claim_latency_seconds_count")) === SERVED_TASKS, 20_000);
      const sum = (await one("ep_task_claim_latency_seconds_sum"))!;
      // the tower observes each claim right after its commit; the event carries the commit's millisecond
      expect(Math.abs(sum - expectedSum)).toBeLessThan(0.05 * SERVED_TASKS);
      // every claim falls under the histogram's top bucket, and the quantile lies within the observed range
      expect(await one('ep_task_claim_latency_seconds_bucket{le="+Inf"}')).toBe(SERVED_TASKS);
      // the median lies in the bucket that holds the slowest claim, or below it
      const slowest = Math.max(...latencies);
      const p50 = (await one("histogram_quantile(0.5, ep_task_claim_latency_seconds_bucket)"))!;
      expect(p50).toBeGreaterThan(0);
      expect(p50).toBeLessThanOrEqual(CLAIM_LATENCY_BUCKETS.find((b) => b >= slowest) ?? Infinity);
    },
  );

  it(
    "PromQL gives the fleet and the runs: one node online and " +
      "linked, one idle agent, epd's runs by runtime and outcome",
    async () => {
      await waitFor(
        async () => (await one(`ep_node_runs_total{job="epd",runtime="shell",outcome="succeeded"}`)) === SERVED_TASKS,
        20_000,
      );
      expect(await one(`ep_node_run_duration_seconds_count{runtime="shell",outcome="succeeded"}`)).toBe(SERVED_TASKS);
      expect(await one('ep_nodes{status="online"}')).toBe(1);
      expect(await one("ep_node_links")).toBe(1);
      await waitFor(async () => (await one('ep_agents{state="idle"}')) === 1, 20_000);
      expect(await one("ep_node_link_connected")).toBe(1);
      expect(await one('ep_node_agents{source="local"}')).toBe(1);
      expect(await one('ep_task_outcomes_total{outcome="succeeded"}')).toBe(SERVED_TASKS);
      expect(await one('ep_task_run_duration_seconds_count{outcome="succeeded"}')).toBe(SERVED_TASKS);
      expect(await one("ep_approvals_waiting")).toBe(0);
      expect((await one("ep_event_log_head"))!).toBeGreaterThan(0);
    },
  );

  it("counts HTTP and RPC requests by route template and code, never by raw path", async () => {
    await waitFor(
      async () =>
        (await one(
          'sum(ep_http_requests_total{job="tower",route="/ep.tower.v1.WorkService/CreateTask",code="200"})',
        )) ===
        SERVED_TASKS + QUEUED_TASKS,
      20_000,
    );
    const routes = (await promql('ep_http_requests_total{job="tower"}')).map((r) => r.metric.route);
    expect(routes).toContain("/ep.tower.v1.WorkService/GetTask");
    expect(routes.every((r) => r === "unmatched" || r.startsWith("/"))).toBe(true);
    expect(routes.some((r) => /tsk_/.test(r))).toBe(false);
    // an unknown path is "unmatched", not its own series
    await fetch(`${s.tower.url}/no/such/path/tsk_12345678`, { headers: { authorization: `Bearer ${s.viewerToken}` } });
    await waitFor(
      async () => (await one('sum(ep_http_requests_total{job="tower",route="unmatched",code="404"})')) !== undefined,
      20_000,
    );
  });

  it(
    "docs/metrics.md lists every metric both scrapes carry, and every " +
      "query of docs/grafana-dashboard.json is valid PromQL over them",
    async () => {
      const doc = readFileSync(join(ROOT, "docs", "metrics.md"), "utf8");
      const towerText = await (await fetch(s.towerMetricsUrl)).text();
      const epdText = await (await fetch(s.epdMetricsUrl)).text();
      const names = (text: string) => [...new Set([...text.matchAll(/^# TYPE (ep_\w+) /gm)].map((m) => m[1]))];
      const exported = [...names(towerText), ...names(epdText)];
      expect(exported.length).toBeGreaterThan(15);
      expect([...exported, ...ONLY_ON_POSTGRES].filter((n) => !doc.includes(`\`${n}\``))).toEqual([]);
      const dashboard = JSON.parse(readFileSync(join(ROOT, "docs", "grafana-dashboard.json"), "utf8")) as {
        panels: { title: string; targets: { expr: string }[] }[];
      };
      const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr));
      expect(exprs.length).toBeGreaterThan(10);
      for (const expr of exprs) {
        const query = expr.replaceAll("$tower", "tower").replaceAll("$epd", "epd").replaceAll("$__rate_interval", "1m");
        await promql(query); // throws with Prometheus's parse error
        for (const m of query.matchAll(/\b(ep_[a-z_]+?)(?:_bucket|_sum|_count)?\b/g))
          expect([...exported, ...ONLY_ON_POSTGRES], `${expr} names ${m[1]}`).toContain(m[1]);
      }
    },
  );

  it("the public port's /metrics refuses an anonymous caller (401), a node's and an agent's token (403)", async () => {
    const get = (token?: string) =>
      fetch(`${s.tower.url}/metrics`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
    const anonymous = await get();
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toContain("Bearer");
    expect(await anonymous.text()).not.toContain("ep_");
    for (const token of [s.nodeToken, s.agentToken]) {
      const res = await get(token);
      expect(res.status).toBe(403);
      expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
        code: "forbidden",
        message: expect.stringContaining("GET /metrics"),
      });
    }
    expect((await get("not-a-token")).status).toBe(401);
    expect((await get(s.viewerToken)).status).toBe(200);
    const post = await fetch(`${s.tower.url}/metrics`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.viewerToken}` },
    });
    expect(post.status).toBe(405);
  });

  it("the tower's EP_METRICS_LISTEN address serves /metrics without a token, and nothing else", async () => {
    const res = await fetch(s.towerMetricsUrl);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("ep_queue_depth");
    const other = await fetch(s.towerMetricsUrl.replace("/metrics", "/domains"));
    expect(other.status).toBe(404);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe("route_not_found");
    const post = await fetch(s.towerMetricsUrl, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
    // epd's address alike
    expect((await fetch(s.epdMetricsUrl.replace("/metrics", "/"))).status).toBe(404);
  });
});

describe("EP_METRICS_LISTEN that is not host:port", () => {
  it("stops the tower at start with exit 2, naming the variable", async () => {
    const { tower } = await buildBinaries();
    const h = tempHome("ep-metrics-bad-");
    try {
      const r = spawnSync(process.execPath, [tower, "--listen", "127.0.0.1:0"], {
        env: { ...process.env, EP_HOME: h.dir, EP_METRICS_LISTEN: "9464" },
        encoding: "utf8",
        timeout: 20_000,
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain('EP_METRICS_LISTEN must be host:port with a port up to 65535 (got "9464")');
    } finally {
      h.cleanup();
    }
  }, 30_000);

  it("stops epd at start, naming the variable", async () => {
    const { epd } = await buildBinaries();
    const h = tempHome("ep-metrics-bad-epd-");
    try {
      const nodeFile = join(h.dir, "node.json");
      await writeNodeIdentity(
        { node_id: "nod_metrics", hostname: "h", token: "t", tower_url: "http://127.0.0.1:9" },
        nodeFile,
      );
      const r = spawnSync(process.execPath, [epd, "run"], {
        env: { ...process.env, EP_HOME: h.dir, EP_NODE_FILE: nodeFile, EP_METRICS_LISTEN: "localhost:99999" },
        encoding: "utf8",
        timeout: 20_000,
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain('EP_METRICS_LISTEN must be host:port with a port up to 65535 (got "localhost:99999")');
    } finally {
      h.cleanup();
    }
  }, 30_000);
});
