// Event fan-out: the tower's /events/stream (persisted events, the real HTTP stack) against
// a raw Node SSE broadcaster (in-memory events, one prebuilt frame written to every socket)
// in the same run, with the same 1,000 subscribers in separate client processes (2 by
// default, 500 sockets each: one process parsing 1,000 sockets was at times the slowest stage
// and put its own queueing into both servers' latencies). Latency is the emit time carried in
// each event's payload against the arrival time in the client process, both on the shared
// clock performance.timeOrigin + performance.now().
//
// Run (Node 20 has no TypeScript loader, so bundle first):
//   npx esbuild bench/fanout.ts --bundle --platform=node --format=esm --packages=external \
//     --outfile=dist/bench/fanout.mjs && node dist/bench/fanout.mjs [--subscribers 1000] [--procs 2]
//   [--rounds 3] (raw and EP alternate, figures are the medians; single runs swing by 2x on a
//   shared machine) [--only raw|ep] (one server, e.g. under --cpu-prof) [--detail] (per-event
//   spread, and the server-side time to issue every write)
//
// Targets (issue 4): >= 70% of the raw broadcaster's deliveries/s with emit->receive p99 <= 50 ms;
// resume of 1,000 missed events <= 15 ms to the last byte.
import { fork, type ChildProcess } from "node:child_process";
import { createServer, type ServerResponse } from "node:http";
import { connect } from "node:net";
import { performance } from "node:perf_hooks";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { silentLogger } from "../common/log.js";
import { createTower, type Tower } from "../tower/app.js";
import { bootstrap } from "../tower/bootstrap.js";
import { loadConfig } from "../tower/config.js";
import { commit } from "../tower/domain/event-hub.js";
import { openStore } from "../tower/store/open-store.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const SUBSCRIBERS = arg("--subscribers", 1000);
/** client processes sharing the subscribers (each parses its own sockets) */
const PROCS = arg("--procs", 2);
/** raw and EP alternate this many times; the figures are the medians */
const ROUNDS = arg("--rounds", 3);
const ONLY = (() => {
  const i = process.argv.indexOf("--only");
  return i > 0 ? process.argv[i + 1] : "";
})();
const THROUGHPUT_EVENTS = arg("--events", 2000);
const BATCH = 20;
const LATENCY_EVENTS = arg("--latency-events", 200);
const LATENCY_GAP_MS = arg("--gap-ms", 50);
const RESUME_EVENTS = 1000;
const DETAIL = process.argv.includes("--detail");
const now = () => performance.timeOrigin + performance.now();

// ---------------------------------------------------------------- client process -----------

interface ClientCmd {
  cmd: "connect" | "expect" | "close";
  port?: number;
  path?: string;
  token?: string;
  count?: number;
  /** send the latency samples back (the latency phase) */
  samples?: boolean;
}

interface ClientDone {
  ok: true;
  /** shared clock (performance.timeOrigin + performance.now()) when this process had every event */
  lastAt: number;
  /** CPU this client process used during the phase (µs) */
  cpuUs: number;
  deliveries: number;
  lat?: number[];
  /** with --detail: emit time -> [first, last] arrival in this process (ms after the emit) */
  perEvent?: [string, [number, number]][];
}

function clientProcess(): void {
  const sockets: import("node:net").Socket[] = [];
  let received = 0;
  let expected = 0;
  let keep = false;
  let lat: number[] = [];
  const perEvent = new Map<string, [number, number]>();
  let onDone: (() => void) | undefined;
  const T_RE = /"t":(\d+(?:\.\d+)?)/g;
  process.on("message", async (m: ClientCmd) => {
    if (m.cmd === "connect") {
      let open = 0;
      await new Promise<void>((resolve) => {
        for (let i = 0; i < SUBSCRIBERS; i++) {
          const s = connect(m.port!, "127.0.0.1");
          s.setNoDelay(true);
          let headersDone = false;
          s.on("connect", () =>
            s.write(
              `GET ${m.path} HTTP/1.1\r\nHost: bench\r\nAccept: ` +
                `text/event-stream\r\n${m.token ? `Authorization: Bearer ${m.token}\r\n` : ""}\r\n`,
            ),
          );
          s.on("data", (d: Buffer) => {
            const text = d.toString("latin1");
            if (!headersDone) {
              headersDone = true;
              if (++open === SUBSCRIBERS) resolve();
            }
            const at = now();
            T_RE.lastIndex = 0;
            let mm: RegExpExecArray | null;
            while ((mm = T_RE.exec(text))) {
              received++;
              if (keep) {
                lat.push(at - Number(mm[1]));
                if (DETAIL) {
                  const e = perEvent.get(mm[1]);
                  if (e) (e[0] = Math.min(e[0], at - Number(mm[1]))), (e[1] = Math.max(e[1], at - Number(mm[1])));
                  else perEvent.set(mm[1], [at - Number(mm[1]), at - Number(mm[1])]);
                }
              }
            }
            if (expected && received >= expected && onDone) {
              const done = onDone;
              onDone = undefined;
              done();
            }
          });
          s.on("error", () => undefined);
          sockets.push(s);
        }
      });
      process.send!({ ok: true });
    } else if (m.cmd === "expect") {
      received = 0;
      lat = [];
      perEvent.clear();
      keep = !!m.samples;
      expected = m.count! * SUBSCRIBERS;
      const cpu0 = process.cpuUsage();
      await new Promise<void>((r) => (onDone = r));
      const lastAt = now();
      const cpu = process.cpuUsage(cpu0);
      const done: ClientDone = {
        ok: true,
        lastAt,
        cpuUs: cpu.user + cpu.system,
        deliveries: received,
        lat: keep ? lat : undefined,
        perEvent: DETAIL ? [...perEvent] : undefined,
      };
      process.send!(done);
    } else if (m.cmd === "close") {
      for (const s of sockets) s.destroy();
      process.send!({ ok: true });
      process.exit(0);
    }
  });
}

