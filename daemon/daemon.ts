// Assembles epd: identity, daemon home, runtimes, the task worker, the link to the tower, the
// periodic poll, and the local sockets. `epd run` is createDaemon() + start() + signal handling.
import type { ConnectRouter } from "@connectrpc/connect";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { systemClock, type Clock } from "../common/clock.js";
import { EpError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { NodeIdentity } from "../common/node-identity.js";
import { daemonHome, daemonSockets, epHome, nodeFile } from "../common/paths.js";
import type { LinkResponse } from "../gen/ep/tower/v1/fleet_pb.js";
import { createAttachHub, createTargetResolver } from "./attach/index.js";
import { createFanout, fanoutEnv, type Fanout } from "./fanout/fanout.js";
import { metricsListenOf, serveMetricsAddress } from "../common/metrics-server.js";
import { serveMgmtSocket } from "./mgmt/mgmt-socket.js";
import { serveSecretsSocket, type GetSecret } from "./mgmt/secrets-line.js";
import type { UnixSocketServer } from "./mgmt/socket-server.js";
import { createFleet, fleetRoutes, type Fleet } from "./fleet/index.js";
import { createTowerClients, type TowerClients } from "./link/tower-client.js";
import type { TowerLink } from "./link/tower-link.js";
import { linkKind, linkToTower } from "./link/link-to-tower.js";
import { createSecretsBroker, towerResolver } from "./secrets/broker.js";
import { redactingLogger } from "./secrets/redact.js";
import { createRuntimeRegistry, type RuntimeRegistry } from "./runtimes/registry.js";
import { createSpawner } from "./runtimes/spawner.js";
import { loadRuntimesConfig, runtimeReport, runtimesConfigPath } from "./runtimes/runtimes-config.js";
import { createMcpEndpoint } from "./mcp/mcp-endpoint.js";
import { openToolCaller } from "./mcp/tool-call.js";
import { mgmtRoutes } from "./services/mgmt-services.js";
import { createAgentStore, type AgentStore } from "./worker/agent-store.js";
import { createJournal, type Journal } from "./worker/journal.js";
import { gcWorkDirs } from "./worker/work-gc.js";
import { createSessionTable, type SessionTable } from "./worker/sessions.js";
import { createSignalRunner } from "./worker/signal-runner.js";
import { createMergeRequests } from "./worker/merge-requests.js";
import { createTaskWorker, type TaskWorker } from "./worker/worker.js";
import { gcWorktrees } from "./worker/workspace.js";

import { routeLinkCommand } from "./link-commands.js";
import { enumWord, isoOf } from "../common/vocab.js";
import { RuntimeSchema } from "../gen/ep/tower/v1/resources_pb.js";

/** How often epd removes kept worktrees past their keep_failed (docs/workspaces.md). */
const WORKTREE_GC_MS = 3_600_000;

export const EPD_VERSION = "0.1.0";

export interface DaemonOptions {
  identity: NodeIdentity;
  backendUrl: string;
  log: Logger;
  env?: NodeJS.ProcessEnv;
  clock?: Clock;
  /** periodic safety-net poll (EP_POLL_MS, default 5000) */
  pollMs?: number;
  /** how long SIGTERM waits for running tasks before failing them (EP_SHUTDOWN_GRACE_MS, default 30000) */
  shutdownGraceMs?: number;
  /** the script that runs epd (process.argv[1]); an `epd` launcher for it goes first on every run's PATH */
  epdEntry?: string;
  boosterWasm?: string;
  /** The secrets broker; until it exists every request is refused. */
  getSecret?: (sessions: SessionTable) => GetSecret;
  /** More management services (cron, supervision) on mgmt.sock. */
  extraRoutes?: (router: ConnectRouter) => void;
  /** Link commands nobody here handles (signal, supervise, attach, config_reload and the worker's are). */
  onLinkCommand?: (msg: LinkResponse) => void;
  /** Fault injection for tests: return true to drop a link message as if it was lost. */
  dropLinkMessage?: (msg: LinkResponse) => boolean;
  linkBackoff?: { initialMs?: number; maxMs?: number };
  /** the HTTP/1.1 link only (EP_LINK=http1), outcomes as unary calls; default: the session over HTTP/2 */
  linkOverHttp1?: boolean;
}

export interface Daemon {
  readonly home: string;
  readonly tower: TowerClients;
  readonly agents: AgentStore;
  readonly worker: TaskWorker;
  readonly link: TowerLink;
  readonly sessions: SessionTable;
  /** Profile agents (agents.toml), signals, supervision and cron. */
  readonly fleet: Fleet;
  readonly sockets: { mgmt: string; secrets: string; attach: string };
  start(): Promise<void>;
  /** Graceful: stop claiming, let runs finish within the grace (else fail them retryably), close sockets. */
  close(): Promise<void>;
}

const SCRUBBED_ENV = ["EP_TOKEN", "EP_SECRET_KEY", "EP_NODE_FILE", "EP_ADMIN_TOKEN"];

function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0)
    throw new EpError("config_invalid", `${name} must be a positive integer (got ${JSON.stringify(raw)})`);
  return n;
}

