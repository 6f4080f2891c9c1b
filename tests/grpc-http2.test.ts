// Issue 18: stock clients that know nothing of EP reach the tower. A real tower; the clients are
// `buf curl` (the pinned buf, through scripts/buf.mjs) over native gRPC on HTTP/2 cleartext with
// the schema taken from server reflection, @grpc/grpc-js with the .proto files, and node:http2.
import { connect, type Socket } from "node:net";
import { execFile, spawn } from "node:child_process";
import http2 from "node:http2";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { epErrorOfGrpc } from "../test-support/rpc-errors.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, waitFor, type TestTower } from "./harness.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

let t: TestTower;
beforeAll(async () => {
  t = await startTower();
});
afterAll(async () => {
  await t?.close();
});

/** `buf curl` with the arguments; resolves its exit code and output (it may be stopped with `signal`). */
function bufCurl(args: string[], signal?: AbortSignal): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(ROOT, "scripts", "buf.mjs"), "curl", ...args],
      { cwd: ROOT, signal, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

const grpcArgs = () => ["--protocol", "grpc", "--http2-prior-knowledge", "-H", `authorization: Bearer ${t.adminToken}`];

/** One HTTP/2 request by prior knowledge; the status, headers and body. */
function h2(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(t.url);
    session.on("error", reject);
    const req = session.request({ ":path": path, ":method": init.method ?? "GET", ...init.headers });
    let headers: http2.IncomingHttpHeaders = {};
    let body = "";
    req.on("response", (h) => (headers = h));
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => {
      resolve({ status: Number(headers[":status"]), headers, body });
      session.close();
    });
    req.on("error", reject);
    req.end(init.body);
  });
}

describe("HTTP/2 cleartext on the tower's port", () => {
  it("serves REST and health over h2c by prior knowledge, next to HTTP/1.1", async () => {
    expect(await h2("/healthz")).toMatchObject({ status: 200, body: '{"status":"ok"}' });
    const created = await h2("/domains", {
      method: "POST",
      headers: { authorization: `Bearer ${t.adminToken}`, "content-type": "application/json" },
      body: '{"name":"over-h2"}',
    });
    expect(created.status).toBe(201);
    const listed = await fetch(`${t.url}/domains`, { headers: { authorization: `Bearer ${t.adminToken}` } });
    expect(((await listed.json()) as { domains: { name: string }[] }).domains.map((d) => d.name)).toContain("over-h2");
    const anonymous = await h2("/domains");
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers["www-authenticate"]).toBe('Bearer realm="ep"');
  });

  it("answers an unknown procedure with UNIMPLEMENTED and EP's detail, in gRPC's shape", async () => {
    const r = await h2("/ep.tower.v1.WorkService/NoSuchMethod", {
      method: "POST",
      headers: { authorization: `Bearer ${t.adminToken}`, "content-type": "application/grpc", te: "trailers" },
    });
    expect(r.status).toBe(200);
    expect(r.headers["grpc-status"]).toBe("12");
    const headers = new Headers(Object.entries(r.headers).filter(([k]) => !k.startsWith(":")) as [string, string][]);
    expect(epErrorOfGrpc(headers)).toMatchObject({
      code: "procedure_not_found",
      message: "no procedure ep.tower.v1.WorkService/NoSuchMethod",
    });
  });
});

