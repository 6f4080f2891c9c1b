// Issue 39, point 1: docs/deploy.md's nginx block, exactly as documented (upstreams, ports and
// certificate pointed at the test's), in front of two replicas on one PostgreSQL schema. On its one
// public TLS address: native gRPC from three stock clients (@grpc/grpc-js with the .proto files,
// `buf curl` with reflection, docs/api.md's Python client with Debian's grpcio), Connect over
// HTTP/2 and HTTP/1.1, gRPC-Web, SSE resumed with Last-Event-ID after a dropped connection, and a
// WebSocket.
import { execFile } from "node:child_process";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { epErrorOfGrpc } from "../test-support/rpc-errors.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { commit } from "../tower/domain/event-hub.js";
import { ROOT, tempHome, type TestTower, waitFor } from "./harness.js";
import { expectDocClientRan, pythonClient } from "./python-client.js";
import {
  type DeployNginx,
  followSse,
  freshSchema,
  gapsAndDuplicates,
  NGINX,
  requirePg,
  skipNginx,
  skipPg,
  startDeployNginx,
  startReplica,
} from "./replicas-harness.js";

requirePg("nginx-clients");
if (!NGINX)
  console.log(
    `nginx-clients: ${process.env.CI ? "FAILING" : "skipping"}: nginx is not installed (apt-get install nginx-light)`,
  );
const python = pythonClient("nginx-clients (Python)");

const cleanups: (() => unknown)[] = [];
const cleanup = (fn: () => unknown) => void cleanups.push(fn);
let a: TestTower;
let b: TestTower;
let nginx: DeployNginx;
/** host:port of nginx's TLS listener */
let host: string;

beforeAll(async () => {
  if (skipPg || skipNginx) return;
  const schema = await freshSchema();
  cleanup(() => schema.drop());
  const home = tempHome("ep-nginx-clients-");
  cleanup(() => home.cleanup());
  a = await startReplica(schema, home.dir);
  cleanup(() => a.close());
  b = await startReplica(schema, home.dir);
  cleanup(() => b.close());
  const port = (u: string) => Number(new URL(u).port);
  nginx = await startDeployNginx([port(a.url), port(b.url)], cleanup);
  host = new URL(nginx.tlsUrl).host;
}, 60_000);
afterAll(async () => {
  for (const fn of cleanups.reverse()) await fn();
  python.close();
});

