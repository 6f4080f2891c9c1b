// What one call costs on each side, by path: the same read (GetTask) through every client
// transport we ship or integrators use, a bare node:http POST of the Connect JSON, and the REST
// read; then an empty ClaimTask by a node token (epd's transport, the node credential's path).
// The tower is the freshly bundled binary in a child process; CPU per call is read from /proc for
// the tower and from process.cpuUsage() here, after a warm-up, in alternating rounds.
//   node scripts/run-ts.mjs bench/rpc-call.ts [--calls 3000] [--rounds 3]
import { createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import http from "node:http";
import { parseArgs } from "node:util";
import { createUnaryTransport } from "../daemon/link/unary-transport.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { spawnTowerProcess, stopChild } from "../tests/epd-harness.js";
import { tempHome } from "../tests/harness.js";
import { procCpuMs } from "./figures.js";

const { values } = parseArgs({
  options: { calls: { type: "string", default: "3000" }, rounds: { type: "string", default: "3" } },
});
const N = Number(values.calls);
const ROUNDS = Number(values.rounds);

const home = tempHome("ep-bench-rpc-");
const tw = await spawnTowerProcess(home.dir);
const bearer =
  (token: string): Interceptor =>
  (next) =>
  (req) => (req.header.set("authorization", `Bearer ${token}`), next(req));
const connectNode = (httpVersion: "1.1" | "2", useBinaryFormat: boolean, grpc = false): Transport => {
  const interceptors = [bearer(tw.adminToken)];
  if (grpc) return createGrpcTransport({ baseUrl: tw.url, interceptors });
  return httpVersion === "2"
    ? createConnectTransport({ baseUrl: tw.url, httpVersion, useBinaryFormat, interceptors })
    : createConnectTransport({ baseUrl: tw.url, httpVersion, useBinaryFormat, interceptors });
};
const lean = (token: string) =>
  createUnaryTransport({
    baseUrl: tw.url,
    headers: { authorization: `Bearer ${token}` },
    streams: createConnectTransport({ baseUrl: tw.url, httpVersion: "1.1" }),
  });

const work = createClient(WorkService, lean(tw.adminToken));
const domainId = (await work.createDomain({ name: "bench" })).domain!.id;
const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
const taskId = (await work.createTask({ missionId, title: "t", input: { command: "true" } })).task!.id;
const node = await createClient(NodeService, lean(tw.adminToken)).registerNode({
  hostname: "bench",
  domainIds: [domainId],
});
const agents: string[] = [];
for (let i = 0; i < 24; i++)
  agents.push(
    (
      await createClient(AgentService, lean(node.token)).enrollAgent({
        domainId,
        runtime: Runtime.SHELL,
        name: `a${i}`,
      })
    ).agent!.id,
  );
const nodeWork = createClient(WorkService, lean(node.token));

const agent = new http.Agent({ keepAlive: true });
const httpCall = (method: string, path: string, headers: Record<string, string>, body?: string) =>
  new Promise<void>((resolve, reject) => {
    const r = http.request(
      tw.url + path,
      { method, agent, headers: { authorization: `Bearer ${tw.adminToken}`, ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => (JSON.parse(Buffer.concat(chunks).toString()), resolve()));
      },
    );
    r.on("error", reject);
    r.end(body);
  });

const paths: [string, () => Promise<unknown>][] = [];
for (const [name, t] of [
  ["connect-node HTTP/1.1 JSON", connectNode("1.1", false)],
  ["connect-node HTTP/1.1 binary", connectNode("1.1", true)],
  ["connect-node HTTP/2 binary", connectNode("2", true)],
  ["gRPC (connect-node, HTTP/2)", connectNode("2", true, true)],
  ["epd's unary transport (binary)", lean(tw.adminToken)],
] as const) {
  const c = createClient(WorkService, t);
  paths.push([name, () => c.getTask({ taskId })]);
}
paths.push([
  "bare node:http, Connect JSON",
  () =>
    httpCall(
      "POST",
      "/ep.tower.v1.WorkService/GetTask",
      { "content-type": "application/json" },
      JSON.stringify({ taskId }),
    ),
]);
paths.push(["bare node:http, REST GET", () => httpCall("GET", `/v1/tasks/${taskId}`, {})]);
let k = 0;
paths.push([
  "node token, empty ClaimTask (epd's transport)",
  () => nodeWork.claimTask({ agentId: agents[k++ % agents.length] }),
]);

const results = new Map<string, { client: number[]; tower: number[]; wall: number[] }>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, call] of paths) {
    for (let i = 0; i < 300; i++) await call();
    const c0 = process.cpuUsage();
    const s0 = procCpuMs(tw.child.pid!);
    const w0 = performance.now();
    for (let i = 0; i < N; i++) await call();
    const c = process.cpuUsage(c0);
    const r = results.get(name) ?? { client: [], tower: [], wall: [] };
    r.client.push(Math.round((c.user + c.system) / N));
    r.tower.push(Math.round(((procCpuMs(tw.child.pid!) - s0) * 1000) / N));
    r.wall.push(Math.round(((performance.now() - w0) * 1000) / N));
    results.set(name, r);
  }
}
const range = (xs: number[]) => `${Math.min(...xs)}–${Math.max(...xs)}`;
console.log(
  JSON.stringify(
    {
      calls_per_round: N,
      rounds: ROUNDS,
      us_per_call: Object.fromEntries(
        [...results].map(([n, r]) => [n, { client: range(r.client), tower: range(r.tower), wall: range(r.wall) }]),
      ),
    },
    null,
    1,
  ),
);
await stopChild(tw.child, "SIGTERM");
home.cleanup();
process.exit(0);
