// Event clients that stop reading (issue 35): a real ep-tower process, one WebSocket and one SSE
// client that send their request and never read, and events until both are cut (more than the
// kernel's socket buffers hold, ~40 MB or more each). The tower cuts both (their connection is no longer established)
// and its RSS returns to within 20% of the baseline taken before they connected. RSS is a
// process-wide figure, read after a full collection the test asks for through the tower's
// inspector: the question is whether the memory the feed held can be given back, not when V8
// decides to collect (an idle tower may not for minutes); the wait stays bounded, not timed.
// Figures: bench/slow-consumers.ts, docs/PERFORMANCE.md.
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { assertBuilt } from "./cli-helpers.js";
import { connectInspector, INSPECT_ARGS, type Inspector } from "../test-support/inspector.js";
import { spawnTower, tempHome, waitFor, type TowerChild } from "./harness.js";

let tower: TowerChild & { adminToken: string };
let inspector: Inspector | undefined;
const home = tempHome("ep-slow-");

beforeAll(async () => {
  assertBuilt();
  tower = await spawnTower(home.dir, {}, INSPECT_ARGS);
  inspector = await connectInspector(tower.stderr());
});
afterAll(async () => {
  inspector?.close();
  await tower?.stop();
  home.cleanup();
});

const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${tower.child.pid}/status`, "utf8"))![1]) / 1024;

/**
 * Whether the connection from this local port is still established (a paused socket never reads the tower's FIN or
 * reset).
 */
function established(localPort: number): boolean {
  const hex = `:${localPort.toString(16).toUpperCase().padStart(4, "0")}`;
  return ["/proc/net/tcp", "/proc/net/tcp6"].some((f) =>
    readFileSync(f, "utf8")
      .split("\n")
      .some((row) => {
        const cols = row.trim().split(/\s+/);
        return cols[1]?.endsWith(hex) && cols[3] === "01";
      }),
  );
}

/** A client that sends its request and never reads a byte. */
function silentClient(request: string): Promise<Socket> {
  return new Promise((resolve) => {
    const s = connect(tower.port, "127.0.0.1", () => {
      s.write(request);
      s.pause();
      resolve(s);
    });
    s.on("error", () => undefined);
  });
}

it("a WebSocket and an SSE client that never read are cut, and the tower's memory comes back", {
  timeout: 300_000,
}, async () => {
  const headers = { authorization: `Bearer ${tower.adminToken}`, "content-type": "application/json" };
  const post = async (path: string, body: unknown) =>
    (await fetch(tower.url + path, { method: "POST", headers, body: JSON.stringify(body) })).json() as Promise<any>;
  const d = await post("/domains", { name: "slow" });
  const m = await post(`/domains/${d.domain.id}/m`, { title: "m" });
  for (let i = 0; i < 100; i++)
    await post("/ep.tower.v1.AgentService/EnrollAgent", {
      domainId: d.domain.id,
      runtime: "RUNTIME_SHELL",
      name: `a${i}`,
    });
  // each create: a task and a run per agent, ~200 events of ~1 KB to every stream client
  const createTasks = async (n: number) => {
    for (let i = 0; i < n; i++)
      await post(`/work/missions/${m.mission.id}/tasks`, {
        title: "x".repeat(500),
        claim_policy: "broadcast",
        runtime: "shell",
        input: { command: "true" },
      });
  };
  await createTasks(60); // the warm-up fills the tower's event ring and heap as the feed will
  const baseline = rssMb();

  const auth = `Authorization: Bearer ${tower.adminToken}\r\n`;
  const ws = await silentClient(
    `GET /events/ws HTTP/1.1\r\nHost: x\r\n${auth}Connection: Upgrade\r\nUpgrade: ` +
      `websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
  );
  const sse = await silentClient(`GET /events/stream HTTP/1.1\r\nHost: x\r\n${auth}\r\n`);
  // events until both are cut: how much the kernel holds for a paused socket before the tower's
  // own buffer fills depends on its autotuning (a fixed 200 creates were once not enough), so the
  // feed goes on, bounded, until neither connection is established
  const cut = () => !established(ws.localPort!) && !established(sse.localPort!);
  let created = 0;
  while (!cut() && created < 1_000) {
    await createTasks(20);
    created += 20;
  }
  await waitFor(cut, 60_000).catch(() => undefined);
  expect(
    {
      ws: established(ws.localPort!) ? "still connected" : "cut",
      sse: established(sse.localPort!) ? "still connected" : "cut",
    },
    `after ${created} broadcast creates (~${Math.round((created * 200) / 1000)} MB of events to each client)`,
  ).toEqual({ ws: "cut", sse: "cut" });
  let lowest = Infinity;
  // a full collection before each reading gives back what the feed and the cut clients' buffers
  // held, if nothing still refers to it
  await waitFor(
    async () => {
      await inspector!.collectGarbage();
      return (lowest = Math.min(lowest, rssMb())) <= baseline * 1.2;
    },
    120_000,
    500,
  ).catch(() => undefined);
  ws.destroy();
  sse.destroy();
  expect(lowest, `RSS ${Math.round(lowest)} MB against a baseline of ${Math.round(baseline)} MB`).toBeLessThanOrEqual(
    baseline * 1.2,
  );
});