// ---------------------------------------------------------------- server side --------------

function ask<T>(child: ChildProcess, msg: ClientCmd): Promise<T> {
  return new Promise((resolve) => {
    child.once("message", (m) => resolve(m as T));
    child.send(msg);
  });
}

const askAll = <T>(children: ChildProcess[], msg: ClientCmd): Promise<T[]> =>
  Promise.all(children.map((c) => ask<T>(c, msg)));

interface Result {
  deliveriesPerSec: number;
  p50: number;
  p99: number;
  /** server-process CPU per delivery in the throughput phase (µs), emitter included */
  serverUs: number;
  /** client-process CPU per delivery in the throughput phase (µs), all client processes */
  clientUs: number;
}

/** Throughput: emit as fast as the emitter can; latency: spaced events, each timed per subscriber. */
async function run(children: ChildProcess[], emit: (n: number) => Promise<void>): Promise<Result> {
  const deliveries = THROUGHPUT_EVENTS * SUBSCRIBERS;
  const waitAll = askAll<ClientDone>(children, { cmd: "expect", count: THROUGHPUT_EVENTS });
  await new Promise((r) => setTimeout(r, 50));
  const cpu0 = process.cpuUsage();
  const t0 = now();
  for (let i = 0; i < THROUGHPUT_EVENTS; i += BATCH) {
    await emit(BATCH);
    await new Promise((r) => setImmediate(r));
  }
  const all = await waitAll;
  const cpu = process.cpuUsage(cpu0);
  const lastAt = Math.max(...all.map((a) => a.lastAt));
  const deliveriesPerSec = deliveries / ((lastAt - t0) / 1000);
  const serverUs = (cpu.user + cpu.system) / deliveries;
  const clientUs = all.reduce((s, a) => s + a.cpuUs, 0) / deliveries;
  const waitLat = askAll<ClientDone>(children, { cmd: "expect", count: LATENCY_EVENTS, samples: true });
  await new Promise((r) => setTimeout(r, 50));
  /** per event: from the emit to the first setImmediate after it, i.e. every socket write issued */
  const serverSide: number[] = [];
  for (let i = 0; i < LATENCY_EVENTS; i++) {
    const e0 = now();
    await emit(1);
    await new Promise((r) => setImmediate(r));
    serverSide.push(now() - e0);
    await new Promise((r) => setTimeout(r, LATENCY_GAP_MS));
  }
  const lat = await waitLat;
  if (DETAIL) {
    serverSide.sort((a, b) => a - b);
    console.log(
      `  server side per event (emit to every write issued): median ` +
        `${serverSide[serverSide.length >> 1].toFixed(1)} ms, p99 ` +
        `${serverSide[Math.floor(serverSide.length * 0.99)].toFixed(1)} ` +
        `ms, max ${serverSide[serverSide.length - 1].toFixed(1)} ms`,
    );
  }
  if (DETAIL) {
    const merged = new Map<string, [number, number]>();
    for (const l of lat)
      for (const [t, [a, b]] of l.perEvent!) {
        const e = merged.get(t);
        merged.set(t, e ? [Math.min(e[0], a), Math.max(e[1], b)] : [a, b]);
      }
    const worst = [...merged.values()].sort((x, y) => y[1] - x[1]);
    const lasts = worst.map((w) => w[1]).sort((x, y) => x - y);
    const worst8 = worst
      .slice(0, 8)
      .map(([a, b]) => `[${a.toFixed(1)}, ${b.toFixed(1)}]`)
      .join(" ");
    console.log(
      `  per event, last subscriber: median ${lasts[lasts.length >> 1].toFixed(1)} ` +
        `ms; worst 8 events [first, last] ms: ${worst8}`,
    );
  }
  const sorted = Float64Array.from(lat.flatMap((l) => l.lat!)).sort();
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { deliveriesPerSec, p50: at(0.5), p99: at(0.99), serverUs, clientUs };
}

