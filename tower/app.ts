// Assembles the tower: store, domain services, and the edges over them.
import "../common/protobuf-text.js"; // how binary messages write strings (before any is written)
import { type AiService as AiServiceImpl, createPlanner, createAiService, readAiSettings } from "./domain/ai/index.js";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { bindReflection } from "./edges/connect/reflection.js";
import { createContextValues, type ConnectRouter } from "@connectrpc/connect";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { systemClock, type Clock } from "../common/clock.js";
import { createLogger, type Logger } from "../common/log.js";
import { file_ep_errors_v1_errors } from "../gen/ep/errors/v1/errors_pb.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { SecretService } from "../gen/ep/tower/v1/secrets_pb.js";
import { ApprovalService } from "../gen/ep/tower/v1/approvals_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { WebhookService } from "../gen/ep/tower/v1/webhooks_pb.js";
import type { TowerConfig } from "./config.js";
import {
  createAuth,
  type Auth,
  createAuthService,
  type OidcConfig,
  type OidcLoginConfig,
} from "./domain/auth/index.js";
import { credentialOf as credentialFrom, SESSION_COOKIE } from "./edges/credential.js";
import type { Caller } from "./domain/caller.js";
import type { Deps } from "./domain/deps.js";
import { createEventHub, type EventHub } from "./domain/event-hub.js";
import { createEventService, createEventStream } from "./domain/events/index.js";
import {
  createFleetService,
  type FleetService,
  createAttachAdmission,
  localAttachRelay,
  type AttachRelay,
} from "./domain/fleet/index.js";
import { replicatedStore, startReplication } from "./domain/replication/index.js";
import type { Replication } from "./domain/replication/types.js";
import {
  createSecretService,
  envKeySource,
  type SecretServiceImpl,
  type SecretKeyring,
} from "./domain/secrets/index.js";
import { createApprovalService, type ApprovalServiceImpl } from "./domain/approvals/index.js";
import { createWorkService, type WorkService as Work, createTaskMerge } from "./domain/work/index.js";
import {
  createWebhookDispatcher,
  type WebhookDispatcher,
  createWebhookService,
  resealWebhookSecrets,
  type WebhookServiceImpl,
  readWebhookSettings,
} from "./domain/webhooks/index.js";
import { AiService } from "../gen/ep/tower/v1/ai_pb.js";
import { ToolService } from "../gen/ep/tower/v1/tools_pb.js";
import { createToolExecutor, createToolService } from "./domain/tools/index.js";
import { aiRoutes, registerAiRoutes } from "./edges/ai/ai-routes.js";
import {
  collectRoutes,
  createHttpApp,
  handleErrors,
  isPublic,
  registerHealthRoutes,
  registerSessionRoutes,
} from "./edges/http.js";
import { registerMcpRoutes } from "./edges/mcp/mcp-routes.js";
import { kCaller } from "./edges/caller-key.js";
import { gateDoors } from "./edges/door-gate.js";
import { registerUnaryLane } from "./edges/connect/unary-lane.js";
import { mendProtocolErrors } from "../common/connect-errors.js";
import { serviceImpl } from "./edges/connect/bind.js";
import { buildOpenApi } from "./edges/rest/openapi.js";
import { registerRestRoutes, workRoutes } from "./edges/rest/work-routes.js";
import { webhookRoutes } from "./edges/rest/webhook-routes.js";
import { registerConsoleRoutes } from "./edges/ui/console-routes.js";
import { registerOidcRoutes } from "./edges/ui/oidc-routes.js";
import { createOidcLogin, discoverRelyingParty, createOidcSessionCheck } from "./domain/oidc-login/index.js";
import { registerEventStreamRoute } from "./edges/sse/events-sse.js";
import { attachEventsWebSocket, EVENTS_WS_PATH } from "./edges/ws/events-ws.js";
import { attachAttachWebSocket, attachProof, ATTACH_PATHS, refuseUnknownUpgrades } from "./edges/attach/attach-ws.js";
import type { Store } from "./store/store.js";
import { registerMetricsRoutes } from "./edges/metrics-routes.js";
import { createTowerMetrics, type TowerMetrics } from "./metrics/tower-metrics.js";

/** The tower's services, as Connect, gRPC and gRPC-Web serve them and reflection lists them. */
const TOWER_SERVICES = [
  WorkService,
  NodeService,
  AgentService,
  AuthService,
  EventService,
  AiService,
  ToolService,
  SecretService,
  ApprovalService,
  WebhookService,
];

export { SESSION_COOKIE };