export async function createDaemon(opts: DaemonOptions): Promise<Daemon> {
  const env = opts.env ?? process.env;
  const clock = opts.clock ?? systemClock;
  // the secrets broker (docs/secrets.md); every value it hands out is redacted from the log and from what runs report
  const broker = createSecretsBroker({
    sessions: { get: (id) => sessions.get(id) },
    resolve: towerResolver(() => tower.transport),
    log: opts.log.child({ part: "secrets" }),
  });
  const log = redactingLogger(opts.log, () => broker.values());
  const home = daemonHome(env);
  const sockets = daemonSockets(env);
  const pollMs = opts.pollMs ?? positiveInt("EP_POLL_MS", env.EP_POLL_MS, 5000);
  const linkOverHttp1 = opts.linkOverHttp1 ?? linkKind(env.EP_LINK) === "http1";
  const graceMs = opts.shutdownGraceMs ?? positiveInt("EP_SHUTDOWN_GRACE_MS", env.EP_SHUTDOWN_GRACE_MS, 30_000);
  const startedAt = clock.now();
  // Prometheus metrics on their own address, only when EP_METRICS_LISTEN is set (a bad value is refused here, at start)
  const metricsListen = metricsListenOf(env.EP_METRICS_LISTEN);
  // prom-client is loaded only then: a node without metrics does not pay for it at start
  const metrics = metricsListen && (await import("./metrics/epd-metrics.js")).createEpdMetrics();
  const binDir = await prepareHome(home, opts.epdEntry);
  const baseEnv = runBaseEnv(env);
  const runtimesConfig = await loadRuntimesConfig(runtimesConfigPath(env));
  // runs are forked by a small helper, whose fork stays cheap whatever epd holds (runtimes/spawner.ts)
  const spawner = createSpawner(join(home, "spawn.sock"), log.child({ part: "spawner" }));
  // every run's output is also followed by the attach gateway (docs/attach.md)
  const attachHub = createAttachHub({
    clock,
    log: log.child({ part: "attach" }),
    env,
    idleMs: positiveInt("EP_ATTACH_IDLE_MS", env.EP_ATTACH_IDLE_MS, 30 * 60_000),
  });
  const runtimes: RuntimeRegistry = attachHub.wrapRuntimes(
    createRuntimeRegistry(runtimesConfig, { clock, logger: log, spawn: spawner.spawn }),
  );
  const agents = createAgentStore(home);
  await agents.load();
  const journal = createJournal(home);
  const sessions = createSessionTable(() => clock.now());
  const tower = createTowerClients(opts.backendUrl, opts.identity.token);
  const common = {
    tower,
    runtimes,
    sessions,
    clock,
    log,
    home,
    secretsSocket: sockets.secrets,
    binDir,
    baseEnv,
    redactor: broker.redactor,
  };
  const [signals, merges] = [createSignalRunner(common), createMergeRequests(common)];
  const { tools, mcp } = await openTools(opts, env, log, tower, clock);
  const fleet = await createFleet({
    ...common,
    env,
    log: log.child({ part: "fleet" }),
    enrolled: { find: (target) => agents.find(target), deliver: (agent, prompt) => signals.deliver(agent, prompt) },
    // config_reload: new runs use the new runtimes.toml (an invalid file throws and changes nothing)
    reloadRuntimes: async () => runtimes.reload(await loadRuntimesConfig(runtimesConfigPath(env))),
    // a profile enrolled late (the tower was unreachable at start): the tower hands it work once
    // its enrollment is seen (agent.enrolled); while the link is down it claims at once
    onEnrolled: () => link.offLink(() => worker.pollAll()),
  });
  // profiles enrolled at the tower claim too (their assigned tasks, broadcast runs and first_claim tasks)
  const worker = createTaskWorker({
    ...common,
    agents,
    journal,
    mcp,
    // what no confined run sees: tokens, the tower's data, other runs, the node identity
    hidden: [epHome(env), nodeFile(env)],
    profiles: { list: () => fleet.claimers(), place: (profileId) => fleet.taskPlace(profileId) },
    onRunEnded: metrics && ((run) => metrics.runEnded(run)),
    // outcomes go up the session while it is up (the link is made just below)
    uplink: () => link,
  });

  const { attach, link } = linkToTower({
    backendUrl: opts.backendUrl,
    token: opts.identity.token,
    version: EPD_VERSION,
    backoff: opts.linkBackoff,
    dropLinkMessage: opts.dropLinkMessage,
    tower,
    linkOverHttp1,
    clock,
    log,
    attach: {
      hub: attachHub,
      resolve: createTargetResolver({
        fleet,
        agents,
        hub: attachHub,
        runSocketName: runtimesConfig.muxhost_hosted.socketName,
      }),
      path: sockets.attach,
    },
    // the agents as they are when the link opens: the tower squares its view with it and hands the idle ones work
    agents: () => worker.held(),
    onConnected() {
      worker.reachable();
      fleet.reportState();
    },
    onMessage: (msg, attach) =>
      routeLinkCommand(msg, {
        fleet,
        worker,
        agents,
        signals,
        attach,
        merges,
        log,
        adopt: adoptAgent,
        other: opts.onLinkCommand,
      }),
  });

  /** An agent the tower enrolled for this node (not a profile's) joins agents.json, as 'agent.enroll' would have. */
  async function adoptAgent(agentId: string): Promise<void> {
    if (fleet.claimers().some((p) => p.id === agentId)) return;
    // most often its own agent.enroll, whose answer the task overtook: recorded once that is read
    await agents.enrolled();
    if (agents.find(agentId)) return;
    try {
      const agent = (await tower.agents.getAgent({ agentId })).agent;
      if (!agent || agent.nodeId !== opts.identity.node_id || agent.supervised) return;
      await agents.add({
        id: agent.id,
        domainId: agent.domainId,
        name: agent.name,
        runtime: enumWord(RuntimeSchema, agent.runtime),
        capabilities: agent.capabilities,
        enrolledAt: isoOf(agent.createdAt),
      });
      log.info("agent enrolled at the tower joins this node", {
        agent_id: agent.id,
        domain_id: agent.domainId,
        runtime: enumWord(RuntimeSchema, agent.runtime),
      });
    } catch (err) {
      // the worker gives the task back ("the agent is not on this node"); the tower offers it again
      log.warn("an agent the tower handed work to is unknown here and could not be looked up", {
        agent_id: agentId,
        error: (err as Error).message,
      });
    }
  }

  const runtimesReport = () =>
    runtimeReport(runtimesConfig, {
      ...baseEnv,
      PATH: [binDir, baseEnv.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(":"),
    });
  const getSecret: GetSecret = opts.getSecret ? opts.getSecret(sessions) : broker.getSecret;
  // the local event fan-out (docs/events.md), on when EP_FANOUT_LISTEN is set; a bad value is refused at start
  const fanoutConfig = fanoutEnv(env);
  let fanout: Fanout | undefined;

  let metricsServer: { url: string; close(): Promise<void> } | undefined;
  let mgmtServer: UnixSocketServer | undefined;
  let secretsServer: UnixSocketServer | undefined;
  let stopTimers: (() => void) | undefined;
  let closing: Promise<void> | undefined;

  return {
    home,
    tower,
    agents,
    worker,
    link,
    sessions,
    fleet,
    sockets: { mgmt: sockets.mgmt, secrets: sockets.secrets, attach: sockets.attach },

    async start() {
      mgmtServer = await serveMgmtSocket({
        path: sockets.mgmt,
        log: log.child({ part: "mgmt" }),
        routes: (router) => {
          mgmtRoutes({
            identity: opts.identity,
            tower,
            agents,
            worker,
            link,
            signals,
            fleet,
            tools,
            version: EPD_VERSION,
            startedAt,
            booster: opts.boosterWasm ?? "",
            runtimes: runtimesReport,
          })(router);
          fleetRoutes(fleet)(router);
          opts.extraRoutes?.(router);
        },
      });
      secretsServer = await serveSecretsSocket({
        path: sockets.secrets,
        log: log.child({ part: "secrets" }),
        getSecret,
      });
      await mcp.listen();
      await attach.listen();
      await worker.recover();
      link.start();
      fanout =
        fanoutConfig &&
        createFanout({
          upstreamUrl: opts.backendUrl,
          token: opts.identity.token,
          ...fanoutConfig,
          clock,
          log: log.child({ part: "fanout" }),
        });
      await fanout?.start();
      await fleet.start();
      if (metrics && metricsListen) {
        metrics.serve({
          linkConnected: () => link.state() === "connected",
          agents: () => ({ local: agents.list().length, profiles: fleet.claimers().length }),
          running: () => worker.running().length,
          fanoutClients: () => fanout?.stats().clients,
        });
        metricsServer = await serveMetricsAddress(metricsListen, metrics, log.child({ part: "metrics" }));
        log.info("metrics listening", { url: metricsServer.url });
      }
      const held = () => new Set([...worker.running().map((r) => r.taskId), ...journal.entries().map((e) => e.taskId)]);
      // the recovery path: while the link is down, idle agents claim on the poll
      // (never while a link is opening: what it claims must be in the open, see TowerLink.offLink)
      stopTimers = startTimers(clock, log, pollMs, () => link.offLink(() => worker.pollAll()), home, held);
      log.info("epd started", {
        node_id: opts.identity.node_id,
        backend_url: opts.backendUrl,
        home,
        agents: agents.list().length,
        poll_ms: pollMs,
      });
    },

    close() {
      stopTimers?.();
      // in order: runs end (their reports go out) before the link, the sockets last
      closing ??= inOrder([
        () => worker.shutdown(graceMs),
        () => compactQuietly(journal, log),
        () => fleet.close(),
        () => link.close(),
        () => fanout?.close(),
        () => attach.close(),
        () => attachHub.close(),
        () => runtimes.close(),
        () => spawner.close(),
        () => signals.close(),
        () => Promise.all([mgmtServer?.close(), secretsServer?.close(), mcp.close(), metricsServer?.close()]),
        () => broker.close(),
        () => tools.close(),
      ]).then(() => log.info("epd stopped"));
      return closing;
    },
  };
}

/** The daemon home (0700) and its bin/ with an `epd` launcher for this epd, put first on every run's PATH. */
async function prepareHome(home: string, epdEntry: string | undefined): Promise<string> {
  await mkdir(home, { recursive: true, mode: 0o700 });
  await chmod(home, 0o700);
  const binDir = join(home, "bin");
  await mkdir(binDir, { recursive: true, mode: 0o700 });
  if (epdEntry) {
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    await writeFile(join(binDir, "epd"), `#!/bin/sh\nexec ${q(process.execPath)} ${q(epdEntry)} "$@"\n`, {
      mode: 0o755,
    });
    await chmod(join(binDir, "epd"), 0o755);
  }
  return binDir;
}

/** The environment runs start from: the daemon's own, without its credentials. */
function runBaseEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && !SCRUBBED_ENV.includes(k)) out[k] = v;
  return out;
}

