// The REST routes that carry the work (submit, claim, complete, fail, heartbeat…: every POST
// route of the work table) served straight from node:http, before Fastify: the same credential
// check, body limit, JSON rules, route call (callRoute) and error shapes, without Fastify's
// per-request hooks, async resources and serializer (a quarter of the tower's CPU per task in
// bench/claim.ts). Anything out of the ordinary — another method, HTTP/2, a query string, an
// escaped or trailing-slash path, another media type, an empty body, a closing server — is
// left to Fastify, which answers it as it always did.
import type { DescMessage } from "@bufbuild/protobuf";
import type { IncomingMessage, ServerResponse } from "node:http";
import { EpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import type { Caller } from "../../domain/caller.js";
import { credentialOf } from "../credential.js";
import { epErrorOf, wwwAuthenticate, type Lane } from "../http.js";
import { callRoute, type RestRoute } from "./work-routes.js";

interface Entry {
  route: RestRoute<DescMessage, DescMessage>;
  /** the path's segments; ":name" is a parameter */
  parts: string[];
}

export interface FastLaneOptions {
  authenticate(credential: string | undefined): Promise<Caller>;
  bodyLimit: number;
  /** true once the server is closing: Fastify answers 503 then */
  closing(): boolean;
  log: Logger;
}

/** The lane, and how many requests it has answered (tests/rest-fast-lane.test.ts). */
export type FastLane = Lane & { readonly served: number };

export function restFastLane(routes: readonly RestRoute<DescMessage, DescMessage>[], o: FastLaneOptions): FastLane {
  const table: Entry[] = routes.filter((r) => r.method === "POST" && !r.query?.length).map((route) => ({ route, parts: route.url.split("/") }));
  let served = 0;
  const lane = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== "POST" || req.httpVersionMajor !== 1 || o.closing()) return false;
    const url = req.url ?? "";
    if (url.includes("?") || url.includes("%") || url.endsWith("/")) return false;
    const type = req.headers["content-type"];
    if (type !== "application/json" && type !== "application/json; charset=utf-8") return false;
    if (req.headers["content-length"] === "0" || req.headers.upgrade) return false;
    const found = match(table, url);
    if (!found) return false;
    served++;
    void serve(found.route, found.params, req, res, o);
    return true;
  };
  return Object.defineProperty(lane, "served", { get: () => served }) as FastLane;
}

function match(table: readonly Entry[], url: string): { route: RestRoute<DescMessage, DescMessage>; params: Record<string, string> } | undefined {
  const parts = url.split("/");
  next: for (const e of table) {
    if (e.parts.length !== parts.length) continue;
    const params: Record<string, string> = {};
    for (let i = 1; i < parts.length; i++) {
      const want = e.parts[i];
      if (want.startsWith(":")) {
        if (!parts[i]) continue next;
        params[want.slice(1)] = parts[i];
      } else if (want !== parts[i]) continue next;
    }
    return { route: e.route, params };
  }
  return undefined;
}

async function serve(route: RestRoute<DescMessage, DescMessage>, params: Record<string, string>, req: IncomingMessage, res: ServerResponse, o: FastLaneOptions): Promise<void> {
  try {
    // the credential first, as Fastify's onRequest hook does: a refused caller's body is not read
    const caller = await o.authenticate(credentialOf(req.headers));
    const body = await readJson(req, o.bodyLimit);
    send(res, route.status ?? 200, JSON.stringify(await callRoute(route, caller, params, {}, body, req.headers["content-type"])));
  } catch (err) {
    const ep = epErrorOf(err as Error, o.bodyLimit, o.log, req);
    const www = wwwAuthenticate(ep, req.headers);
    send(res, ep.httpStatus, JSON.stringify(ep.toJSON()), www ? { "www-authenticate": www } : undefined);
  }
}

function send(res: ServerResponse, status: number, json: string, headers?: Record<string, string>): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { ...headers, "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(json) });
  res.end(json);
}

/** A `__proto__` key, or a `constructor` key holding a `prototype`, at any depth (what secure-json-parse refuses). */
function poisoned(v: unknown): boolean {
  if (!v || typeof v !== "object") return false;
  if (Array.isArray(v)) return v.some(poisoned);
  const o = v as Record<string, unknown>;
  if (Object.hasOwn(o, "__proto__")) return true;
  const c = Object.hasOwn(o, "constructor") ? o.constructor : undefined;
  if (c && typeof c === "object" && Object.hasOwn(c, "prototype")) return true;
  return Object.values(o).some(poisoned);
}

/** The body as JSON, within the limit (the same errors as Fastify's parser gives). */
function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers["content-length"]);
  if (declared > limit) return Promise.reject(new EpError("payload_too_large", `the body is larger than ${limit} bytes`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new EpError("payload_too_large", `the body is larger than ${limit} bytes`));
        req.removeAllListeners("data");
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.once("error", reject);
    req.once("end", () => {
      const text = Buffer.concat(chunks, size).toString("utf8");
      if (!text) return reject(new EpError("invalid_json", "the body is not valid JSON: Body cannot be empty when content-type is set to 'application/json'"));
      // Fastify's parser refuses prototype poisoning too, and says the same for both
      const invalid = () => reject(new EpError("invalid_json", "the body is not valid JSON: Body is not valid JSON but content-type is set to 'application/json'"));
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return invalid();
      }
      if ((text.includes('"__proto__"') || text.includes('"constructor"')) && poisoned(body)) return invalid();
      resolve(body);
    });
  });
}
