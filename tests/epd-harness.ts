// Cross-process helpers for the daemon tests: the tower and epd bundled exactly like
// `npm run build` does (esbuild, same options) and run as child processes.
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { build } from "esbuild";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeNodeIdentity } from "../common/node-identity.js";
import { jsonRpcCall } from "../daemon/mgmt/client.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import {
  spawnTowerChild,
  startTower,
  stopChild,
  tempHome,
  waitFor,
  type TestTower,
  type TowerChild,
} from "./harness.js";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createConnectTransport } from "@connectrpc/connect-node";

/**
 * The repository root, found from this file also when it is bundled (bench/, bench/peers/): the
 * first folder up with a package.json and the tower's sources (bench/peers/ has a package.json of
 * its own).
 */
export const ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!(existsSync(join(dir, "package.json")) && existsSync(join(dir, "tower"))) && dirname(dir) !== dir)
    dir = dirname(dir);
  return dir;
})();
export const FIXTURES = join(ROOT, "daemon", "runtimes", "fixtures");
const OUT = join(ROOT, "dist", "epd-test");
let built: Promise<{ tower: string; epd: string }> | undefined;

/**
 * Bundles entry points with the options of scripts/build.mjs into `outdir`. Test files run in
 * parallel worker processes and each bundles the same sources into the same directory while
 * another may be starting a binary from it: every file is written to a temporary name and
 * renamed into place (only when its content changed), so a reader never sees a half-written one.
 */
export async function bundleEntries(entryPoints: Record<string, string>, outdir: string): Promise<void> {
  const result = await build({
    entryPoints,
    outdir,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    splitting: true,
    chunkNames: "chunks/[name]-[hash]",
    logLevel: "warning",
    write: false,
    banner: {
      js:
        "import { createRequire as __epCreateRequire } from 'node:module'; " +
        "const require = __epCreateRequire(import.meta.url);",
    },
  });
  for (const file of result.outputFiles) {
    const same = existsSync(file.path) && Buffer.compare(readFileSync(file.path), file.contents) === 0;
    if (same) continue;
    mkdirSync(dirname(file.path), { recursive: true });
    const tmp = `${file.path}.${process.pid}.tmp`;
    writeFileSync(tmp, file.contents);
    renameSync(tmp, file.path);
  }
}

/** Bundles tower/main.ts and daemon/main.ts with the options of scripts/build.mjs (without the CLI entry). */
export function buildBinaries(): Promise<{ tower: string; epd: string }> {
  built ??= bundleEntries(
    { "tower/main": join(ROOT, "tower/main.ts"), "daemon/main": join(ROOT, "daemon/main.ts") },
    OUT,
  ).then(() => ({
    tower: join(OUT, "tower", "main.js"),
    epd: join(OUT, "daemon", "main.js"),
  }));
  return built;
}

export type TowerProcess = TowerChild & { adminToken: string };

/** Starts ep-tower on `port` (a free one unless given), so a test can restart it on the same address. */
export async function spawnTowerProcess(
  home: string,
  env: Record<string, string> = {},
  port?: number,
): Promise<TowerProcess> {
  const { tower: entry } = await buildBinaries();
  const tower = await spawnTowerChild({ entry, home, env: { EP_SECRET_KEY: "test", ...env }, port });
  return { ...tower, adminToken: readFileSync(join(home, "tower", "admin.token"), "utf8").trim() };
}

export { stopChild };