export interface TowerServices {
  auth: Auth;
  work: Work;
  fleet: FleetService;
  secrets: SecretServiceImpl;
  ai: AiServiceImpl;
  approvals: ApprovalServiceImpl;
  webhooks: WebhookServiceImpl;
  /** sends the webhooks' deliveries in the background (tower/domain/webhooks/webhook-dispatcher.ts) */
  webhookDispatcher: WebhookDispatcher;
}

export interface Tower {
  app: FastifyInstance;
  deps: Deps;
  services: TowerServices;
  /** Every HTTP route served (method and path pattern), in registration order. */
  routes: readonly { method: string; url: string }[];
  /** The Prometheus registry behind /metrics (docs/metrics.md); main.ts serves it on EP_METRICS_LISTEN too. */
  metrics: TowerMetrics;
  /** Cross-replica delivery when the store is PostgreSQL (docs/deploy.md); undefined on SQLite. */
  replication?: Replication;
  /** Extension points for the other edges (events stream, AI, MCP, attach, console). */
  onClose(fn: () => Promise<void> | void): void;
  close(): Promise<void>;
}

export interface TowerOptions {
  config: TowerConfig;
  store: Store;
  clock?: Clock;
  log?: Logger;
  hub?: EventHub;
  /**
   * The environment the tower reads its settings from: AI console (EP_AI_*, PROVIDER*_API_KEY,
   * EP_CENTRAL_RUNTIME_DEFAULT, EP_CLAUDE_*), the secret-store key (EP_SECRET_KEY, _FILE,
   * _PREVIOUS), replicas (EP_REPLICA_ID, EP_REPLICA_URL) and webhooks (EP_WEBHOOK_*); default process.env.
   */
  env?: Record<string, string | undefined>;
}

/** The credential of an HTTP request (tower/edges/credential.ts). */
export function credentialOf(req: FastifyRequest): string | undefined {
  return credentialFrom(req.headers);
}

