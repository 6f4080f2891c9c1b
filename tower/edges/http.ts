// The tower's HTTP server: Fastify on node:http (or https with EP_TLS_CERT), slow-client bounds,
// the one error handler (every error in its caller's protocol: Connect, gRPC-Web or REST JSON),
// health and readiness, and the console's login session routes.
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import Fastify, { type FastifyInstance } from "fastify";
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type RequestListener } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { iso, type Clock } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { TowerConfig } from "../config.js";
import type { Auth } from "../domain/auth.js";
import { principalOf, type Caller } from "../domain/caller.js";
import type { Store } from "../store/store.js";
import { readCookie, SESSION_COOKIE } from "./credential.js";

/** A Connect / gRPC-Web procedure path: /ep.<package>.<Service>/<Method>. */
const CONNECT_PATH = /^\/ep\.[a-z0-9.]+\.[A-Za-z]+\/[A-Za-z]+$/;

/** Paths served without a bearer token. */
export function isPublic(url: string, method: string): boolean {
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

/** The Fastify app on the configured server, with the request bounds. */
export function createHttpApp(config: TowerConfig): FastifyInstance {
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
export function handleErrors(app: FastifyInstance, bodyLimit: number, log: Logger): void {
  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    let ep: EpError;
    if (err instanceof EpError) {
      ep = err;
      if (ep.code === "internal" && ep.cause instanceof Error) log.error("request failed", { method: req.method, url: req.url.split("?")[0], error: ep.cause.message, stack: ep.cause.stack });
    } else if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") ep = new EpError("payload_too_large", `the body is larger than ${bodyLimit} bytes`);
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
}

export function registerHealthRoutes(app: FastifyInstance, store: Store): void {
  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    try {
      await store.lastEventId();
      return { status: "ready" };
    } catch (err) {
      return reply.code(503).send(new EpError("unavailable", `the store is not answering: ${(err as Error).message}`).toJSON());
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
    else throw new EpError("invalid_argument", "send {\"ticket\": …} or {\"token\": …}", { field: "ticket" });
    // the session is bound to the credential it came from: it ends with it, never outlives it
    const session = await auth.createSession(source);
    const secure = tls ? "; Secure" : "";
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
}
