// Assembles the tower: store, domain services, and the edges over them.
import type { AiService as AiServiceImpl } from "./domain/ai/sessions.js";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { createContextValues } from "@connectrpc/connect";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type RequestListener } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { iso, systemClock, type Clock } from "../common/clock.js";
import { EpError } from "../common/errors.js";
import { createLogger, type Logger } from "../common/log.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { SecretService } from "../gen/ep/tower/v1/ai_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import type { TowerConfig } from "./config.js";
import { createAuth, type Auth } from "./domain/auth.js";
import { credentialOf as credentialFrom, readCookie, SESSION_COOKIE } from "./edges/credential.js";
import { createAuthService } from "./domain/auth-service.js";
import { principalOf, type Caller } from "./domain/caller.js";
import type { Deps } from "./domain/deps.js";
import { createEventHub, type EventHub } from "./domain/event-hub.js";
import { createEventService } from "./domain/events.js";
import { createEventStream } from "./domain/event-stream.js";
import { createFleetService, type FleetService } from "./domain/fleet.js";
import { replicatedStore, startReplication, type Replication } from "./domain/replication.js";
import { createSecretService, envKeySource, type SecretServiceImpl } from "./domain/secrets.js";
import { createWorkService, type WorkService as Work } from "./domain/work.js";
import { AiService, ToolService } from "../gen/ep/tower/v1/ai_pb.js";
import { createPlanner } from "./domain/ai/create-planner.js";
import { createAiService } from "./domain/ai/sessions.js";
import { readAiSettings } from "./domain/ai/settings.js";
import { createToolExecutor } from "./domain/tools/executor.js";
import { createToolService } from "./domain/tools/tool-service.js";
import { registerAiRoutes } from "./edges/ai/ai-routes.js";
import { registerMcpRoutes } from "./edges/mcp/mcp-routes.js";
import { kCaller } from "./edges/caller-key.js";
import { mendProtocolErrors } from "../common/connect-errors.js";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import { bindService } from "./edges/connect/bind.js";
import { registerRestRoutes, workRoutes } from "./edges/rest/work-routes.js";
import { registerConsoleRoutes } from "./edges/ui/console-routes.js";
import { registerEventStreamRoute } from "./edges/sse/events-sse.js";
import { attachEventsWebSocket, EVENTS_WS_PATH } from "./edges/ws/events-ws.js";
import { attachAttachWebSocket, attachProof, ATTACH_PATHS, refuseUnknownUpgrades } from "./edges/attach/attach-ws.js";
import type { Store } from "./store/store.js";

export { SESSION_COOKIE };

export interface TowerServices {
  auth: Auth;
  work: Work;
  fleet: FleetService;
  secrets: SecretServiceImpl;
  ai: AiServiceImpl;
}

export interface Tower {
  app: FastifyInstance;
  deps: Deps;
  services: TowerServices;
  /** Every HTTP route served (method and path pattern), in registration order. */
  routes: readonly { method: string; url: string }[];
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
   * _PREVIOUS) and replicas (EP_REPLICA_ID, EP_REPLICA_URL); default process.env.
   */
  env?: Record<string, string | undefined>;
}

/** Paths served without a bearer token. */
/** A Connect / gRPC-Web procedure path: /ep.<package>.<Service>/<Method>. */
const CONNECT_PATH = /^\/ep\.[a-z0-9.]+\.[A-Za-z]+\/[A-Za-z]+$/;

function isPublic(url: string, method: string): boolean {
  const path = url.split("?", 1)[0];
  return (
    path === "/healthz" ||
    path === "/readyz" ||
    path === "/ui" ||
    path.startsWith("/ui/") ||
    path === "/.well-known/jwks.json" ||
    (path === "/auth/session" && method !== "GET")
  );
}

/** The credential of an HTTP request (tower/edges/credential.ts). */
export function credentialOf(req: FastifyRequest): string | undefined {
  return credentialFrom(req.headers);
}

