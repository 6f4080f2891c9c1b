// Starts real towers for tests: in-process (real HTTP on a loopback port, injectable
// clock) or as the built ep-tower binary in a child process.
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { afterEach } from "vitest";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Clock } from "../common/clock.js";
import { silentLogger } from "../common/log.js";
import { createTower, type Tower } from "../tower/app.js";
import { bootstrap } from "../tower/bootstrap.js";
import { loadConfig } from "../tower/config.js";
import { openStore } from "../tower/store/open-store.js";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

export function tempHome(prefix = "ep-test-"): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface TestTower {
  tower: Tower;
  url: string;
  home: string;
  adminToken: string;
  /** fetch against the tower with a token (admin by default); JSON in and out */
  api(
    method: string,
    path: string,
    body?: unknown,
    token?: string | null,
  ): Promise<{ status: number; body: any; headers: Headers }>;
  transport(token?: string): Transport;
  client<S extends DescService>(service: S, token?: string): Client<S>;
  close(): Promise<void>;
}

/** `port`: listen there (a free one by default), e.g. so EP_PUBLIC_URL can name it before the start. */
export async function startTower(
  opts: { clock?: Clock; env?: Record<string, string>; home?: string; port?: number } = {},
): Promise<TestTower> {
  const home = opts.home ?? tempHome().dir;
  const env: Record<string, string> = { EP_HOME: home, ...opts.env };
  const config = loadConfig({ listen: `127.0.0.1:${opts.port ?? 0}` }, env);
  const store = await openStore(env.EP_DATABASE_URL ?? `sqlite:${join(home, "tower", "ep.db")}`);
  // the tower reads only this env (AI settings, EP_SECRET_KEY, replica settings), never process.env
  const tower = await createTower({ config, store, clock: opts.clock, log: silentLogger, env });
  await bootstrap(tower, config.home, config.publicUrl, { ...env, EP_SECRET_KEY: "test" });
  await tower.app.listen({ host: "127.0.0.1", port: opts.port ?? 0 });
  const addr = tower.app.server.address() as { port: number };
  const url = `http://127.0.0.1:${addr.port}`;
  const adminToken = readFileSync(join(config.home, "admin.token"), "utf8").trim();
  return harness(tower, url, home, adminToken);
}

function harness(tower: Tower, url: string, home: string, adminToken: string): TestTower {
  const transport = (token = adminToken): Transport => {
    const auth: Interceptor = (next) => (req) => {
      if (token) req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    };
    return createConnectTransport({ baseUrl: url, httpVersion: "1.1", interceptors: [auth] });
  };
  return {
    tower,
    url,
    home,
    adminToken,
    async api(method, path, body, token = adminToken) {
      const headers: Record<string, string> = {};
      if (token) headers.authorization = `Bearer ${token}`;
      if (body !== undefined) headers["content-type"] = "application/json";
      const res = await fetch(url + path, {
        method,
        headers,
        body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: keep the text
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
    transport,
    client: (service, token) => createClient(service, transport(token)),
    close: () => tower.close(),
  };
}

export interface TowerChild {
  child: ChildProcess;
  url: string;
  port: number;
  stderr(): string;
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

/**
 * Starts an ep-tower entry point (the built bin or a test bundle) as a child process on `port`
 * (a free one unless given) and waits until `ready` answers 200. The one way tests start a tower
 * process; the harnesses below add what their tests need (admin token, PostgreSQL schema).
 *
 * A port found free can be bound by another process (another test file's tower) before this
 * tower binds it: when the port was picked here, a tower that lost it is started again on another
 * (`pickPort` replaces freePort in the harness's own test).
 */
export async function spawnTowerChild(opts: {
  entry: string;
  home: string;
  env?: Record<string, string>;
  nodeArgs?: string[];
  port?: number;
  pickPort?: () => Promise<number>;
  ready?: "/healthz" | "/readyz";
  timeoutMs?: number;
}): Promise<TowerChild> {
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? (await (opts.pickPort ?? freePort)());
    try {
      return await spawnTowerOn(opts, port);
    } catch (err) {
      if (opts.port !== undefined || attempt === 3 || !(err instanceof PortTaken)) throw err;
    }
  }
}

class PortTaken extends Error {}

async function spawnTowerOn(opts: Parameters<typeof spawnTowerChild>[0], port: number): Promise<TowerChild> {
  mkdirSync(opts.home, { recursive: true });
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), opts.entry, "--listen", `127.0.0.1:${port}`], {
    env: { ...process.env, EP_HOME: opts.home, EP_LOG_LEVEL: "warn", ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdout!.resume();
  const url = `http://127.0.0.1:${port}`;
  const exited = () => {
    const why = `ep-tower exited ${child.exitCode}: ${stderr}`;
    return /EADDRINUSE|address is in use/.test(stderr) ? new PortTaken(why) : new Error(why);
  };
  await waitFor(async () => {
    if (child.exitCode !== null) throw exited();
    const ok =
      (await fetch(url + (opts.ready ?? "/healthz"), { signal: AbortSignal.timeout(2000) }).catch(() => undefined))
        ?.ok === true;
    // the answer came from this child, not from another process that holds the port
    return ok && listensOn(child.pid!, port);
  }, opts.timeoutMs ?? 15_000);
  return {
    child,
    url,
    port,
    stderr: () => stderr,
    stop: () => stopChild(child, "SIGTERM"),
    kill9: () => stopChild(child, "SIGKILL"),
  };
}

/**
 * Whether process `pid` holds the listening TCP socket of `port` (Linux /proc; elsewhere it cannot tell and says yes).
 */
function listensOn(pid: number, port: number): boolean {
  if (!existsSync("/proc/net/tcp")) return true;
  const hex = `:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const rows = existsSync(table) ? readFileSync(table, "utf8").split("\n").slice(1) : [];
    for (const row of rows) {
      const cols = row.trim().split(/\s+/);
      if (cols.length > 9 && cols[1].endsWith(hex) && cols[3] === "0A") inodes.add(`socket:[${cols[9]}]`); // 0A: LISTEN
    }
  }
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => inodes.has(readlinkOr(`/proc/${pid}/fd/${fd}`)));
  } catch {
    return false;
  }
}
const readlinkOr = (path: string): string => {
  try {
    return readlinkSync(path);
  } catch {
    return "";
  }
};

/** Sends `signal` to a child process and resolves when it has exited (at once when it already has). */
export function stopChild(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode) return resolve();
    child.once("exit", () => resolve());
    child.kill(signal);
  });
}

/** Runs the built ep-tower binary; `npm run build` must have run. */
export async function spawnTower(
  home: string,
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
): Promise<TowerChild & { adminToken: string }> {
  const tower = await spawnTowerChild({ entry: join(ROOT, "bin", "ep-tower.js"), home, env, nodeArgs });
  return { ...tower, adminToken: readFileSync(join(home, "tower", "admin.token"), "utf8").trim() };
}

/** Cleanups a test registers as it goes; run in reverse after each test. */
export function useCleanups(): (fn: () => unknown) => void {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn();
  });
  return (fn) => void cleanups.push(fn);
}

export async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

import { waitFor } from "../test-support/wait.js";
export { waitFor };
