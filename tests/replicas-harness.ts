// Helpers for the multi-replica tests (tests/replicas-*.test.ts): a fresh PostgreSQL schema
// per test, towers sharing it (in-process or the built ep-tower), a TCP load balancer that
// fails over, and an SSE follower that resumes with Last-Event-ID.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { request, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import pg from "pg";
import type { Clock } from "../common/clock.js";
import { withDefaultUser } from "../tower/store/postgres/postgres-store.js";
import { buildBinaries } from "./epd-harness.js";
import { sseParser } from "./events-helpers.js";
import {
  freePort,
  ROOT,
  spawnTowerChild,
  startTower,
  tempHome,
  waitFor,
  type TestTower,
  type TowerChild,
} from "./harness.js";

export const PG_URL = process.env.EP_TEST_PG_URL ?? "postgres://127.0.0.1:5432/test";

async function probe(): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: withDefaultUser(PG_URL), connectionTimeoutMillis: 3000 });
  c.on("error", () => {});
  try {
    await c.connect();
    await c.query("SELECT 1");
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message || err.name : String(err);
  } finally {
    await c.end().catch(() => {});
  }
}

/**
 * Why PostgreSQL tests cannot run here (undefined when they can). Under CI an absent server is a failure, not a skip.
 */
export const pgProblem = await probe();
export const skipPg = Boolean(pgProblem) && !process.env.CI;

export function requirePg(suite: string): void {
  if (skipPg)
    console.log(`${suite}: skipping (PostgreSQL at ${PG_URL} unreachable: ${pgProblem}); set EP_TEST_PG_URL to run it`);
}

export interface Schema {
  name: string;
  /** EP_DATABASE_URL pointing into the schema (search_path through the connection options) */
  url: string;
  drop(): Promise<void>;
}

export async function freshSchema(): Promise<Schema> {
  if (pgProblem) throw new Error(`PostgreSQL at ${PG_URL} is unreachable under CI: ${pgProblem}`);
  const name = `ep_rep_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: withDefaultUser(PG_URL) });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${name}`);
  await admin.end();
  const u = new URL(PG_URL);
  u.searchParams.set("options", `-c search_path=${name}`);
  return {
    name,
    url: u.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: withDefaultUser(PG_URL) });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
      await c.end();
    },
  };
}

/** An in-process tower on the schema. Replicas share `home` so they find the one admin.token. */
export function startReplica(
  schema: Schema,
  home: string,
  env: Record<string, string> = {},
  clock?: Clock,
): Promise<TestTower> {
  return startTower({ home, clock, env: { EP_DATABASE_URL: schema.url, EP_PUBLIC_URL: "http://ep.test", ...env } });
}

export type ReplicaProcess = TowerChild;

/** The built ep-tower (tests/epd-harness.ts bundle) on the schema, as a child process. */
export async function spawnReplica(
  schema: Schema,
  home: string,
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
): Promise<ReplicaProcess> {
  const { tower: entry } = await buildBinaries();
  return spawnTowerChild({
    entry,
    home,
    nodeArgs,
    ready: "/readyz",
    timeoutMs: 20_000,
    env: { EP_SECRET_KEY: "test", EP_DATABASE_URL: schema.url, EP_PUBLIC_URL: "http://ep.test", ...env },
  });
}

export interface Balancer {
  port: number;
  url: string;
  /** connections currently spliced, per target port */
  open(): Map<number, number>;
  close(): Promise<void>;
}

/**
 * A TCP load balancer with fail-over: each new connection goes to the first target that
 * accepts it. When a target dies its connections drop (the clients reconnect) and new
 * ones go to the next target, like nginx's `proxy_next_upstream` on a refused connection.
 */
