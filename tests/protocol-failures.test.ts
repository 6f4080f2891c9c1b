// Issue 14, point 7: failures leave in EP's shape and the right protocol, with no internals, and
// slow clients are cut off. A real tower over real sockets; the timeouts are configured small.
import { connect as connectHttp2 } from "node:http2";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { epErrorOfConnectEndStream, epErrorOfConnectJson, epErrorOfGrpc } from "../test-support/rpc-errors.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
let port: number;

beforeAll(async () => {
  t = await startTower({
    env: { EP_HEADERS_TIMEOUT_MS: "1000", EP_REQUEST_TIMEOUT_MS: "2000", EP_BODY_LIMIT: String(64 * 1024) },
  });
  port = Number(new URL(t.url).port);
});

afterAll(async () => {
  const closing = t?.close();
  t?.tower.app.server.closeAllConnections();
  await closing;
});

const INTERNALS = /premature|RangeError|invalid wire type|index out of range|at [\w.]+ \(|node_modules|\.js:\d+/i;

async function post(path: string, contentType: string, body: Uint8Array | string) {
  const payload: BodyInit = typeof body === "string" ? body : Buffer.from(body);
  const res = await fetch(`${t.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${t.adminToken}`, "content-type": contentType },
    body: payload,
  });
  const text = await res.text();
  return {
    status: res.status,
    text,
    json: (() => {
      try {
        return JSON.parse(text);
      } catch {
        return undefined;
      }
    })(),
    headers: res.headers,
  };
}

/** Writes raw bytes to the tower a piece at a time; resolves what came back and when the socket closed. */
function trickle(
  pieces: string[],
  everyMs: number,
): Promise<{ response: string; closedAfterMs: number; sent: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const s = connect(port, "127.0.0.1");
    let response = "";
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    s.on("data", (d) => (response += d.toString()));
    const done = () => {
      clearTimeout(timer);
      resolve({ response, closedAfterMs: Date.now() - started, sent });
    };
    s.on("close", done);
    s.on("error", () => undefined);
    const next = () => {
      if (sent >= pieces.length || s.destroyed) return;
      s.write(pieces[sent++]);
      timer = setTimeout(next, everyMs);
    };
    next();
  });
}

