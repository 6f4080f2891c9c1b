// Issue 18: every door answers an error in its own protocol's shape, from the one catalog.
// - the writer: every error class in Connect unary JSON, Connect streaming, gRPC and gRPC-Web,
//   each with its status code and EP's ErrorDetail;
// - over the wire, a real tower: every REST route without a credential (401 JSON with
//   WWW-Authenticate) and with a method it does not serve (405 with Allow); every RPC method in
//   Connect, gRPC-Web (HTTP/1.1) and native gRPC (HTTP/2) without a credential, with a body that
//   is not its message, and one procedure per service that does not exist.
import http2 from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { codeToHttpStatus, errorFromJson } from "@connectrpc/connect/protocol-connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rpcErrorResponse } from "../common/connect-errors.js";
import { ERROR_CATALOG, ERROR_CLASSES, EpError, toEpError, type ErrorClass, type ErrorCode } from "../common/errors.js";
import { epErrorOfConnectJson, epErrorOfGrpc } from "../test-support/rpc-errors.js";
import { RPC_ROLES } from "../tower/domain/door-roles.js";
import { SERVICES } from "./authz-probes.js";
import { startTower, type TestTower } from "./harness.js";

type Protocol = "connect" | "grpc-web" | "grpc";

/** What a client of `protocol` reads from a response: the EP error, the RPC status code, the HTTP status. */
function readRpcError(
  protocol: Protocol,
  streaming: boolean,
  status: number,
  headers: Headers,
  body: Buffer,
): { ep?: EpError; code?: number; http: number } {
  if (protocol === "connect" && !streaming) {
    const json = JSON.parse(body.toString("utf8") || "{}");
    const ep = epErrorOfConnectJson(json);
    return { ep, code: ep ? errorFromJson(json, undefined, new Error() as never).code : undefined, http: status };
  }
  if (protocol === "connect") {
    // the end-of-stream message: flag 0x02, length, {"error": {...}}
    expect(body[0] & 0x02).toBe(0x02);
    const end = JSON.parse(body.subarray(5, 5 + body.readUInt32BE(1)).toString("utf8")) as { error: never };
    const ce = errorFromJson(end.error, undefined, new Error() as never);
    return { ep: toEpError(ce), code: ce.code, http: status };
  }
  // gRPC and gRPC-Web: the status in the headers (trailers-only) or in the trailers
  let fields = headers;
  if (!fields.has("grpc-status") && protocol === "grpc-web") {
    const at = body.findIndex((b, i) => b === 0x80 && i + 5 <= body.length);
    const text = body.subarray(at + 5).toString("latin1");
    fields = new Headers();
    for (const line of text.split("\r\n")) {
      const i = line.indexOf(":");
      if (i > 0) fields.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
    }
  }
  return { ep: epErrorOfGrpc(fields), code: Number(fields.get("grpc-status")), http: status };
}

describe("the RPC error writer, every class in every protocol", () => {
  const oneCodePerClass = new Map<ErrorClass, ErrorCode>();
  for (const [code, [cls]] of Object.entries(ERROR_CATALOG) as [ErrorCode, readonly [ErrorClass, string]][])
    if (!oneCodePerClass.has(cls)) oneCodePerClass.set(cls, code);

  it("covers every class", () => {
    expect([...oneCodePerClass.keys()].sort()).toEqual(Object.keys(ERROR_CLASSES).sort());
  });

  for (const [cls, code] of oneCodePerClass) {
    it(`${cls} (${code})`, () => {
      const ep = new EpError(code, `a ${cls} error`, { field: "x" });
      const want = ERROR_CLASSES[cls].connect;
      const cases: [Protocol, boolean, string][] = [
        ["connect", false, "application/json"],
        ["connect", true, "application/connect+json"],
        ["grpc-web", false, "application/grpc-web+proto"],
        ["grpc", false, "application/grpc"],
      ];
      for (const [protocol, streaming, type] of cases) {
        const r = rpcErrorResponse(type, ep);
        const got = readRpcError(protocol, streaming, r.status, r.header, Buffer.from(r.body));
        expect({
          protocol,
          streaming,
          code: got.code,
          ep: got.ep?.code,
          message: got.ep?.message,
          details: got.ep?.details,
        }).toEqual({
          protocol,
          streaming,
          code: want,
          ep: code,
          message: `a ${cls} error`,
          details: { field: "x" },
        });
        expect(r.status).toBe(protocol === "connect" && !streaming ? codeToHttpStatus(want) : 200);
      }
    });
  }
});

