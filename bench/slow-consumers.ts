// Event clients that stop reading (issue 35): the tower's RSS before, while and after WebSocket
// and SSE clients that never read are fed events, and whether they were cut.
//
//   npm run build && node scripts/run-ts.mjs bench/slow-consumers.ts [--clients 4] [--tasks 20000] [--settle 60]
//
// A real ep-tower (the built bin) on SQLite in a temporary home. `--clients` WebSocket and as many
// SSE clients connect over raw sockets and never read (their socket is paused after the request);
// `--tasks` broadcast tasks with 500-character titles are created over REST in a domain of
// `--agents` enrolled agents (each create: one task and a run per agent, ~2 events of ~1 KB per run
// to every client, so ~0.2 MB per create with 100 agents). RSS is VmRSS of the tower process from /proc: the baseline
// after a warm-up of the same creates, the peak while the clients are fed, and the lowest seen within --settle
// seconds after the clients were cut (or closed by this script when the tower never cut them).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    clients: { type: "string", default: "4" },
    tasks: { type: "string", default: "400" },
    agents: { type: "string", default: "100" },
    settle: { type: "string", default: "60" },
    json: { type: "boolean", default: false },
  },
});
const CLIENTS = Number(values.clients);
const TASKS = Number(values.tasks);
const AGENTS = Number(values.agents);
const SETTLE_S = Number(values.settle);
const ROOT = join(import.meta.dirname, "..");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** The connection from this local port is no longer established: the tower closed or reset it. */
function closedByPeer(localPort: number): boolean {
  const hex = `:${localPort.toString(16).toUpperCase().padStart(4, "0")}`;
  return !["/proc/net/tcp", "/proc/net/tcp6"].some((f) =>
    readFileSync(f, "utf8")
      .split("\n")
      .some((row) => {
        const cols = row.trim().split(/\s+/);
        return cols[1]?.endsWith(hex) && cols[3] === "01"; // ESTABLISHED
      }),
  );
}

const home = mkdtempSync(join(tmpdir(), "ep-slow-"));
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const tower = spawn(process.execPath, [join(ROOT, "bin", "ep-tower.js"), "--listen", `127.0.0.1:${port}`], {
  env: { ...process.env, EP_HOME: home, EP_LOG_LEVEL: "warn" },
  stdio: ["ignore", "ignore", "inherit"],
});
try {
  for (let i = 0; ; i++) {
    if ((await fetch(`${url}/healthz`).catch(() => undefined))?.ok) break;
    if (i > 150) throw new Error("ep-tower did not start");
    await sleep(100);
  }
  const token = readFileSync(join(home, "tower", "admin.token"), "utf8").trim();
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const post = async (path: string, body: unknown) =>
    (await fetch(url + path, { method: "POST", headers, body: JSON.stringify(body) })).json() as Promise<any>;
  const d = await post("/domains", { name: "slow" });
  const m = await post(`/domains/${d.domain.id}/m`, { title: "m" });
  for (let i = 0; i < AGENTS; i++)
    await post("/ep.tower.v1.AgentService/EnrollAgent", {
      domainId: d.domain.id,
      runtime: "RUNTIME_SHELL",
      name: `a${i}`,
    });
  const title = "x".repeat(500);
  const createTasks = async (n: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < n) {
          next++;
          await post(`/work/missions/${m.mission.id}/tasks`, {
            title,
            claim_policy: "broadcast",
            runtime: "shell",
            input: { command: "true" },
          });
        }
      }),
    );
  };

  const w0 = Date.now();
  await createTasks(60); // warm-up: the tower's caches, heap and event ring (8,192 events) filled
  const warmMs = Date.now() - w0;
  await sleep(3000);
  const baseline = rssMb(tower.pid!);

  // clients that send their request and never read a byte
  const raw = (request: string) =>
    new Promise<Socket>((resolve) => {
      const s = connect(port, "127.0.0.1", () => {
        s.write(request);
        s.pause();
        resolve(s);
      });
      s.on("error", () => undefined);
    });
  const auth = `Authorization: Bearer ${token}\r\n`;
  const clients = [
    ...(await Promise.all(
      Array.from({ length: CLIENTS }, () =>
        raw(
          `GET /events/ws HTTP/1.1\r\nHost: x\r\n${auth}Connection: Upgrade\r\nUpgrade: ` +
            `websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
        ),
      ),
    )),
    ...(await Promise.all(
      Array.from({ length: CLIENTS }, () => raw(`GET /events/stream HTTP/1.1\r\nHost: x\r\n${auth}\r\n`)),
    )),
  ];
  await sleep(500);

  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(tower.pid!))), 100);
  const t0 = Date.now();
  await createTasks(TASKS);
  const fed = Date.now() - t0;
  peak = Math.max(peak, rssMb(tower.pid!));

  // the tower cut them (their socket closed) or, when it never does, this script closes them
  const cutDeadline = Date.now() + 45_000;
  // a paused socket never reads the FIN or the reset: the kernel says whether it is still established
  const cutByTower = () => clients.filter((c) => closedByPeer(c.localPort!)).length;
  while (cutByTower() < clients.length && Date.now() < cutDeadline) await sleep(200);
  const cut = cutByTower();
  const afterFeed = rssMb(tower.pid!);
  for (const c of clients) c.destroy();
  let low = Infinity;
  const settleEnd = Date.now() + SETTLE_S * 1000;
  let settledAfterS = SETTLE_S;
  while (Date.now() < settleEnd) {
    await sleep(1000);
    low = Math.min(low, rssMb(tower.pid!));
    if (low <= baseline * 1.2 && settledAfterS === SETTLE_S)
      settledAfterS = Math.round((SETTLE_S * 1000 - (settleEnd - Date.now())) / 1000);
  }
  clearInterval(sampler);
  const r = (x: number) => Math.round(x);
  const result = {
    clients: { ws: CLIENTS, sse: CLIENTS },
    broadcastTasks: TASKS,
    agents: AGENTS,
    warmupMs: warmMs,
    fedMs: fed,
    cutByTower: cut,
    rssMb: { baseline: r(baseline), peak: r(peak), afterFeed: r(afterFeed), lowestAfterClose: r(low) },
    within20pctAfterS: low <= baseline * 1.2 ? settledAfterS : null,
  };
  console.log(values.json ? JSON.stringify(result) : result);
} finally {
  tower.kill("SIGTERM");
}