async function rawBroadcaster(): Promise<{ port: number; emit: (n: number) => Promise<void>; close(): Promise<void> }> {
  const subs = new Set<ServerResponse>();
  let id = 0;
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write(": hello\n\n");
    subs.add(res);
    res.on("close", () => subs.delete(res));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    async emit(n) {
      const frames: Buffer[] = [];
      for (let i = 0; i < n; i++) {
        id++;
        const json = JSON.stringify({
          id,
          type: "matrix",
          name: "bench.tick",
          domain_id: "",
          mission_id: "",
          agent_id: "",
          task_id: "",
          session_id: "",
          status: "ok",
          payload: { t: now() },
          created_at: new Date().toISOString(),
        });
        frames.push(Buffer.from(`id: ${id}\ndata: ${json}\n\n`));
      }
      for (const res of subs) {
        res.cork();
        for (const f of frames) res.write(f);
        res.uncork();
      }
    },
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

async function epTower(home: string): Promise<{ tower: Tower; port: number; token: string; close(): Promise<void> }> {
  const env = { EP_HOME: home, EP_STREAM_RATE_LIMIT: "1000000", EP_SECRET_KEY: "bench" };
  const config = loadConfig({ listen: "127.0.0.1:0" }, env);
  const store = await openStore(`sqlite:${join(home, "tower", "ep.db")}`);
  const tower = await createTower({ config, store, log: silentLogger });
  await bootstrap(tower, config.home, config.publicUrl, env);
  await tower.app.listen({ host: "127.0.0.1", port: 0 });
  const token = readFileSync(join(config.home, "admin.token"), "utf8").trim();
  return {
    tower,
    port: (tower.app.server.address() as { port: number }).port,
    token,
    async close() {
      const c = tower.close();
      tower.app.server.closeAllConnections();
      await c;
    },
  };
}

function emitPersisted(tower: Tower): (n: number) => Promise<void> {
  return (n) =>
    commit(tower.deps, async (_tx, emit) => {
      for (let i = 0; i < n; i++) emit({ type: "matrix", name: "bench.tick", status: "ok", payload: { t: now() } });
    });
}

/** Time from sending the request to the last byte of the 1,000th missed event. */
async function resumeOnce(port: number, token: string, afterId: number, lastId: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    const marker = `id: ${lastId}\n`;
    let buf = "";
    let t0 = 0;
    s.on("connect", () => {
      t0 = now();
      s.write(
        `GET /events/stream HTTP/1.1\r\nHost: bench\r\nAuthorization: ` +
          `Bearer ${token}\r\nLast-Event-ID: ${afterId}\r\n\r\n`,
      );
    });
    s.on("data", (d: Buffer) => {
      buf += d.toString("latin1");
      const at = buf.indexOf(marker);
      if (at >= 0 && buf.indexOf("\n\n", at) >= 0) {
        const ms = now() - t0;
        s.destroy();
        resolve(ms);
      } else if (buf.length > 1_000_000) buf = buf.slice(-10_000);
    });
    s.on("error", reject);
  });
}

