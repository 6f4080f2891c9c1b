// The tower's HTTP server: Fastify on node:http (or https with EP_TLS_CERT), slow-client bounds,
// the one error handler (every error in its caller's protocol: Connect, gRPC-Web or REST JSON),
// health and readiness, and the console's login session routes.
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type RequestListener } from "node:http";
import type { OutgoingHttpHeaders, ServerHttp2Stream } from "node:http2";
import { createServer as createHttpsServer } from "node:https";
import { iso, type Clock } from "../../common/clock.js";
import { rpcErrorResponse } from "../../common/connect-errors.js";
import { EpError } from "../../common/errors.js";
import { AsyncResource } from "node:async_hooks";
import { asyncContextIsCheap, pinoOf, REQUEST_ID_KEY, requestScope, type Logger } from "../../common/log.js";
import type { TowerConfig } from "../config.js";
import type { Auth } from "../domain/auth/index.js";
import { principalOf, type Caller } from "../domain/caller.js";
import { readCookie, SESSION_COOKIE } from "./credential.js";
import { REFLECTION_PATHS } from "./connect/reflection.js";
import { serveHttp2Too } from "./http2.js";
import { lazyRequestLogger } from "./request-logger.js";

/** A Connect, gRPC or gRPC-Web procedure path: /<package>.<Service>/<Method>. */
const RPC_PATH = /^\/[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\.[A-Z][A-Za-z0-9]*\/[A-Z][A-Za-z0-9]*$/;

function sendRpcError(reply: FastifyReply, contentType: string | undefined, ep: EpError): void {
  const e = rpcErrorResponse(contentType ?? "", ep);
  // gRPC over HTTP/2 reads a status in headers only from a trailers-only response: one HEADERS
  // frame that ends the stream (a HEADERS frame, then an empty DATA frame, is "no status")
  const stream = (reply.raw as unknown as { stream?: ServerHttp2Stream }).stream;
  if (stream && e.body.length === 0) {
    const headers = { ...reply.getHeaders(), ":status": e.status } as OutgoingHttpHeaders;
    e.header.forEach((v, k) => (headers[k] = v));
    reply.hijack();
    stream.respond(headers, { endStream: true });
    return;
  }
  void reply.code(e.status);
  e.header.forEach((v, k) => void reply.header(k, v));
  void reply.send(Buffer.from(e.body));
}

/** Paths served without a bearer token. */
export function isPublic(url: string, method: string): boolean {
  // the API's own paths first: every call asks, and none of them is public
  if (url.startsWith("/v1/") || url.startsWith("/ep.")) return false;
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  return (
    path === "/healthz" ||
    path === "/readyz" ||
    path === "/ui" ||
    path.startsWith("/ui/") ||
    // every well-known document is public: one the tower does not serve is a 404, never a 401
    // (an MCP client that gets 401 for /.well-known/oauth-protected-resource believes EP acts as
    // an OAuth resource and starts an OAuth flow instead of reporting the refused token)
    path.startsWith("/.well-known/") ||
    path === "/openapi.json" ||
    REFLECTION_PATHS.includes(path) ||
    (path === "/auth/session" && method !== "GET") ||
    // the sign-in through the identity provider: the browser has no credential yet (edges/ui/oidc-routes.ts)
    path === "/auth/oidc" ||
    path.startsWith("/auth/oidc/")
  );
}

/** The Fastify app on the configured server, with the request bounds. */
/**
 * The tower's fastify app on `log`'s pino (its own lines carry the request id as req_id). No line
 * per request: a request's URL may carry a ticket (a WebSocket cannot send headers).
 */
export function createHttpApp(config: TowerConfig, log: Logger): FastifyInstance {
  // Slow clients (a header line every few seconds, a body at a byte a second) are cut off: the
  // headers must arrive within headersTimeoutMs and the whole request within requestTimeoutMs,
  // checked every second. Responses may last (event streams, links, long polls): only receiving
  // the request is bounded.
  const serverOptions = {
    // an idle kept-alive connection outlives the clients' own idle limit (Node's agents close at
    // 5 s, the server's default too): the client closes it, so it never writes a call into a
    // socket the tower closed at the same moment (EPIPE / ECONNRESET). Fastify's own default.
    keepAliveTimeout: 72_000,
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, config.headersTimeoutMs),
  };
  const pinoLog = pinoOf(log);
  const app = Fastify({
    ...(pinoLog
      ? {
          loggerInstance: pinoLog,
          logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: REQUEST_ID_KEY }),
          childLoggerFactory: lazyRequestLogger,
        }
      : { logger: false }),
    bodyLimit: config.bodyLimit,
    // HTTP/1.1 and HTTP/2 on the one port (h2c by prior knowledge; under TLS, ALPN)
    serverFactory: (handler: RequestListener) => {
      if (!config.tls) {
        const server = createHttpServer(serverOptions, handler);
        serveHttp2Too(server, handler, "connection", config.headersTimeoutMs);
        return server;
      }
      const tls = {
        cert: readFileSync(config.tls.cert),
        key: readFileSync(config.tls.key),
        ALPNProtocols: ["h2", "http/1.1"],
      };
      const server = createHttpsServer({ ...serverOptions, ...tls }, handler);
      serveHttp2Too(server, handler, "secureConnection", config.headersTimeoutMs);
      return server;
    },
    forceCloseConnections: "idle",
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
  } as Parameters<typeof Fastify>[0]) as unknown as FastifyInstance;

  // the request scope costs every promise a hook where AsyncLocalStorage is not built on
  // AsyncContextFrame (Node 20 and 22): there it is entered only at debug level, and a request's
  // own lines (fastify's, the failed-request line) name it by req_id either way
  if (asyncContextIsCheap() || pinoOf(log)?.isLevelEnabled("debug")) serveInRequestScope(app);

  // an empty body sent as JSON (curl -X POST -H 'content-type: application/json' …/retry) is no
  // body, not invalid JSON: REST routes whose request has no required field accept it
  app.addHook("onRequest", async (req) => {
    if (
      req.headers["content-length"] === "0" &&
      String(req.headers["content-type"] ?? "").startsWith("application/json") &&
      !RPC_PATH.test(req.url.split("?", 1)[0])
    ) {
      delete req.headers["content-type"];
    }
  });
  return app;
}