describe("protocol-correct failures", () => {
  it("a malformed binary protobuf body is 400 invalid_argument in the Connect shape, with no parser text", async () => {
    for (const ct of ["application/proto", "application/grpc-web+proto"]) {
      const body = ct.startsWith("application/grpc-web")
        ? new Uint8Array([0, 0, 0, 0, 3, 0xff, 0xff, 0xff])
        : new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]);
      const r = await post("/ep.tower.v1.WorkService/ListDomains", ct, body);
      expect({ ct, text: r.text }).not.toMatchObject({ text: expect.stringMatching(INTERNALS) });
      if (ct === "application/proto") {
        expect(r.status).toBe(400);
        expect(r.json).toMatchObject({ code: "invalid_argument" });
        expect(epErrorOfConnectJson(r.json)?.code).toBe("invalid_argument");
      } else {
        // gRPC-Web answers 200, trailers-only (the status in the headers): 3 = INVALID_ARGUMENT
        expect(r.status).toBe(200);
        expect(r.headers.get("grpc-status")).toBe("3");
        expect(epErrorOfGrpc(r.headers)?.code).toBe("invalid_argument");
      }
    }
  });

  it("an oversized body gets EP's error shape on REST and Connect routes", async () => {
    const big = "x".repeat(200 * 1024);
    const rest = await post("/domains", "application/json", JSON.stringify({ name: big }));
    expect(rest.status).toBe(413);
    expect(rest.json).toMatchObject({ error: { code: "payload_too_large" } });
    // Connect says invalid_argument (HTTP 400; resource_exhausted is for rate limits); EP's code
    // rides in the ErrorDetail
    const connectJson = await post(
      "/ep.tower.v1.WorkService/CreateDomain",
      "application/json",
      JSON.stringify({ name: big }),
    );
    expect(connectJson.status).toBe(400);
    expect(connectJson.json).toMatchObject({
      code: "invalid_argument",
      message: `the body is larger than ${64 * 1024} bytes`,
    });
    expect(epErrorOfConnectJson(connectJson.json)?.code).toBe("payload_too_large");
    expect(connectJson.text).not.toMatch(INTERNALS);
  });

  it("a body announced far larger than the limit is refused at once in EP's shape", async () => {
    const r = await trickle(
      [
        `POST /domains HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.adminToken}\r\nContent-Type: ` +
          `application/json\r\nContent-Length: 104857600\r\n\r\n{"name":"`,
      ],
      10,
    );
    expect(r.response).toMatch(/^HTTP\/1.1 413/);
    expect(r.response).toContain('"code":"payload_too_large"');
  });

  it("an empty body sent as JSON is no body: a retry without fields is accepted", async () => {
    const d = (await t.api("POST", "/domains", { name: "empty-body" })).body.domain.id;
    const m = (await t.api("POST", `/domains/${d}/m`, { title: "m" })).body.mission.id;
    const task = (
      await t.api("POST", `/work/missions/${m}/tasks`, { title: "x", runtime: "shell", input: { command: "true" } })
    ).body.task.id;
    await t.api("POST", `/work/tasks/${task}/cancel`, {});
    const r = await fetch(`${t.url}/work/tasks/${task}/retry`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.adminToken}`, "content-type": "application/json" },
    });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { task: { status: string } }).task.status).toBe("queued");
    // a body that is there and broken is still invalid_json
    const bad = await post("/domains", "application/json", "{nope");
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe("invalid_json");
  });

  it(
    "a message flagged compressed without an encoding " + "is invalid_argument in every protocol, not internal",
    async () => {
      // one envelope: flag 1 (compressed), length 2, then bytes that are no gzip; no grpc-encoding
      const body = Buffer.from([1, 0, 0, 0, 2, 0x0a, 0x00]);
      const session = connectHttp2(t.url);
      try {
        for (const [method, contentType] of [
          ["WorkService/ListDomains", "application/grpc"],
          ["EventService/StreamEvents", "application/grpc"],
          ["WorkService/ListDomains", "application/grpc-web+proto"],
          ["EventService/StreamEvents", "application/connect+proto"],
        ]) {
          const r = await new Promise<{ headers: Headers; body: Buffer }>((resolve, reject) => {
            const req = session.request({
              ":method": "POST",
              ":path": `/ep.tower.v1.${method}`,
              "content-type": contentType,
              te: "trailers",
              authorization: `Bearer ${t.adminToken}`,
            });
            const headers = new Headers();
            const chunks: Buffer[] = [];
            const keep = (h: Record<string, unknown>) =>
              Object.entries(h).forEach(([k, v]) => !k.startsWith(":") && headers.set(k, String(v)));
            req
              .on("response", keep)
              .on("trailers", keep)
              .on("data", (c: Buffer) => chunks.push(c));
            req.on("end", () => resolve({ headers, body: Buffer.concat(chunks) })).on("error", reject);
            req.end(body);
          });
          const where = `${contentType} ${method}`;
          expect({ where, text: r.body.toString("latin1") }).not.toMatchObject({
            text: expect.stringMatching(INTERNALS),
          });
          const ep = contentType.startsWith("application/connect+")
            ? epErrorOfConnectEndStream(r.body)
            : epErrorOfGrpc(r.headers);
          expect({ where, code: ep?.code, message: ep?.message }).toEqual({
            where,
            code: "invalid_argument",
            message: expect.stringContaining("flagged compressed but the request names no encoding"),
          });
          if (contentType.startsWith("application/grpc"))
            expect({ where, status: r.headers.get("grpc-status") }).toEqual({ where, status: "3" });
        }
      } finally {
        session.close();
      }
    },
  );

  it("cuts off a client that sends a header line every 300 ms (headers timeout 1 s)", async () => {
    const lines = ["GET /healthz HTTP/1.1\r\n", ...Array.from({ length: 40 }, (_, i) => `X-Slow-${i}: y\r\n`)];
    const r = await trickle(lines, 300);
    expect(r.sent).toBeLessThan(lines.length); // closed before the headers were done
    expect(r.closedAfterMs).toBeLessThan(6000);
  });

  it("cuts off a body sent at a few bytes a second (request timeout 2 s)", async () => {
    const head =
      `POST /domains HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ` +
      `${t.adminToken}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n`;
    const r = await trickle([head, ...Array.from({ length: 200 }, () => " ")], 250);
    expect(r.sent).toBeLessThan(201);
    expect(r.closedAfterMs).toBeLessThan(8000);
  });
});