describe("every door, over the wire", () => {
  let t: TestTower;
  beforeAll(async () => {
    t = await startTower({ env: { EP_BODY_LIMIT: String(64 * 1024) } });
  });
  afterAll(async () => {
    const closing = t?.close();
    t?.tower.app.server.closeAllConnections();
    await closing;
  });

  const isRpc = (url: string) => /^\/[a-z][\w.]*\.[A-Z]\w*\/\w+$/.test(url);
  const PUBLIC = new Set([
    "/healthz",
    "/readyz",
    "/.well-known/jwks.json",
    "/openapi.json",
    "/ui",
    "/ui/*",
    "/auth/oidc",
    "/auth/oidc/start",
    "/auth/oidc/callback",
  ]);
  const concrete = (url: string) => url.replace(/:(\w+)/g, "x_$1").replace(/\*$/, "index.html");

  it("every REST route without a credential: 401, EP's JSON error and WWW-Authenticate", async () => {
    const wrong: string[] = [];
    for (const r of t.tower.routes) {
      // the console's login and logout take no bearer token (logout without a session is a no-op)
      if (
        isRpc(r.url) ||
        r.method === "OPTIONS" ||
        PUBLIC.has(r.url) ||
        (r.url === "/auth/session" && r.method !== "GET")
      )
        continue;
      const res = await fetch(t.url + concrete(r.url), {
        method: r.method,
        headers: r.method === "GET" || r.method === "DELETE" ? {} : { "content-type": "application/json" },
        body: r.method === "GET" || r.method === "DELETE" ? undefined : "{}",
      });
      const body = (await res.json().catch(() => undefined)) as
        | { error?: { code?: string; message?: string; details?: unknown } }
        | undefined;
      const ok =
        res.status === 401 &&
        res.headers.get("www-authenticate") === 'Bearer realm="ep"' &&
        body?.error?.code === "unauthenticated" &&
        typeof body.error.message === "string" &&
        typeof body.error.details === "object";
      if (!ok)
        wrong.push(
          `${r.method} ${r.url}: ${res.status} ${res.headers.get("www-authenticate")} ${JSON.stringify(body)}`,
        );
    }
    expect(wrong).toEqual([]);
  });

  it("every REST path asked with a method it does not serve: 405, Allow and EP's JSON error", async () => {
    const byPath = new Map<string, Set<string>>();
    for (const r of t.tower.routes)
      if (!isRpc(r.url) && r.method !== "OPTIONS")
        (byPath.get(r.url) ?? byPath.set(r.url, new Set()).get(r.url)!).add(r.method);
    const wrong: string[] = [];
    for (const [url, methods] of byPath) {
      const other = ["PUT", "PATCH", "DELETE", "POST"].find((m) => !methods.has(m))!;
      const res = await fetch(t.url + concrete(url), {
        method: other,
        headers: { authorization: `Bearer ${t.adminToken}` },
      });
      const body = (await res.json().catch(() => undefined)) as { error?: { code?: string } } | undefined;
      const allow = new Set((res.headers.get("allow") ?? "").split(", "));
      const ok =
        res.status === 405 && [...methods].every((m) => allow.has(m)) && body?.error?.code === "method_not_allowed";
      if (!ok) wrong.push(`${other} ${url}: ${res.status} allow=${res.headers.get("allow")} ${JSON.stringify(body)}`);
    }
    expect(wrong).toEqual([]);
  });

  /** One RPC request in `protocol`; HTTP/2 for gRPC, HTTP/1.1 for the others. */
  async function call(
    protocol: Protocol,
    path: string,
    streaming: boolean,
    body: Buffer,
    token?: string,
  ): Promise<{ status: number; headers: Headers; body: Buffer }> {
    const type =
      protocol === "grpc"
        ? "application/grpc"
        : protocol === "grpc-web"
          ? "application/grpc-web+proto"
          : streaming
            ? "application/connect+json"
            : "application/json";
    const headers: Record<string, string> = {
      "content-type": type,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    };
    if (protocol !== "grpc") {
      const res = await fetch(t.url + path, { method: "POST", headers, body: new Uint8Array(body) });
      return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
    }
    return new Promise((resolve, reject) => {
      const session = http2.connect(t.url);
      session.on("error", reject);
      const req = session.request({ ":method": "POST", ":path": path, te: "trailers", ...headers });
      const out = new Headers();
      let status = 0;
      const chunks: Buffer[] = [];
      const take = (h: http2.IncomingHttpHeaders) => {
        for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && v !== undefined) out.set(k, String(v));
      };
      req.on("response", (h) => {
        status = Number(h[":status"]);
        take(h);
      });
      req.on("trailers", take);
      req.on("data", (d: Buffer) => chunks.push(d));
      req.on("end", () => {
        session.close();
        resolve({ status, headers: out, body: Buffer.concat(chunks) });
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  /** A body that is no message in the protocol's framing: junk protobuf, or not JSON. */
  const junk = (protocol: Protocol, streaming: boolean): Buffer => {
    if (protocol === "connect" && !streaming) return Buffer.from("{not json");
    // one byte that begins a field tag and never ends it: no message of any type parses it
    const payload = protocol === "connect" ? Buffer.from("{not json") : Buffer.from([0xff]);
    const frame = Buffer.alloc(5);
    frame.writeUInt32BE(payload.length, 1);
    return Buffer.concat([frame, payload]);
  };
  const empty = (protocol: Protocol, streaming: boolean): Buffer =>
    protocol === "connect" && !streaming
      ? Buffer.from("{}")
      : protocol === "connect"
        ? Buffer.from([0, 0, 0, 0, 2, 0x7b, 0x7d])
        : Buffer.alloc(5);

  // a method only a node calls refuses the admin before reading the body (authorization comes first)
  const methods = SERVICES.flatMap((s) =>
    s.methods.map((m: DescMethod) => ({
      path: `/${s.typeName}/${m.name}`,
      streaming: m.methodKind !== "unary",
      adminMay: RPC_ROLES[`${s.name}/${m.name}`].includes("admin"),
    })),
  );

  for (const protocol of ["connect", "grpc-web", "grpc"] as const) {
    it(`every RPC method in ${protocol}: unauthenticated and ` +
      `invalid_argument in ${protocol}'s shape, with EP's detail`, async () => {
      const wrong: string[] = [];
      for (const m of methods) {
        const anon = await call(protocol, m.path, m.streaming, empty(protocol, m.streaming));
        const a = readRpcError(protocol, m.streaming, anon.status, anon.headers, anon.body);
        if (a.code !== Code.Unauthenticated || a.ep?.code !== "unauthenticated")
          wrong.push(`${m.path} anonymous: ${a.code} ${a.ep?.code}`);
        if (protocol === "connect" && !m.streaming && (a.http !== 401 || anon.headers.get("www-authenticate") === null))
          wrong.push(`${m.path} anonymous: HTTP ${a.http}`);

        const bad = await call(protocol, m.path, m.streaming, junk(protocol, m.streaming), t.adminToken);
        const b = readRpcError(protocol, m.streaming, bad.status, bad.headers, bad.body);
        if (m.adminMay && (b.code !== Code.InvalidArgument || b.ep?.errorClass !== "invalid"))
          wrong.push(`${m.path} junk body: ${b.code} ${b.ep?.code} ${b.ep?.message}`);
        if (!m.adminMay && (b.code !== Code.PermissionDenied || b.ep?.code !== "forbidden"))
          wrong.push(`${m.path} junk body from a role that may not call it: ${b.code} ${b.ep?.code} ${b.ep?.message}`);
      }
      for (const s of SERVICES) {
        const res = await call(protocol, `/${s.typeName}/NoSuchMethod`, false, empty(protocol, false), t.adminToken);
        const u = readRpcError(protocol, false, res.status, res.headers, res.body);
        if (u.code !== Code.Unimplemented || u.ep?.code !== "procedure_not_found")
          wrong.push(`${s.typeName}/NoSuchMethod: ${u.code} ${u.ep?.code}`);
      }
      expect(wrong).toEqual([]);
    }, 60_000);
  }
});