/** Every route the app serves (method and path pattern), filled as routes are registered. */
export function collectRoutes(app: FastifyInstance): { method: string; url: string }[] {
  const routes: { method: string; url: string }[] = [];
  app.addHook("onRoute", (r) => {
    for (const method of [r.method].flat()) if (method !== "HEAD") routes.push({ method, url: r.url });
  });
  return routes;
}

/** Errors in the caller's protocol; unknown routes as route_not_found. */
export function handleErrors(
  app: FastifyInstance,
  bodyLimit: number,
  log: Logger,
  routes: readonly { method: string; url: string }[],
): void {
  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    let ep: EpError;
    if (err instanceof EpError) {
      ep = err;
      if (ep.code === "internal" && ep.cause instanceof Error)
        log.error("request failed", {
          [REQUEST_ID_KEY]: req.id,
          method: req.method,
          url: req.url.split("?")[0],
          error: ep.cause.message,
          stack: ep.cause.stack,
        });
    } else if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE")
      ep = new EpError("payload_too_large", `the body is larger than ${bodyLimit} bytes`);
    else if (
      err.code === "FST_ERR_CTP_INVALID_JSON_BODY" ||
      err instanceof SyntaxError ||
      err.code === "FST_ERR_CTP_EMPTY_JSON_BODY"
    ) {
      ep = new EpError("invalid_json", `the body is not valid JSON: ${err.message}`);
    } else if (err.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE")
      ep = new EpError("invalid_argument", "send the body as Content-Type: application/json");
    else if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)
      ep = new EpError("invalid_argument", err.message);
    else {
      log.error("request failed", {
        [REQUEST_ID_KEY]: req.id,
        method: req.method,
        url: req.url.split("?")[0],
        error: err.message,
        stack: err.stack,
      });
      ep = new EpError("internal");
    }
    // RFC 6750: a refused credential names the scheme (and, when one was sent, that it was not valid)
    if (ep.httpStatus === 401) {
      const sent = Boolean(req.headers.authorization || req.headers.cookie || ep.code !== "unauthenticated");
      void reply.header("www-authenticate", `Bearer realm="ep"${sent ? `, error="invalid_token"` : ""}`);
    }
    // an RPC refused before its handler (credentials, body limits) gets the error in its own
    // protocol, so every generated client reads the status and EP's ErrorDetail
    if (RPC_PATH.test(req.url.split("?", 1)[0])) return void sendRpcError(reply, req.headers["content-type"], ep);
    void reply.code(ep.httpStatus).type("application/json").send(ep.toJSON());
  });

  // a known path asked with another method: 405 with Allow (OPTIONS: 204 with Allow); else 404
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?", 1)[0];
    // a procedure this server does not serve: unimplemented, in the caller's protocol
    if (RPC_PATH.test(path))
      return void sendRpcError(
        reply,
        req.headers["content-type"],
        new EpError("procedure_not_found", `no procedure ${path.slice(1)}`),
      );
    const allow = allowedMethods(routes, path);
    if (allow.length && req.method === "OPTIONS")
      return void reply
        .code(204)
        .header("allow", [...allow, "OPTIONS"].join(", "))
        .send();
    if (allow.length) {
      const ep = new EpError(
        "method_not_allowed",
        `${path} does not serve ${req.method}; it serves ${allow.join(", ")}`,
      );
      return void reply.code(405).header("allow", allow.join(", ")).send(ep.toJSON());
    }
    const ep = new EpError("route_not_found", `no route ${req.method} ${path}`);
    void reply.code(404).send(ep.toJSON());
  });
}

