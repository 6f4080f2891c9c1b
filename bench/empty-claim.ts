// Tower CPU per request on a path that commits nothing: POST /work/agents/:id/claim on an empty
// queue, 8 keep-alive loops, after 2,000 warm-up requests. What the HTTP edge, auth and the route
// cost without the store's transactions (docs/perf-history.md, "The REST fast lane").
//   npm run build && node scripts/run-ts.mjs bench/empty-claim.ts   (EP_BENCH_PROF=<dir> profiles the tower)
import { request, Agent } from "node:http";
import { spawnTower, tempHome } from "../tests/harness.js";
import { procCpuMs } from "./figures.js";
const home = tempHome("ep-empty-");
const t = await spawnTower(
  home.dir,
  { EP_LOG_LEVEL: "error" },
  process.env.EP_BENCH_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.EP_BENCH_PROF}`] : [],
);
const agent = new Agent({ keepAlive: true, maxSockets: 16 });
const post = (path: string, body: unknown) =>
  new Promise<any>((resolve, reject) => {
    const payload = Buffer.from(JSON.stringify(body));
    const { hostname, port } = new URL(t.url);
    const req = request(
      {
        hostname,
        port,
        path,
        method: "POST",
        agent,
        headers: {
          authorization: `Bearer ${t.adminToken}`,
          "content-type": "application/json",
          "content-length": payload.length,
        },
      },
      (res) => {
        const c: Buffer[] = [];
        res.on("data", (d) => c.push(d));
        res.on("end", () => resolve(JSON.parse(Buffer.concat(c).toString())));
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
const { domain } = await post("/domains", { name: "e" });
const { createClient } = await import("@connectrpc/connect");
const { createConnectTransport } = await import("@connectrpc/connect-node");
const { AgentService } = await import("../gen/ep/tower/v1/fleet_pb.js");
const { Runtime } = await import("../gen/ep/tower/v1/resources_pb.js");
const agents = createClient(
  AgentService,
  createConnectTransport({
    baseUrl: t.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${t.adminToken}`), next(req))],
  }),
);
const agentId = (await agents.enrollAgent({ domainId: domain.id, runtime: Runtime.SHELL })).agent!.id;
const N = 20000;
let sent = 0;
for (let i = 0; i < 2000; i++) await post(`/work/agents/${agentId}/claim`, { wait_ms: 0 });
const cpu0 = procCpuMs(t.child.pid!);
const t0 = performance.now();
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (sent < N) {
      sent++;
      await post(`/work/agents/${agentId}/claim`, { wait_ms: 0 });
    }
  }),
);
const ms = performance.now() - t0;
const cpu = procCpuMs(t.child.pid!) - cpu0;
console.log(JSON.stringify({ req_per_s: Math.round((N / ms) * 1000), tower_us_per_req: Math.round((cpu / N) * 1000) }));
await t.stop();
home.cleanup();
agent.destroy();