/**
 * The validated MCP path (docs/booster.md): schema pack, booster, then /mcp/call with the node
 * token; and every run's own door to it, served by this epd (EP_MCP_URL, EP_MCP_TOKEN,
 * EP_MCP_CONFIG; docs/runtimes.md "EP's tools").
 */
async function openTools(opts: DaemonOptions, env: NodeJS.ProcessEnv, log: Logger, tower: TowerClients, clock: Clock) {
  const tools = await openToolCaller({
    towerUrl: opts.backendUrl,
    token: opts.identity.token,
    log: log.child({ part: "tools" }),
    schemaPackFile: env.EP_SCHEMA_PACK_FILE,
    boosterWasm: opts.boosterWasm,
    publish: (events) => tower.nodes.publishEvents({ events }),
  });
  const mcp = createMcpEndpoint({
    caller: tools,
    tower,
    towerUrl: opts.backendUrl,
    token: opts.identity.token,
    clock,
    log,
  });
  return { tools, mcp };
}

/** The journal folded into inflight.json on the way out; a failure leaves the log, which the next start replays. */
function compactQuietly(journal: Journal, log: Logger): void {
  try {
    journal.compact();
  } catch (err) {
    log.warn("journal not compacted; the next start replays its log", { error: (err as Error).message });
  }
}