describe("buf curl over native gRPC, schema by reflection", () => {
  it("lists the services and methods from reflection v1 and v1alpha", async () => {
    const services = await bufCurl(["--protocol", "grpc", "--http2-prior-knowledge", "--list-services", t.url]);
    expect(services.stderr).toBe("");
    expect(services.stdout.trim().split("\n")).toEqual(
      expect.arrayContaining([
        "ep.tower.v1.WorkService",
        "ep.tower.v1.EventService",
        "grpc.reflection.v1.ServerReflection",
      ]),
    );
    const methods = await bufCurl([
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "--reflect-protocol",
      "grpc-v1alpha",
      "--list-methods",
      t.url,
    ]);
    expect(methods.stdout).toContain("ep.tower.v1.WorkService/CreateTask");
  }, 90_000);

  it("calls a unary RPC and refuses a missing credential with UNAUTHENTICATED", async () => {
    const created = await bufCurl([
      ...grpcArgs(),
      "-d",
      '{"name":"by-buf-curl"}',
      `${t.url}/ep.tower.v1.WorkService/CreateDomain`,
    ]);
    expect(created.stderr).toBe("");
    expect(JSON.parse(created.stdout).domain.name).toBe("by-buf-curl");
    const refused = await bufCurl([
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "-d",
      "{}",
      `${t.url}/ep.tower.v1.WorkService/ListDomains`,
    ]);
    expect(refused.code).not.toBe(0);
    expect(JSON.parse(refused.stderr.slice(refused.stderr.indexOf("{")))).toMatchObject({
      code: "unauthenticated",
      message: expect.stringContaining("no credentials"),
    });
  }, 90_000);

  it("serves ep.errors.v1.ErrorDetail by reflection, and " +
    "buf curl prints the detail decoded with its fields", async () => {
    // the symbol a client meets only inside google.rpc.Status.details: reflection answers its file
    const asked = await bufCurl([
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "-d",
      '{"file_containing_symbol":"ep.errors.v1.ErrorDetail"}',
      `${t.url}/grpc.reflection.v1.ServerReflection/ServerReflectionInfo`,
    ]);
    expect(asked.stderr).toBe("");
    const answer = JSON.parse(asked.stdout) as {
      fileDescriptorResponse?: { fileDescriptorProto: string[] };
      errorResponse?: unknown;
    };
    expect(answer.errorResponse).toBeUndefined();
    const files = answer.fileDescriptorResponse!.fileDescriptorProto.map((b) =>
      Buffer.from(b, "base64").toString("latin1"),
    );
    expect(files[0]).toContain("ep/errors/v1/errors.proto");
    expect(files[0]).toContain("ErrorDetail");
    expect(files.some((f) => f.includes("google/protobuf/struct.proto"))).toBe(true);

    // buf curl's own protocol (Connect) prints the detail decoded: its type, code and details
    const missing = await bufCurl([
      "-H",
      `authorization: Bearer ${t.adminToken}`,
      "-d",
      '{"domain_id":"dom_nope"}',
      `${t.url}/ep.tower.v1.WorkService/GetDomain`,
    ]);
    expect(missing.code).not.toBe(0);
    const err = JSON.parse(missing.stderr.slice(missing.stderr.indexOf("{"))) as {
      code: string;
      details: { type: string; debug?: unknown }[];
    };
    expect(err).toMatchObject({ code: "not_found", message: "domain dom_nope does not exist" });
    expect(err.details).toEqual([
      expect.objectContaining({ type: "ep.errors.v1.ErrorDetail", debug: { code: "domain_not_found", details: {} } }),
    ]);
  }, 90_000);

  it("follows a server-streaming RPC (the event stream) as events happen", async () => {
    const child = spawn(
      process.execPath,
      [
        join(ROOT, "scripts", "buf.mjs"),
        "curl",
        ...grpcArgs(),
        "-d",
        "{}",
        `${t.url}/ep.tower.v1.EventService/StreamEvents`,
      ],
      { cwd: ROOT },
    );
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    const work = t.client(WorkService);
    try {
      // domains are created until one shows in what buf curl prints (it subscribes in its own time)
      await waitFor(async () => {
        await work.createDomain({ name: `streamed-${Date.now()}` });
        return out.includes('"name": "domain.created"');
      }, 60_000);
    } finally {
      child.kill();
    }
    expect(out).toMatch(/"id": "\d+"/);
  }, 90_000);
});

