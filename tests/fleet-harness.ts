// Helpers for the fleet and cron tests: the built `ep` CLI as a subprocess, a private tmux socket,
// and a tower + registered node + epd started from the shared epd harness.
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { afterAll, beforeAll } from "vitest";
import { createConnectTransport } from "@connectrpc/connect-node";
import { execFile, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import {
  buildBinaries,
  bundleEntries,
  registerNode,
  ROOT,
  spawnEpd,
  spawnTowerProcess,
  type EpdProcess,
  type TowerProcess,
} from "./epd-harness.js";
import { tempHome } from "./harness.js";

const OUT = join(ROOT, "dist", "fleet-test");
let cliBuilt: Promise<string> | undefined;

/** Bundles cli/main.ts like scripts/build.mjs does, into a private directory. */
export function buildCli(): Promise<string> {
  cliBuilt ??= bundleEntries({ "cli/main": join(ROOT, "cli/main.ts") }, OUT).then(() => join(OUT, "cli", "main.js"));
  return cliBuilt;
}

export async function buildAll(): Promise<void> {
  await Promise.all([buildBinaries(), buildCli()]);
}

export interface EpResult {
  code: number;
  stdout: string;
  stderr: string;
  json(): any;
}

/** Runs the built `ep` with EP_HOME pointing at the daemon's home. */
export async function runEp(home: string, args: string[], env: Record<string, string> = {}): Promise<EpResult> {
  const cli = await buildCli();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], {
      env: { ...process.env, EP_HOME: home, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr, json: () => JSON.parse(stdout) }));
  });
}

export function tmux(socket: string, args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile("tmux", ["-L", socket, ...args], { encoding: "utf8" }, (err, stdout) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout }),
    );
  });
}

export async function tmuxSessions(socket: string): Promise<string[]> {
  const r = await tmux(socket, ["list-sessions", "-F", "#{session_name}"]);
  return r.code === 0 ? r.stdout.split("\n").filter(Boolean) : [];
}

export interface FleetSetup {
  home: string;
  epdHome: string;
  nodeFile: string;
  tower: TowerProcess;
  nodeId: string;
  work: ReturnType<typeof createClient<typeof WorkService>>;
  events: ReturnType<typeof createClient<typeof EventService>>;
  /** a Connect client of any tower service with the admin token */
  client<T extends DescService>(service: T): Client<T>;
  cleanup(): Promise<void>;
}

export async function fleetSetup(prefix = "ep-fleet-"): Promise<FleetSetup> {
  const h = tempHome(prefix);
  const nodeFile = join(h.dir, "etc", "node.json");
  const tower = await spawnTowerProcess(h.dir);
  const { nodeId } = await registerNode(tower.url, tower.adminToken, nodeFile);
  const transport = createConnectTransport({
    baseUrl: tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))],
  });
  const epdHome = join(h.dir, "epd");
  mkdirSync(epdHome, { recursive: true, mode: 0o700 });
  return {
    home: h.dir,
    epdHome,
    nodeFile,
    tower,
    nodeId,
    work: createClient(WorkService, transport),
    events: createClient(EventService, transport),
    client: (service) => createClient(service, transport),
    async cleanup() {
      await tower.stop();
      h.cleanup();
    },
  };
}

/**
 * The setup of a fleet test file: built binaries and one tower with a registered node before all
 * tests (handed to `set`); after all, the file's epd (`epd()`) stopped, the agent process groups in
 * `pids` killed, the tower stopped and the home removed.
 */
export function fleetSuite(
  prefix: string,
  opts: { set(s: FleetSetup): void; epd(): EpdProcess | undefined; pids?: Set<number>; after?(): Promise<void> },
): void {
  let setup: FleetSetup | undefined;
  beforeAll(async () => {
    await buildAll();
    setup = await fleetSetup(prefix);
    opts.set(setup);
  }, 90_000);
  afterAll(async () => {
    await opts.epd()?.stop();
    for (const pid of opts.pids ?? []) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await opts.after?.();
    await setup?.cleanup();
  });
}

export function writeDaemonFile(s: FleetSetup, name: "agents.toml" | "cron.toml", text: string): void {
  writeFileSync(join(s.epdHome, name), text);
}

export function startFleetEpd(s: FleetSetup, env: Record<string, string> = {}): Promise<EpdProcess> {
  return spawnEpd({
    home: s.home,
    nodeFile: s.nodeFile,
    backendUrl: s.tower.url,
    env: { EP_SUPERVISE_BACKEND: "process", ...env },
  });
}

/** Events at the tower of a type whose name starts with a prefix. */
export async function towerEvents(
  s: FleetSetup,
  type: string,
  namePrefix = "",
): Promise<{ name: string; status: string; agentId: string; payload: any }[]> {
  const res = await s.events.listEvents({ limit: 1000, filter: { types: [type] } });
  return res.events
    .filter((e) => e.name.startsWith(namePrefix))
    .map((e) => ({ name: e.name, status: e.status, agentId: e.agentId, payload: e.payload as any }));
}