/** Registers a node with the tower (admin token) and writes its identity file. */
export async function registerNode(
  url: string,
  adminToken: string,
  nodeFile: string,
  hostname = "worker-1",
): Promise<{ nodeId: string; token: string }> {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${adminToken}`), next(req))],
  });
  const res = await createClient(NodeService, transport).registerNode({ hostname });
  await writeNodeIdentity({ node_id: res.node!.id, hostname, token: res.token, tower_url: url }, nodeFile);
  return { nodeId: res.node!.id, token: res.token };
}

export interface EpdProcess {
  child: ChildProcess;
  mgmt: string;
  logs: Record<string, unknown>[];
  stderr(): string;
  call<T = any>(method: string, params?: Record<string, unknown>): Promise<T>;
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

/** Runs the built epd against a tower; resolves once mgmt.sock answers daemon.status. */
export async function spawnEpd(opts: {
  home: string;
  nodeFile: string;
  backendUrl: string;
  env?: Record<string, string>;
  waitLink?: boolean;
}): Promise<EpdProcess> {
  const { epd } = await buildBinaries();
  const child = spawn(process.execPath, [epd, "run", "--backend-url", opts.backendUrl], {
    env: {
      ...process.env,
      EP_HOME: opts.home,
      EP_NODE_FILE: opts.nodeFile,
      EP_LOG_LEVEL: "debug",
      PATH: `${FIXTURES}:${process.env.PATH}`,
      ...opts.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const logs: Record<string, unknown>[] = [];
  child.stderr!.on("data", (d: Buffer) => {
    stderr += d.toString();
    const lines = stderr.split("\n");
    stderr = lines.pop()!;
    for (const l of lines) {
      try {
        logs.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        logs.push({ raw: l });
      }
    }
  });
  child.stdout!.resume();
  const mgmt = join(opts.home, "epd", "mgmt.sock");
  const call = <T>(method: string, params: Record<string, unknown> = {}) =>
    jsonRpcCall<T>(mgmt, method, params, { timeoutMs: 10_000 });
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`epd exited ${child.exitCode}: ${JSON.stringify(logs)} ${stderr}`);
    if (!existsSync(mgmt)) return false;
    const s = await call<{ link: string }>("daemon.status").catch(() => undefined);
    return s !== undefined && (opts.waitLink === false || s.link === "connected");
  }, 15_000);
  return {
    child,
    mgmt,
    logs,
    stderr: () => logs.map((l) => JSON.stringify(l)).join("\n") + stderr,
    call,
    stop: () => stopChild(child, "SIGTERM"),
    kill9: () => stopChild(child, "SIGKILL"),
  };
}

export { startTower, type TestTower };

/** A Connect client of the tower as its bootstrap admin (HTTP/1.1, as the CLI talks). */
export function adminClient<T extends DescService>(
  tower: Pick<TowerProcess, "url" | "adminToken">,
  service: T,
): Client<T> {
  const transport = createConnectTransport({
    baseUrl: tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))],
  });
  return createClient(service, transport);
}

/**
 * The usual setup of an end-to-end test: the bundled tower as a process, a node registered on
 * it (the node file under `home`), and a real epd linked to it. `stop()` ends both.
 */
export async function startTowerAndEpd(
  home: string,
  opts: { towerEnv?: Record<string, string>; epdEnv?: Record<string, string>; beforeEpd?: () => void } = {},
) {
  await buildBinaries();
  const tower = await spawnTowerProcess(home, opts.towerEnv);
  const nodeFile = join(home, "node.json");
  const { nodeId } = await registerNode(tower.url, tower.adminToken, nodeFile);
  opts.beforeEpd?.();
  const epd = await spawnEpd({ home, nodeFile, backendUrl: tower.url, env: opts.epdEnv });
  return {
    tower,
    epd,
    nodeId,
    nodeFile,
    async stop() {
      await epd.stop();
      await tower.stop();
    },
  };
}

/** A tower process with a node registered (not started), a domain and a mission: the start of many epd tests. */
export interface TowerSetup {
  home: string;
  nodeFile: string;
  tower: TowerProcess;
  work: Client<typeof WorkService>;
  events: Client<typeof EventService>;
  domainId: string;
  missionId: string;
}

export async function towerWithMission(
  prefix: string,
  cleanup: (fn: () => unknown) => void,
  towerEnv: Record<string, string> = {},
): Promise<TowerSetup> {
  const h = tempHome(prefix);
  cleanup(() => h.cleanup());
  const nodeFile = join(h.dir, "etc", "node.json");
  const tower = await spawnTowerProcess(h.dir, towerEnv);
  cleanup(() => tower.stop());
  await registerNode(tower.url, tower.adminToken, nodeFile);
  const work = adminClient(tower, WorkService);
  const events = adminClient(tower, EventService);
  const domainId = (await work.createDomain({ name: `d-${Math.random().toString(36).slice(2, 8)}` })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  return { home: h.dir, nodeFile, tower, work, events, domainId, missionId };
}

/** epd on that setup's node, stopped by the cleanup. */
export async function epdFor(
  s: TowerSetup,
  cleanup: (fn: () => unknown) => void,
  env: Record<string, string> = {},
): Promise<EpdProcess> {
  const epd = await spawnEpd({ home: s.home, nodeFile: s.nodeFile, backendUrl: s.tower.url, env });
  cleanup(() => epd.stop());
  return epd;
}