export async function failoverBalancer(targets: number[]): Promise<Balancer> {
  const sockets = new Set<Socket>();
  const counts = new Map<number, number>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.pause();
    client.on("error", () => client.destroy());
    client.on("close", () => sockets.delete(client));
    const attempt = (i: number) => {
      if (i >= targets.length || client.destroyed) return void client.destroy();
      const port = targets[i];
      const upstream = connect(port, "127.0.0.1");
      let connected = false;
      upstream.once("connect", () => {
        connected = true;
        counts.set(port, (counts.get(port) ?? 0) + 1);
        sockets.add(upstream);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      upstream.on("error", () => {
        if (!connected) return attempt(i + 1);
        client.destroy();
      });
      upstream.on("close", () => {
        sockets.delete(upstream);
        if (connected) {
          counts.set(port, (counts.get(port) ?? 1) - 1);
          client.destroy();
        }
      });
      client.on("close", () => upstream.destroy());
    };
    attempt(0);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    open: () => new Map(counts),
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

export interface SseFollower {
  /** every event id received, in arrival order, across reconnects */
  ids: number[];
  rows: { id: number; name: string; task_id: string; status: string }[];
  /** base URLs each connection went to, in order */
  connections: string[];
  /** how many connections the tower answered with its stream (200) */
  opened: number;
  /** time of arrival (performance.now()) of each event id */
  arrivals: Map<number, number>;
  /** drops the current connection (a network fault); the follower resumes on the next base */
  drop(): void;
  close(): void;
}

/**
 * Follows /events/stream like a browser's EventSource: on a dropped connection it
 * reconnects (to the next base URL in `bases`, round robin) with Last-Event-ID. An https base is
 * trusted with `ca`.
 */
export function followSse(
  bases: string[] | (() => string),
  token: string,
  opts: { afterId?: number; retryMs?: number; ca?: Buffer } = {},
): SseFollower {
  const out: SseFollower = {
    ids: [],
    rows: [],
    connections: [],
    opened: 0,
    arrivals: new Map(),
    drop: () => {},
    close: () => {},
  };
  let closed = false;
  let current: ReturnType<typeof request> | undefined;
  let n = 0;
  let last = opts.afterId;
  const pick = typeof bases === "function" ? bases : () => bases[n++ % bases.length];
  const open = () => {
    if (closed) return;
    const base = pick();
    out.connections.push(base);
    const u = new URL("/events/stream", base);
    const headers: Record<string, string> = { accept: "text/event-stream", authorization: `Bearer ${token}` };
    if (last !== undefined) headers["last-event-id"] = String(last);
    const req = u.protocol === "https:" ? httpsRequest(u, { headers, ca: opts.ca }) : request(u, { headers });
    current = req;
    let over = false;
    const again = () => {
      if (over) return; // error and close both report the one ending
      over = true;
      if (current === req && !closed) setTimeout(open, opts.retryMs ?? 100);
    };
    req.on("error", again);
    req.on("response", (res: IncomingMessage) => {
      if (res.statusCode !== 200) {
        res.resume();
        res.on("end", again);
        return;
      }
      out.opened++;
      res.setEncoding("utf8");
      const parse = sseParser((m) => {
        if (!m.id || m.event) return;
        const id = Number(m.id);
        const row = JSON.parse(m.data) as SseFollower["rows"][number];
        out.ids.push(id);
        out.rows.push(row);
        out.arrivals.set(id, performance.now());
        last = id;
      });
      res.on("data", parse);
      res.on("error", again);
      res.on("close", again);
    });
    req.end();
  };
  open();
  out.drop = () => current?.destroy();
  out.close = () => {
    closed = true;
    current?.destroy();
  };
  return out;
}

/** Checks that `ids` is exactly `expected` (same ids, same order): no gap, no duplicate. */
export function gapsAndDuplicates(
  ids: readonly number[],
  expected: readonly number[],
): { missing: number[]; duplicates: number[]; outOfOrder: number } {
  const seen = new Set<number>();
  const duplicates: number[] = [];
  let outOfOrder = 0;
  ids.forEach((id, i) => {
    if (seen.has(id)) duplicates.push(id);
    seen.add(id);
    if (i && id <= ids[i - 1]) outOfOrder++;
  });
  return { missing: expected.filter((id) => !seen.has(id)), duplicates, outOfOrder };
}

/** The nginx binary (docs/deploy.md's proxy), if installed; outside CI its tests skip without it. */
export const NGINX =
  ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"].find(
    (p) => spawnSync(p, ["-v"]).status === 0,
  ) ?? (spawnSync("nginx", ["-v"]).status === 0 ? "nginx" : undefined);
export const skipNginx = !NGINX && !process.env.CI;

/** The ```nginx block of docs/deploy.md, as the doc has it. */
export function deployBlock(): string {
  const doc = readFileSync(join(ROOT, "docs", "deploy.md"), "utf8");
  const block = /```nginx\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error("docs/deploy.md has no ```nginx block");
  return block;
}

/**
 * The block with only what points at the doc's machines replaced: each upstream's server lines by
 * the test's replicas, `listen 80` and `listen 443 ssl http2` by loopback ports, the certificate
 * and key by the test's. Every other line is the doc's.
 */
function deployConfig(
  upstreams: number[],
  ports: { http: number; tls: number },
  cert: { crt: string; key: string },
): string {
  let out = deployBlock();
  const pools = [...out.matchAll(/^upstream \w+ \{\n([\s\S]*?)^\}/gm)];
  if (pools.length === 0) throw new Error("the nginx block has no upstream");
  for (const pool of pools) {
    const servers = pool[1].match(/^\s*server\s+[\d.]+:\d+[^;]*;$/gm);
    if (!servers || servers.length < 2) throw new Error(`the nginx block's upstream has no server lines: ${pool[0]}`);
    let body = pool[1].replace(
      servers[0],
      upstreams.map((p) => servers[0].replace(/[\d.]+:\d+/, `127.0.0.1:${p}`)).join("\n"),
    );
    for (const line of servers.slice(1)) body = body.replace(line + "\n", "");
    out = out.replace(pool[1], body);
  }
  const swap = (re: RegExp, to: string) => {
    if (!re.test(out)) throw new Error(`the nginx block has no line ${re}`);
    out = out.replace(re, to);
  };
  swap(/^(\s*)listen 80;$/m, `$1listen 127.0.0.1:${ports.http};`);
  swap(/^(\s*)listen 443 ssl http2;$/m, `$1listen 127.0.0.1:${ports.tls} ssl http2;`);
  swap(/^(\s*ssl_certificate)(\s+)\S+;$/m, `$1$2${cert.crt};`);
  swap(/^(\s*ssl_certificate_key)(\s+)\S+;$/m, `$1$2${cert.key};`);
  return out;
}

export interface DeployNginx {
  /** the plain-HTTP listener (`listen 80` in the doc) */
  url: string;
  /** the TLS listener (`listen 443 ssl http2`): HTTP/2 or HTTP/1.1 by ALPN */
  tlsUrl: string;
  /** the PEM of the test CA that signed nginx's certificate (for 127.0.0.1 and localhost), and its file */
  ca: Buffer;
  caFile: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** nginx with docs/deploy.md's configuration (a non-daemon child with a temp prefix) in front of `upstreams`. */
export async function startDeployNginx(
  upstreams: number[],
  cleanup: (fn: () => unknown) => void,
): Promise<DeployNginx> {
  if (!NGINX) throw new Error("nginx is not installed (apt-get install nginx-light)");
  const dir = tempHome("ep-nginx-");
  cleanup(() => dir.cleanup());
  const ports = { http: await freePort(), tls: await freePort() };
  for (const d of ["logs", "body", "proxy"]) mkdirSync(join(dir.dir, d));
  // a self-signed certificate for the loopback names, which the clients are given as their CA
  const cert = { crt: join(dir.dir, "ep.crt"), key: join(dir.dir, "ep.key") };
  const made = spawnSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-keyout",
      cert.key,
      "-out",
      cert.crt,
    ],
    { encoding: "utf8" },
  );
  if (made.status !== 0) throw new Error(`openssl could not make the test certificate: ${made.stderr}`);
  const conf = join(dir.dir, "nginx.conf");
  writeFileSync(
    conf,
    `worker_processes 1;
pid ${dir.dir}/nginx.pid;
error_log ${dir.dir}/logs/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path ${dir.dir}/body;
  proxy_temp_path ${dir.dir}/proxy;
${deployConfig(upstreams, ports, cert)}
}
`,
  );
  const test = spawnSync(NGINX, ["-t", "-p", dir.dir, "-c", conf], { encoding: "utf8" });
  if (test.status !== 0) throw new Error(`nginx -t failed: ${test.stderr}`);
  const child = spawn(NGINX, ["-p", dir.dir, "-c", conf, "-g", "daemon off;"], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const url = `http://127.0.0.1:${ports.http}`;
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`nginx exited ${child.exitCode}: ${stderr}`);
    return (await fetch(url + "/healthz").catch(() => undefined))?.ok === true;
  }, 10_000);
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
    });
  cleanup(stop);
  return { url, tlsUrl: `https://127.0.0.1:${ports.tls}`, ca: readFileSync(cert.crt), caFile: cert.crt, child, stop };
}

export { join };