async function inOrder(steps: (() => unknown)[]): Promise<void> {
  for (const step of steps) await step();
}

/**
 * The daemon's periodic work: the safety-net poll of every agent (every `pollMs`), and, hourly,
 * the collection of kept worktrees past their workspace's keep_failed and of run directories
 * untouched for a week (work-gc.ts). Returns the stop.
 */
function startTimers(
  clock: Clock,
  log: Logger,
  pollMs: number,
  poll: () => void,
  home: string,
  held: () => ReadonlySet<string>,
): () => void {
  let pollTimer = clock.setTimeout(function tick() {
    poll();
    pollTimer = clock.setTimeout(tick, pollMs);
  }, pollMs);
  let gcTimer = clock.setTimeout(
    function gc() {
      gcWorktrees(home, new Date(clock.now()))
        .then(
          (removed) =>
            removed.length &&
            log.info("kept worktrees collected", { count: removed.length, tasks: removed.map((r) => r.taskId) }),
        )
        .catch((err: Error) => log.warn("worktree gc failed", { error: err.message }))
        .then(() => gcWorkDirs(home, clock.now(), held()))
        .then((removed) => removed.length && log.info("run directories collected", { count: removed.length }))
        .catch((err: Error) => log.warn("run directory gc failed", { error: err.message }))
        .finally(() => {
          if (!stopped) gcTimer = clock.setTimeout(gc, WORKTREE_GC_MS);
        });
    },
    Math.min(pollMs, WORKTREE_GC_MS),
  );
  let stopped = false;
  return () => {
    stopped = true;
    clock.clearTimeout(pollTimer);
    clock.clearTimeout(gcTimer);
  };
}