describe("@grpc/grpc-js as a stock gRPC client", () => {
  const def = protoLoader.loadSync(["ep/tower/v1/work.proto", "ep/tower/v1/events.proto"], {
    includeDirs: [join(ROOT, "proto")],
    keepCase: false,
    defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    ep: { tower: { v1: Record<string, grpc.ServiceClientConstructor> } };
  };
  const clientOf = (name: string) => new pkg.ep.tower.v1[name](new URL(t.url).host, grpc.credentials.createInsecure());
  const unary = (c: grpc.Client, method: string, req: object, token?: string) =>
    new Promise<{ err: grpc.ServiceError | null; res: unknown }>((resolve) => {
      const md = new grpc.Metadata();
      if (token) md.set("authorization", `Bearer ${token}`);
      (
        c as unknown as Record<
          string,
          (r: object, m: grpc.Metadata, cb: (e: grpc.ServiceError | null, r: unknown) => void) => void
        >
      )[method](req, md, (err, res) => resolve({ err, res }));
    });

  it("calls unary RPCs with a bearer token and reads EP's error detail from grpc-status-details-bin", async () => {
    const work = clientOf("WorkService");
    const created = await unary(work, "createDomain", { name: "by-grpc-js" }, t.adminToken);
    expect(created.err).toBeNull();
    expect((created.res as { domain: { name: string } }).domain.name).toBe("by-grpc-js");

    const missing = await unary(work, "getDomain", { domainId: "dom_nope" }, t.adminToken);
    expect(missing.err?.code).toBe(grpc.status.NOT_FOUND);
    const details = missing.err!.metadata.get("grpc-status-details-bin")[0] as Buffer;
    const headers = new Headers({
      "grpc-status": String(missing.err!.code),
      "grpc-status-details-bin": details.toString("base64"),
    });
    expect(epErrorOfGrpc(headers)?.code).toBe("domain_not_found");

    const anonymous = await unary(work, "listDomains", {});
    expect(anonymous.err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(anonymous.err?.details).toMatch(/no credentials/);
    work.close();
  });

  it("receives a server stream", async () => {
    const events = clientOf("EventService");
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${t.adminToken}`);
    const call = (
      events as unknown as {
        streamEvents(r: object, m: grpc.Metadata): grpc.ClientReadableStream<{ event: { name: string } }>;
      }
    ).streamEvents({}, md);
    const first = new Promise<string>((resolve, reject) => {
      call.on("data", (m: { event: { name: string } }) => m.event.name === "domain.created" && resolve(m.event.name));
      call.on("error", (e: grpc.ServiceError) => (e.code === grpc.status.CANCELLED ? undefined : reject(e)));
    });
    const work = clientOf("WorkService");
    const poke = setInterval(
      () => void unary(work, "createDomain", { name: `grpc-js-${Date.now()}` }, t.adminToken),
      100,
    );
    try {
      expect(await first).toBe("domain.created");
    } finally {
      clearInterval(poke);
      call.cancel();
      work.close();
      events.close();
    }
  });
});

describe("shutdown with HTTP/2 clients connected", () => {
  it("closes at once with an idle HTTP/2 session, an SSE stream and a gRPC server stream open", async () => {
    const own = await startTower();
    const sessions = [http2.connect(own.url), http2.connect(own.url), http2.connect(own.url)];
    await new Promise((r) => sessions[0].request({ ":path": "/healthz" }).on("end", r).resume());
    sessions[1].request({ ":path": "/events/stream", authorization: `Bearer ${own.adminToken}` }).resume();
    const stream = sessions[2].request({
      ":method": "POST",
      ":path": "/ep.tower.v1.EventService/StreamEvents",
      "content-type": "application/grpc",
      te: "trailers",
      authorization: `Bearer ${own.adminToken}`,
    });
    stream.end(Buffer.alloc(5)); // one empty StreamEventsRequest
    const ended = new Promise<string | undefined>((resolve) =>
      stream.on("trailers", (h) => resolve(String(h["grpc-status"]))).on("close", () => resolve(undefined)),
    );
    stream.resume();
    await waitFor(async () => (await fetch(`${own.url}/healthz`)).ok, 5_000);
    // close returns although no client hung up (a hang fails the test by its timeout), and the
    // server stream ends with it (a status, or its session closing)
    await own.close();
    await ended;
    for (const s of sessions) s.destroy();
  }, 30_000);

  it("closes at once with connections open that have sent nothing yet " +
    "(a browser's preconnect), on close() and on closeAllConnections", async () => {
    const own = await startTower({ env: { EP_HEADERS_TIMEOUT_MS: "25000" } });
    const port = Number(new URL(own.url).port);
    const silent = () =>
      new Promise<Socket>((resolve) => {
        const s = connect(port, "127.0.0.1", () => resolve(s));
        s.on("error", () => {});
      });
    const [a, b] = [await silent(), await silent()];
    const closedA = new Promise((r) => a.on("close", r));
    // the raw server close the console test does (an outage): returns without waiting 25 s for them
    const server = own.tower.app.server;
    const { port: p } = server.address() as { port: number };
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    await closedA;
    await new Promise<void>((resolve) => server.listen(p, "127.0.0.1", () => resolve()));
    const c = await silent();
    const closedC = new Promise((r) => c.on("close", r));
    // and the tower's own close (closeIdleConnections)
    await own.close();
    await closedC;
    b.destroy();
  }, 20_000);
});