async function main(): Promise<void> {
  const home = mkdtempSync(join(tmpdir(), "ep-bench-fanout-"));
  const self = process.argv[1];
  /** PROCS client processes, the subscribers split evenly between them */
  const startClients = () =>
    Array.from({ length: PROCS }, (_, i) => {
      const share = Math.floor(SUBSCRIBERS / PROCS) + (i < SUBSCRIBERS % PROCS ? 1 : 0);
      return fork(self, ["--child", "--subscribers", String(share), ...(DETAIL ? ["--detail"] : [])], {
        stdio: "inherit",
      });
    });
  const load = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  console.log(
    `fan-out bench: ${SUBSCRIBERS} subscribers in ${PROCS} client processes, ` +
      `${THROUGHPUT_EVENTS} events for throughput (batches of ${BATCH}), ` +
      `${LATENCY_EVENTS} spaced ${LATENCY_GAP_MS} ms for latency; load ${load()}`,
  );

  // both servers stay up for every round; the 1,000 subscribers connect afresh for each phase
  const raw = ONLY === "ep" ? undefined : await rawBroadcaster();
  const ep = ONLY === "raw" ? undefined : await epTower(home);
  const rawResults: Result[] = [];
  const epResults: Result[] = [];
  const phase = async (
    port: number,
    path: string,
    token: string | undefined,
    emit: (n: number) => Promise<void>,
  ): Promise<Result> => {
    const children = startClients();
    await askAll(children, { cmd: "connect", port, path, token });
    const r = await run(children, emit);
    await askAll(children, { cmd: "close" });
    return r;
  };
  for (let round = 0; round < ROUNDS; round++) {
    // alternate the order (raw, EP, EP, raw, ...) so a drift in the machine's load hits both alike
    const order = round % 2 ? ["ep", "raw"] : ["raw", "ep"];
    for (const which of order) {
      // reference: raw Node SSE broadcaster; the tower: persisted events through commit(), the real /events/stream
      if (which === "raw" && raw) rawResults.push(await phase(raw.port, "/", undefined, raw.emit));
      if (which === "ep" && ep)
        epResults.push(await phase(ep.port, "/events/stream", ep.token, emitPersisted(ep.tower)));
    }
  }
  await raw?.close();

  // resume: 1,000 events committed while the client was away
  const resumes: number[] = [];
  if (ep) {
    for (let i = 0; i < 7; i++) {
      const before = ep.tower.deps.hub.lastId;
      await emitPersisted(ep.tower)(RESUME_EVENTS);
      resumes.push(await resumeOnce(ep.port, ep.token, before, before + RESUME_EVENTS));
    }
    await ep.close();
  }
  rmSync(home, { recursive: true, force: true });

  const f = (n: number) => n.toFixed(2);
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const median = (rs: Result[]): Result => ({
    deliveriesPerSec: med(rs.map((r) => r.deliveriesPerSec)),
    p50: med(rs.map((r) => r.p50)),
    p99: med(rs.map((r) => r.p99)),
    serverUs: med(rs.map((r) => r.serverUs)),
    clientUs: med(rs.map((r) => r.clientUs)),
  });
  const row = (name: string, r: Result) =>
    console.log(
      `| ${name} | ${Math.round(r.deliveriesPerSec).toLocaleString("en")} | ` +
        `${f(r.p50)} ms | ${f(r.p99)} ms | ${f(r.serverUs)} µs | ${f(r.clientUs)} µs |`,
    );
  console.log("");
  console.log("| Server | deliveries/s | emit→receive p50 | p99 | server CPU/delivery | client CPU/delivery |");
  console.log("|---|---|---|---|---|---|");
  for (let i = 0; i < ROUNDS; i++) {
    if (rawResults[i]) row(`round ${i + 1}: raw Node SSE broadcaster (in-memory)`, rawResults[i]);
    if (epResults[i]) row(`round ${i + 1}: EP /events/stream (persisted)`, epResults[i]);
  }
  const rawResult = rawResults.length ? median(rawResults) : undefined;
  const epResult = epResults.length ? median(epResults) : undefined;
  if (ROUNDS > 1) {
    if (rawResult) row(`**median of ${ROUNDS}: raw**`, rawResult);
    if (epResult) row(`**median of ${ROUNDS}: EP**`, epResult);
  }
  console.log("");
  if (rawResult && epResult) {
    const ratio = epResult.deliveriesPerSec / rawResult.deliveriesPerSec;
    const ratios = epResults.map(
      (e, i) => `${((100 * e.deliveriesPerSec) / rawResults[i].deliveriesPerSec).toFixed(1)}%`,
    );
    console.log(
      `ratio EP / raw (medians): ${(ratio * 100).toFixed(1)}% (target >= 70%; per round ` +
        `${ratios.join(", ")}), EP p99 ${f(epResult.p99)} ms (target <= 50 ms), raw p99 ${f(rawResult.p99)} ms`,
    );
    console.log(`server CPU per delivery EP / raw: ${((100 * epResult.serverUs) / rawResult.serverUs).toFixed(0)}%`);
  }
  if (resumes.length) {
    const sortedResume = [...resumes].sort((a, b) => a - b);
    const resumeMedian = sortedResume[Math.floor(sortedResume.length / 2)];
    console.log(
      `resume of ${RESUME_EVENTS} missed events to the last byte: median ` +
        `${f(resumeMedian)} ms, runs ${resumes.map(f).join(", ")} (target <= 15 ms)`,
    );
    if (rawResult && epResult) {
      const ok =
        epResult.deliveriesPerSec / rawResult.deliveriesPerSec >= 0.7 && epResult.p99 <= 50 && resumeMedian <= 15;
      console.log(ok ? "targets met" : "targets NOT met");
    }
  }
  console.log(`load average at the end: ${load()}`);
}

if (process.argv.includes("--child")) clientProcess();
else
  main().catch((err: Error) => {
    console.error(err.stack ?? err.message);
    process.exit(1);
  });