/** `ready` answers once the tower can serve (its store answers a query), or throws why not. */
const SCOPE = Symbol("request scope");

/**
 * Runs each request's hooks and handler in requestScope (its id), so every line logged while
 * serving it carries the id. Reading the body leaves the scope (the socket's events run in
 * theirs), so it is entered again before validation, as @fastify/request-context does.
 */
function serveInRequestScope(app: FastifyInstance): void {
  type Scoped = FastifyRequest & { [SCOPE]?: AsyncResource };
  app.addHook("onRequest", (req, _reply, done) => {
    requestScope.run(req.id, () => {
      (req as Scoped)[SCOPE] = new AsyncResource("ep-request");
      done();
    });
  });
  app.addHook("preValidation", (req, _reply, done) => {
    const scope = (req as Scoped)[SCOPE];
    if (scope) scope.runInAsyncScope(done, req.raw);
    else done();
  });
}

export function registerHealthRoutes(app: FastifyInstance, ready: () => Promise<unknown>): void {
  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    try {
      await ready();
      return { status: "ready" };
    } catch (err) {
      return reply
        .code(503)
        .send(new EpError("unavailable", `the store is not answering: ${(err as Error).message}`).toJSON());
    }
  });
}

/** Console login: a one-time ticket (or a token) becomes an HttpOnly session cookie bound to it. */
export function registerSessionRoutes(app: FastifyInstance, auth: Auth, clock: Clock, tls: boolean): void {
  app.post("/auth/session", async (req, reply) => {
    const body = (req.body ?? {}) as { ticket?: unknown; token?: unknown };
    let source: Caller;
    if (typeof body.ticket === "string") source = await auth.redeemTicket(body.ticket, "login");
    else if (typeof body.token === "string") source = await auth.authenticate(body.token);
    else throw new EpError("invalid_argument", 'send {"ticket": …} or {"token": …}', { field: "ticket" });
    // the session is bound to the credential it came from: it ends with it, never outlives it
    const session = await auth.createSession(source);
    const secure = tls ? "; Secure" : "";
    const maxAge = Math.max(1, Math.floor((session.expiresMs - clock.now()) / 1000));
    void reply.header(
      "set-cookie",
      `${SESSION_COOKIE}=${encodeURIComponent(session.secret)}; ` +
        `HttpOnly; SameSite=Strict; Path=/${secure}; Max-Age=${maxAge}`,
    );
    return { role: source.role, subject: principalOf(source), expires_at: iso(session.expiresMs) };
  });
  app.get("/auth/session", async (req) => ({
    role: req.caller!.role,
    subject: req.caller!.principal ?? req.caller!.subject,
    ...(req.caller!.name ? { name: req.caller!.name } : {}),
  }));
  app.delete("/auth/session", async (req, reply) => {
    const cookie = readCookie(req.headers.cookie, SESSION_COOKIE);
    if (cookie) await auth.endSession(cookie);
    void reply.header("set-cookie", `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`);
    return { ok: true };
  });
}

/** The methods the app serves at a concrete path (route patterns: `:param` one segment, `*` the rest). */
function allowedMethods(routes: readonly { method: string; url: string }[], path: string): string[] {
  const p = path.length > 1 ? path.replace(/\/+$/, "") : path;
  const methods = new Set<string>();
  for (const r of routes) if (patternOf(r.url).test(p)) methods.add(r.method);
  if (methods.has("GET")) methods.add("HEAD");
  return [...methods].sort();
}

const patterns = new Map<string, RegExp>();
function patternOf(url: string): RegExp {
  let re = patterns.get(url);
  if (!re) {
    const body = url
      .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
      .replace(/:[A-Za-z_][A-Za-z0-9_]*/g, "[^/]+")
      .replace(/\*/g, ".*");
    patterns.set(url, (re = new RegExp(`^${body}$`)));
  }
  return re;
}