/** `buf curl` with the arguments; its exit code and output. */
function bufCurl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(ROOT, "scripts", "buf.mjs"), "curl", ...args],
      { cwd: ROOT, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

const bearer = (): Interceptor => (next) => (req) => (
  req.header.set("authorization", `Bearer ${a.adminToken}`), next(req)
);

describe.skipIf(skipPg || skipNginx)("docs/deploy.md's nginx: every client on its one TLS address", () => {
  it("carries native gRPC from @grpc/grpc-js: unary calls, EP's error detail and a server stream", async () => {
    const def = protoLoader.loadSync(["ep/tower/v1/work.proto", "ep/tower/v1/events.proto"], {
      includeDirs: [join(ROOT, "proto")],
      defaults: true,
    });
    const pkg = grpc.loadPackageDefinition(def) as unknown as {
      ep: { tower: { v1: Record<string, grpc.ServiceClientConstructor> } };
    };
    const creds = grpc.credentials.createSsl(nginx.ca);
    const work = new pkg.ep.tower.v1.WorkService(host, creds);
    const events = new pkg.ep.tower.v1.EventService(host, creds);
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${a.adminToken}`);
    const unary = (method: string, req: object) =>
      new Promise<{ err: grpc.ServiceError | null; res: unknown }>((resolve) => {
        (
          work as unknown as Record<
            string,
            (r: object, m: grpc.Metadata, cb: (e: grpc.ServiceError | null, r: unknown) => void) => void
          >
        )[method](req, md, (err, res) => resolve({ err, res }));
      });
    try {
      const created = await unary("createDomain", { name: "grpc-js-via-nginx" });
      expect(created.err).toBeNull();
      expect((created.res as { domain: { name: string } }).domain.name).toBe("grpc-js-via-nginx");
      const missing = await unary("getDomain", { domainId: "dom_nope" });
      expect(missing.err?.code).toBe(grpc.status.NOT_FOUND);
      const details = missing.err!.metadata.get("grpc-status-details-bin")[0] as Buffer;
      expect(
        epErrorOfGrpc(new Headers({ "grpc-status": "5", "grpc-status-details-bin": details.toString("base64") }))?.code,
      ).toBe("domain_not_found");

      // a server stream: the events of domains created while it is open
      const call = (
        events as unknown as {
          streamEvents(r: object, m: grpc.Metadata): grpc.ClientReadableStream<{ event: { name: string } }>;
        }
      ).streamEvents({}, md);
      let streamed = 0;
      let failure: grpc.ServiceError | undefined;
      call.on("data", (m: { event: { name: string } }) => void (m.event.name === "domain.created" && streamed++));
      call.on("error", (e: grpc.ServiceError) => void (e.code === grpc.status.CANCELLED || (failure = e)));
      let n = 0;
      // domains are created until one shows on the stream (it subscribes in its own time)
      await waitFor(async () => {
        if (failure) throw failure;
        await unary("createDomain", { name: `grpc-js-streamed-${n++}` });
        return streamed > 0;
      }, 20_000);
      call.cancel();
    } finally {
      work.close();
      events.close();
    }
  }, 60_000);

  it("carries buf curl over native gRPC with the schema from reflection, and EP's error detail", async () => {
    const tls = ["--protocol", "grpc", "--cacert", nginx.caFile];
    const services = await bufCurl([...tls, "--list-services", nginx.tlsUrl]);
    expect(services.stderr).toBe("");
    expect(services.stdout.trim().split("\n")).toEqual(
      expect.arrayContaining(["ep.tower.v1.WorkService", "grpc.reflection.v1.ServerReflection"]),
    );
    const auth = ["-H", `authorization: Bearer ${a.adminToken}`];
    const created = await bufCurl([
      ...tls,
      ...auth,
      "-d",
      '{"name":"buf-curl-via-nginx"}',
      `${nginx.tlsUrl}/ep.tower.v1.WorkService/CreateDomain`,
    ]);
    expect(created.stderr).toBe("");
    expect(JSON.parse(created.stdout).domain.name).toBe("buf-curl-via-nginx");
    const missing = await bufCurl([
      ...tls,
      ...auth,
      "-d",
      '{"domain_id":"dom_nope"}',
      `${nginx.tlsUrl}/ep.tower.v1.WorkService/GetDomain`,
    ]);
    expect(missing.code).not.toBe(0);
    const err = JSON.parse(missing.stderr.slice(missing.stderr.indexOf("{"))) as {
      code: string;
      details: { type: string; value: string }[];
    };
    expect(err).toMatchObject({ code: "not_found", details: [{ type: "ep.errors.v1.ErrorDetail" }] });
    // the trailer came through nginx whole: EP's detail decodes to the code
    const value = err.details[0].value;
    expect(Buffer.from(value, "base64").toString("latin1")).toContain("domain_not_found");
  }, 90_000);

  it.skipIf(python.skip)(
    "carries docs/api.md's Python client (Debian's grpcio) over TLS",
    async () => {
      const run = await python.run({ EP_TOWER: host, EP_CA: nginx.caFile, EP_TOKEN: a.adminToken });
      await expectDocClientRan(run, a);
    },
    120_000,
  );

  it("carries Connect over HTTP/2 and HTTP/1.1, and gRPC-Web", async () => {
    const transports: [string, Transport][] = [
      [
        "connect h2",
        createConnectTransport({
          baseUrl: nginx.tlsUrl,
          httpVersion: "2",
          nodeOptions: { ca: nginx.ca },
          interceptors: [bearer()],
        }),
      ],
      [
        "connect http/1.1",
        createConnectTransport({
          baseUrl: nginx.tlsUrl,
          httpVersion: "1.1",
          nodeOptions: { ca: nginx.ca },
          interceptors: [bearer()],
        }),
      ],
      [
        "grpc-web",
        createGrpcWebTransport({
          baseUrl: nginx.tlsUrl,
          httpVersion: "1.1",
          nodeOptions: { ca: nginx.ca },
          interceptors: [bearer()],
        }),
      ],
    ];
    for (const [name, transport] of transports) {
      const work = createClient(WorkService, transport);
      const created = await work.createDomain({ name: `via-nginx-${name.replace(/\W+/g, "-")}` });
      expect((await work.getDomain({ domainId: created.domain!.id })).domain?.name, name).toBe(created.domain!.name);
      await expect(work.getDomain({ domainId: "dom_nope" }), name).rejects.toMatchObject({ code: 5 });
    }
  }, 60_000);

  it("carries SSE, resumed with Last-Event-ID after a dropped connection, and a WebSocket", async () => {
    const start = await a.tower.deps.store.lastEventId();
    const sse = followSse([nginx.tlsUrl], a.adminToken, { afterId: start, retryMs: 50, ca: nginx.ca });
    cleanup(() => sse.close());
    const wsIds: number[] = [];
    const ws = new WebSocket(`${nginx.tlsUrl.replace("https", "wss")}/events/ws?last_event_id=${start}`, {
      headers: { authorization: `Bearer ${a.adminToken}` },
      ca: nginx.ca,
    });
    cleanup(() => ws.terminate());
    ws.on("message", (data) => {
      const m = JSON.parse(String(data)) as { id?: number };
      if (typeof m.id === "number") wsIds.push(m.id);
    });
    await new Promise<void>((resolve, reject) => (ws.once("open", () => resolve()), ws.once("error", reject)));

    const tick = async (t: TestTower, i: number) =>
      commit(t.tower.deps, async (_tx, emit) =>
        emit({ type: "matrix", name: "test.tick", status: "ok", payload: { i } }),
      );
    for (let i = 0; i < 6; i++) await tick(i % 2 ? b : a, i);
    let expected = (await a.tower.deps.store.listEvents({ afterId: start, limit: 100_000 })).map((e) => e.id);
    await waitFor(() => sse.ids.at(-1) === expected.at(-1) && wsIds.at(-1) === expected.at(-1), 10_000);

    // the SSE connection drops; events committed meanwhile arrive after it resumes, once each
    sse.drop();
    for (let i = 6; i < 12; i++) await tick(i % 2 ? b : a, i);
    expected = (await a.tower.deps.store.listEvents({ afterId: start, limit: 100_000 })).map((e) => e.id);
    await waitFor(() => sse.ids.at(-1) === expected.at(-1) && wsIds.at(-1) === expected.at(-1), 10_000);
    expect(sse.connections.length).toBeGreaterThan(1);
    expect(gapsAndDuplicates(sse.ids, expected)).toEqual({ missing: [], duplicates: [], outOfOrder: 0 });
    expect(gapsAndDuplicates(wsIds, expected)).toEqual({ missing: [], duplicates: [], outOfOrder: 0 });
  }, 60_000);
});