export async function createTower(opts: TowerOptions): Promise<Tower> {
  const { config, store } = opts;
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger("tower");
  const hub =
    opts.hub ??
    createEventHub({
      onListenerError: (err) =>
        log.error("event listener failed", {
          error: (err as Error)?.message ?? String(err),
          stack: (err as Error)?.stack,
        }),
    });
  const metrics = createTowerMetrics({ now: () => clock.now() });
  const deps: Deps = { store, clock, hub, log, limits: config.limits, meter: metrics.work };
  const closers: (() => Promise<void> | void)[] = [];
  const env = opts.env ?? process.env;

  // several replicas on one PostgreSQL database: events and link commands cross between them
  const shared = replicatedStore(store);
  const replication = shared
    ? await startReplication({ store: shared, hub, log, clock }, { replicaId: env.EP_REPLICA_ID || undefined })
    : undefined;

  const secretKeys = envKeySource(config.home, env);
  // the console's sign-in through the identity provider: discovered now, so a wrong issuer stops the start
  const oidcLogin = config.oidc?.login
    ? await startOidcLogin(
        { ...config.oidc, login: config.oidc.login },
        deps,
        () => secretKeys.keyring(),
        config.allowInsecure,
      )
    : undefined;
  const auth = createAuth(deps, {
    oidcSessions: oidcLogin?.sessions,
    oidc: config.oidc,
    issuer: config.publicUrl,
    keyRotationMs: config.keyRotationMs,
    keyring: () => secretKeys.keyring(),
    // replicas starting together make the bootstrap admin token once
    exclusive: replication && ((name, fn) => replication.exclusive(name, fn)),
  });
  const work = createWorkService(deps);
  const fleet = createFleetService(deps, auth, { towerUrl: config.publicUrl, replication, work });
  replication?.serveLinks(fleet, attachProof);
  // WorkService as served: MergeTask asks the task's node over its link (tower/domain/work/merge.ts)
  const workApi = { ...work, ...createTaskMerge(deps, fleet.deliver) };
  const authService = createAuthService(auth, deps, () => secretKeys.keyring());
  const secrets = createSecretService(deps, secretKeys);
  const approvals = createApprovalService(deps);
  // outgoing webhooks: queued from the committed event log and sent in the background
  const webhookDispatcher = createWebhookDispatcher({
    ...deps,
    keys: secretKeys,
    settings: readWebhookSettings(env),
    exclusive: replication && ((name, fn) => replication.tryExclusive(name, fn)),
  });
  const webhooks = createWebhookService(deps, secretKeys, () => webhookDispatcher.kick());
  // rotation: values under EP_SECRET_KEY_PREVIOUS are re-encrypted under the current key (docs/secrets.md)
  await secrets.reencrypt().catch((err: Error) => log.error("secret re-encryption failed", { error: err.message }));
  await resealWebhookSecrets(store, secretKeys, log).catch((err: Error) =>
    log.error("webhook secret re-sealing failed", { error: err.message }),
  );
  await auth
    .resealSigningKeys()
    .catch((err: Error) => log.error("signing key re-sealing failed", { error: err.message }));
  const eventStream = createEventStream(
    { ...deps, oidcSessions: oidcLogin?.sessions },
    { ...config.stream, retention: config.eventRetention },
  );
  const events = createEventService(deps, eventStream);
  const { ai, tools } = createAiConsole(deps, env, work, fleet);
  metrics.serve({
    counts: () => store.metricCounts(),
    lastEventId: () => store.lastEventId(),
    linkedNodes: () => fleet.linkedCount(),
    streamSubscribers: () => eventStream.stats().subscribers,
    replicationCursor: replication && (() => replication.cursor),
  });

  const app = createHttpApp(config, log);
  // every route the tower serves, for the authorization matrix (tests/authz-matrix.test.ts)
  const routes = collectRoutes(app);
  const restRoutes = [...workRoutes(workApi), ...webhookRoutes(webhooks), ...aiRoutes(ai)];
  // a role that may never call a door is refused before its body is read (door-roles.ts)
  gateDoors(app, TOWER_SERVICES, restRoutes);
  app.addHook("onRequest", async (req) => {
    if (isPublic(req.url, req.method)) return;
    // a WebSocket that cannot send headers may carry a ticket instead (attach, console)
    req.caller = await auth.authenticate(credentialOf(req));
  });
  handleErrors(app, config.bodyLimit, log, routes);
  registerHealthRoutes(app, () => store.lastEventId());
  registerMetricsRoutes(app, metrics);
  app.get("/.well-known/jwks.json", async () => auth.jwks());
  registerSessionRoutes(app, auth, clock, Boolean(config.tls));
  registerOidcRoutes(app, oidcLogin?.login(auth), {
    secure: Boolean(config.tls) || config.publicUrl.startsWith("https:"),
    log,
    clock,
  });

  registerRestRoutes(app, workRoutes(workApi));
  registerRestRoutes(app, webhookRoutes(webhooks));
  registerAiRoutes(app, ai);
  // the REST surface described (OpenAPI 3.1) from the same route tables and message descriptors
  let openapi: Record<string, unknown> | undefined;
  app.get("/openapi.json", async () => (openapi ??= buildOpenApi(restRoutes, "0.1.0")));
  registerMcpRoutes(app, tools);
  registerConsoleRoutes(app);
  registerEventStreamRoute(app, eventStream, clock);
  const eventsWs = attachEventsWebSocket(app, { stream: eventStream, auth, clock, log });
  const attachRelay: AttachRelay = replication
    ? {
        isLinked: (n) => replication.linked(n),
        send: (n, m) => replication.send(n, m),
        proof: (n, id) => replication.proof(n, id),
      }
    : localAttachRelay(fleet);
  const attachWs = attachAttachWebSocket(app, {
    admission: createAttachAdmission({ auth, store, relay: attachRelay, log }),
    relay: attachRelay,
    clock,
    log,
    replicaUrl: env.EP_REPLICA_URL,
  });
  refuseUnknownUpgrades(app, [EVENTS_WS_PATH, ...ATTACH_PATHS]);

  // Connect, gRPC and gRPC-Web for every service, each implemented over its domain object
  // (serviceImpl: the compiler checks the object against the service); plain Connect unary calls
  // take a lane of their own over the same implementations (unary-lane.ts); reflection; EP's
  // error shapes for what connect-es refuses itself
  const services = (router: ConnectRouter) => {
    router.service(WorkService, serviceImpl(WorkService, workApi, log));
    router.service(NodeService, serviceImpl(NodeService, fleet, log));
    router.service(AgentService, serviceImpl(AgentService, fleet, log));
    router.service(AuthService, serviceImpl(AuthService, authService, log));
    router.service(EventService, serviceImpl(EventService, events, log));
    router.service(AiService, serviceImpl(AiService, ai, log));
    router.service(ToolService, serviceImpl(ToolService, tools, log));
    router.service(SecretService, serviceImpl(SecretService, secrets, log));
    router.service(ApprovalService, serviceImpl(ApprovalService, approvals, log));
    router.service(WebhookService, serviceImpl(WebhookService, webhooks, log));
  };
  await registerUnaryLane(app, services, config.bodyLimit);
  await app.register(fastifyConnectPlugin, {
    jsonOptions: { ignoreUnknownFields: false },
    readMaxBytes: config.bodyLimit,
    contextValues: (req: FastifyRequest) => createContextValues().set(kCaller, req.caller as Caller | undefined),
    routes: (router) => {
      services(router);
      bindReflection(router, TOWER_SERVICES, [file_ep_errors_v1_errors]);
      mendProtocolErrors(router.handlers, config.bodyLimit);
    },
  });

  // the sweeper: expired leases go back to the queue (or fail past max_attempts); approved AI
  // actions that never got an outcome (the tower stopped mid-run) are marked interrupted
  const stopSweeper = startSweeper({
    clock,
    log,
    everyMs: config.sweepMs,
    firstAfterMs: config.limits.leaseMs,
    work,
    ai,
    replication,
  });

  let closing: Promise<void> | undefined;
  return {
    app,
    deps,
    routes,
    metrics,
    services: { auth, work, fleet, secrets, ai, approvals, webhooks, webhookDispatcher },
    replication,
    onClose: (fn) => closers.push(fn),
    close() {
      closing ??= closeOnce();
      return closing;
    },
  };

  async function closeOnce(): Promise<void> {
    stopSweeper();
    await webhookDispatcher.close();
    work.close();
    fleet.close();
    await eventStream.close();
    await eventsWs.close();
    await attachWs.close();
    for (const fn of closers.reverse()) await fn();
    // forceCloseConnections "idle" closes the connections idle when close starts; a keep-alive
    // connection whose request is answered after that (a released long poll, a claim awaiting its
    // group commit) would keep the server open until the client drops it: close those as they idle.
    const idleCloser = setInterval(() => app.server.closeIdleConnections(), 20);
    await app.close().finally(() => clearInterval(idleCloser));
    await replication?.close();
    await store.close();
  }
}