export async function createTower(opts: TowerOptions): Promise<Tower> {
  const { config, store } = opts;
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger("tower");
  const hub = opts.hub ?? createEventHub({ onListenerError: (err) => log.error("event listener failed", { error: (err as Error)?.message ?? String(err), stack: (err as Error)?.stack }) });
  const deps: Deps = { store, clock, hub, log, limits: config.limits };
  const closers: (() => Promise<void> | void)[] = [];
  const env = opts.env ?? process.env;

  // several replicas on one PostgreSQL database: events and link commands cross between them
  const shared = replicatedStore(store);
  const replication = shared ? await startReplication({ store: shared, hub, log, clock }, { replicaId: env.EP_REPLICA_ID || undefined }) : undefined;

  const secretKeys = envKeySource(config.home, env);
  const auth = createAuth(deps, {
    oidc: config.oidc,
    issuer: config.publicUrl,
    keyRotationMs: config.keyRotationMs,
    keyring: () => secretKeys.keyring(),
    // replicas starting together make the bootstrap admin token once
    exclusive: replication && ((name, fn) => replication.exclusive(name, fn)),
  });
  const work = createWorkService(deps);
  const fleet = createFleetService(deps, auth, { towerUrl: config.publicUrl, replication });
  replication?.serveLinks(fleet, attachProof);
  const authService = createAuthService(auth);
  const secrets = createSecretService(deps, secretKeys);
  // rotation: values under EP_SECRET_KEY_PREVIOUS are re-encrypted under the current key (docs/secrets.md)
  await secrets.reencrypt().catch((err: Error) => log.error("secret re-encryption failed", { error: err.message }));
  await auth.resealSigningKeys().catch((err: Error) => log.error("signing key re-sealing failed", { error: err.message }));
  const eventStream = createEventStream(deps, { ...config.stream, retention: config.eventRetention });
  const events = createEventService(deps, eventStream);
  // the AI console: planner and settings from the environment (a bad value is a startup error
  // naming the variable), the tool executor over the work and fleet services, sessions, tools
  const planner = createPlanner(env);
  const aiSettings = readAiSettings(env);
  const executor = createToolExecutor({ deps, work, fleet });
  const ai = createAiService(deps, { planner, settings: aiSettings, executor });
  const tools = createToolService(deps, executor);
  log.info("AI console ready", { planner: planner.name, model: planner.model ?? "", runtime_default: aiSettings.centralRuntimeDefault ?? "" });

  // Slow clients (a header line every few seconds, a body at a byte a second) are cut off: the
  // headers must arrive within headersTimeoutMs and the whole request within requestTimeoutMs,
  // checked every second. Responses may last (event streams, links, long polls): only receiving
  // the request is bounded.
  const serverOptions = {
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
  };
  const app = Fastify({
    logger: false,
    bodyLimit: config.bodyLimit,
    serverFactory: (handler: RequestListener) =>
      config.tls
        ? createHttpsServer({ ...serverOptions, cert: readFileSync(config.tls.cert), key: readFileSync(config.tls.key) }, handler)
        : createHttpServer(serverOptions, handler),
    forceCloseConnections: "idle",
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
  } as Parameters<typeof Fastify>[0]) as unknown as FastifyInstance;

  // an empty body sent as JSON (curl -X POST -H 'content-type: application/json' …/retry) is no
  // body, not invalid JSON: REST routes whose request has no required field accept it
  app.addHook("onRequest", async (req) => {
    if (req.headers["content-length"] === "0" && String(req.headers["content-type"] ?? "").startsWith("application/json") && !CONNECT_PATH.test(req.url.split("?", 1)[0])) {
      delete req.headers["content-type"];
    }
  });

  // every route the tower serves, for the authorization matrix (tests/authz-matrix.test.ts)
  const routes: { method: string; url: string }[] = [];
  app.addHook("onRoute", (r) => {
    for (const method of [r.method].flat()) if (method !== "HEAD") routes.push({ method, url: r.url });
  });

  app.addHook("onRequest", async (req) => {
    if (isPublic(req.url, req.method)) return;
    // a WebSocket that cannot send headers may carry a ticket instead (attach, console)
    req.caller = await auth.authenticate(credentialOf(req));
  });

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    let ep: EpError;
    if (err instanceof EpError) {
      ep = err;
      if (ep.code === "internal" && ep.cause instanceof Error) log.error("request failed", { method: req.method, url: req.url.split("?")[0], error: ep.cause.message, stack: ep.cause.stack });
    } else if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") ep = new EpError("payload_too_large", `the body is larger than ${config.bodyLimit} bytes`);
    else if (err.code === "FST_ERR_CTP_INVALID_JSON_BODY" || err instanceof SyntaxError || err.code === "FST_ERR_CTP_EMPTY_JSON_BODY") {
      ep = new EpError("invalid_json", `the body is not valid JSON: ${err.message}`);
    } else if (err.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") ep = new EpError("invalid_argument", "send the body as Content-Type: application/json");
    else if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) ep = new EpError("invalid_argument", err.message);
    else {
      log.error("request failed", { method: req.method, url: req.url.split("?")[0], error: err.message, stack: err.stack });
      ep = new EpError("internal");
    }
    // a Connect or gRPC-Web call refused before its handler (credentials, body limits) gets
    // the error in its own protocol, so every generated client reads the code and message
    const path = req.url.split("?", 1)[0];
    if (CONNECT_PATH.test(path)) {
      const ce = ep.toConnectError();
      const type = String(req.headers["content-type"] ?? "");
      void reply.header("ep-error-code", ep.code);
      if (type.startsWith("application/grpc-web")) {
        void reply
          .code(200)
          .header("content-type", type.includes("text") ? "application/grpc-web-text+proto" : "application/grpc-web+proto")
          .header("grpc-status", String(ce.code))
          .header("grpc-message", encodeURIComponent(ep.message))
          .send("");
        return;
      }
      void reply.code(codeToHttpStatus(ce.code)).type("application/json").send({ code: codeToString(ce.code), message: ep.message });
      return;
    }
    void reply.code(ep.httpStatus).type("application/json").send(ep.toJSON());
  });

  app.setNotFoundHandler((req, reply) => {
    const ep = new EpError("route_not_found", `no route ${req.method} ${req.url.split("?")[0]}`);
    void reply.code(404).send(ep.toJSON());
  });

  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    try {
      await store.lastEventId();
      return { status: "ready" };
    } catch (err) {
      return reply.code(503).send(new EpError("unavailable", `the store is not answering: ${(err as Error).message}`).toJSON());
    }
  });
  app.get("/.well-known/jwks.json", async () => auth.jwks());

  // Console login: a one-time ticket (or a token) becomes an HttpOnly session cookie.
  app.post("/auth/session", async (req, reply) => {
    const body = (req.body ?? {}) as { ticket?: unknown; token?: unknown };
    let source: Caller;
    if (typeof body.ticket === "string") source = await auth.redeemTicket(body.ticket, "login");
    else if (typeof body.token === "string") source = await auth.authenticate(body.token);
    else throw new EpError("invalid_argument", "send {\"ticket\": …} or {\"token\": …}", { field: "ticket" });
    // the session is bound to the credential it came from: it ends with it, never outlives it
    const session = await auth.createSession(source);
    const secure = config.tls ? "; Secure" : "";
    const maxAge = Math.max(1, Math.floor((session.expiresMs - clock.now()) / 1000));
    void reply.header("set-cookie", `${SESSION_COOKIE}=${encodeURIComponent(session.secret)}; HttpOnly; SameSite=Strict; Path=/${secure}; Max-Age=${maxAge}`);
    return { role: source.role, subject: principalOf(source), expires_at: iso(session.expiresMs) };
  });
  app.get("/auth/session", async (req) => ({ role: req.caller!.role, subject: req.caller!.principal ?? req.caller!.subject }));
  app.delete("/auth/session", async (req, reply) => {
    const cookie = readCookie(req.headers.cookie, SESSION_COOKIE);
    if (cookie) await auth.endSession(cookie);
    void reply.header("set-cookie", `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`);
    return { ok: true };
  });

  registerRestRoutes(app, workRoutes(work));
  registerAiRoutes(app, ai);
  registerMcpRoutes(app, tools);
  registerConsoleRoutes(app);
  registerEventStreamRoute(app, eventStream, clock);
  const eventsWs = attachEventsWebSocket(app, { stream: eventStream, auth, store, clock, log });
  const attachWs = attachAttachWebSocket(app, {
    auth,
    store,
    fleet,
    clock,
    log,
    replicaUrl: env.EP_REPLICA_URL,
    relay: replication && { isLinked: (n) => replication.linked(n), send: (n, m) => replication.send(n, m), proof: (n, id) => replication.proof(n, id) },
  });
  refuseUnknownUpgrades(app, [EVENTS_WS_PATH, ...ATTACH_PATHS]);

  await app.register(fastifyConnectPlugin, {
    jsonOptions: { ignoreUnknownFields: false },
    readMaxBytes: config.bodyLimit,
    contextValues: (req: FastifyRequest) => createContextValues().set(kCaller, req.caller as Caller | undefined),
    routes: (router) => {
      bindService(router, WorkService, work, log);
      bindService(router, NodeService, fleet, log);
      bindService(router, AgentService, fleet, log);
      bindService(router, AuthService, authService, log);
      bindService(router, EventService, events, log);
      bindService(router, AiService, ai, log);
      bindService(router, ToolService, tools, log);
      bindService(router, SecretService, secrets, log);
      mendProtocolErrors(router.handlers, config.bodyLimit);
    },
  });

  // the sweeper: expired leases go back to the queue (or fail past max_attempts); approved AI
  // actions that never got an outcome (the tower stopped mid-run) are marked interrupted
  let sweeping = false;
  let sweepTimer = clock.setTimeout(function sweep() {
    if (!sweeping) {
      sweeping = true;
      // with several replicas one sweeps at a time (the others skip this round)
      const sweepAll = async () => {
        await work.sweepExpiredLeases();
        const interrupted = await ai.sweepInterruptedActions();
        if (interrupted) log.warn("approved AI actions without an outcome marked interrupted", { count: interrupted });
      };
      (replication ? replication.tryExclusive("sweep", sweepAll) : sweepAll())
        .catch((err: Error) => log.warn("sweep failed", { error: err.message }))
        .finally(() => (sweeping = false));
    }
    sweepTimer = clock.setTimeout(sweep, config.sweepMs);
  }, config.sweepMs);

  let closing: Promise<void> | undefined;
  return {
    app,
    deps,
    routes,
    services: { auth, work, fleet, secrets, ai },
    replication,
    onClose: (fn) => closers.push(fn),
    close() {
      closing ??= closeOnce();
      return closing;
    },
  };

  async function closeOnce(): Promise<void> {
    clock.clearTimeout(sweepTimer);
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