/**
 * Runs the sweep every `everyMs`, the first one a lease term after the tower started
 * (`firstAfterMs`): while it was down no holder could renew its lease, and its nodes report
 * their outcomes once it answers again. With several replicas one sweeps at a time (the others
 * skip the round).
 */
function startSweeper(o: {
  clock: Clock;
  log: Logger;
  everyMs: number;
  firstAfterMs: number;
  work: Work;
  ai: AiServiceImpl;
  replication?: Replication;
}): () => void {
  const { clock, log, work, ai, replication } = o;
  let sweeping = false;
  const sweepAll = async () => {
    await work.sweepExpiredLeases();
    const interrupted = await ai.sweepInterruptedActions();
    if (interrupted) log.warn("approved AI actions without an outcome marked interrupted", { count: interrupted });
  };
  let timer = clock.setTimeout(
    function sweep() {
      if (!sweeping) {
        sweeping = true;
        (replication ? replication.tryExclusive("sweep", sweepAll) : sweepAll())
          .catch((err: Error) => log.warn("sweep failed", { error: err.message }))
          .finally(() => (sweeping = false));
      }
      timer = clock.setTimeout(sweep, o.everyMs);
    },
    Math.max(o.everyMs, o.firstAfterMs),
  );
  return () => clock.clearTimeout(timer);
}

/**
 * The console's sign-in through the identity provider: the relying party (discovery now), the
 * session re-check auth needs, and the sign-in itself once auth exists.
 */
async function startOidcLogin(
  cfg: OidcConfig & { login: OidcLoginConfig },
  deps: Deps,
  keyring: () => SecretKeyring | undefined,
  allowInsecure: boolean,
) {
  const rp = await discoverRelyingParty(cfg, { allowInsecure });
  const sessions = createOidcSessionCheck({
    rp,
    clock: deps.clock,
    log: deps.log,
    keyring,
    recheckMs: cfg.login.recheckMs,
    roleClaim: cfg.roleClaim,
  });
  deps.log.info("console sign-in through the identity provider", {
    issuer: cfg.issuer,
    client_id: cfg.login.clientId,
    redirect_uri: cfg.login.redirectUri,
  });
  return {
    sessions,
    login: (auth: Auth) =>
      createOidcLogin(cfg, {
        clock: deps.clock,
        log: deps.log,
        keyring,
        rp,
        sessions,
        createSession: (caller, oidc) => auth.createSession(caller, oidc),
      }),
  };
}

/**
 * The AI console: planner and settings from the environment (a bad value is a startup error
 * naming the variable), the tool executor over the work and fleet services, sessions, tools.
 */
function createAiConsole(deps: Deps, env: Record<string, string | undefined>, work: Work, fleet: FleetService) {
  const planner = createPlanner(env);
  const settings = readAiSettings(env);
  const executor = createToolExecutor({ deps, work, fleet });
  deps.log.info("AI console ready", {
    planner: planner.name,
    model: planner.model ?? "",
    runtime_default: settings.centralRuntimeDefault ?? "",
  });
  return { ai: createAiService(deps, { planner, settings, executor }), tools: createToolService(deps, executor) };
}
