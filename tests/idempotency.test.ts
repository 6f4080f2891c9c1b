// Idempotent creates against a real tower: the Idempotency-Key header (REST) and request_id
// (Connect) make a retried create one task; another body with the key is refused; a bad key is
// named; and `ep task submit` through a proxy that answers 502 after the tower committed retries
// with the same key and makes one task. Both dialects' storage of the keys is in
// tower/domain/idempotency.test.ts (the store suite).
import { createServer, request as httpRequest, type Server } from "node:http";
import { fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { CreateTaskRequestSchema, WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { epErrorOfConnectJson } from "../test-support/rpc-errors.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
let missionId: string;

beforeAll(async () => {
  assertBuilt();
  t = await startTower();
  const d = await t.api("POST", "/domains", { name: "idem" });
  missionId = (await t.api("POST", `/domains/${d.body.domain.id}/m`, { title: "m" })).body.mission.id;
});
afterAll(async () => {
  await t?.close();
});

/** POST with an Idempotency-Key header. */
async function post(path: string, body: unknown, key?: string) {
  const headers: Record<string, string> = {
    authorization: `Bearer ${t.adminToken}`,
    "content-type": "application/json",
  };
  if (key !== undefined) headers["idempotency-key"] = key;
  const res = await fetch(t.url + path, { method: "POST", headers, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
}

const taskCount = async () => (await t.api("GET", `/work/missions/${missionId}/tasks`)).body.tasks.length as number;

describe("REST: the Idempotency-Key header", () => {
  it("the same create twice with one key makes one task and answers 201 both times", async () => {
    const before = await taskCount();
    const body = { title: "build", runtime: "shell", input: { command: "true" } };
    const first = await post(`/work/missions/${missionId}/tasks`, body, "rest-key-1");
    const again = await post(`/work/missions/${missionId}/tasks`, body, "rest-key-1");
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(await taskCount()).toBe(before + 1);
  });

  it("the same key with another body is refused with 409 idempotency_key_reused", async () => {
    await post(`/work/missions/${missionId}/tasks`, { title: "a" }, "rest-key-2");
    const reused = await post(`/work/missions/${missionId}/tasks`, { title: "b" }, "rest-key-2");
    expect(reused.status).toBe(409);
    expect(reused.body.error.code).toBe("idempotency_key_reused");
    expect(reused.body.error.message).toMatch(/rest-key-2/);
  });

  it("domains and missions take the key too", async () => {
    const d1 = await post("/domains", { name: "idem-d" }, "dom-key");
    const d2 = await post("/domains", { name: "idem-d" }, "dom-key");
    expect([d1.status, d2.status]).toEqual([201, 201]);
    expect(d2.body.domain.id).toBe(d1.body.domain.id);
    const m1 = await post(`/domains/${d1.body.domain.id}/m`, { title: "x" }, "msn-key");
    const m2 = await post(`/domains/${d1.body.domain.id}/m`, { title: "x" }, "msn-key");
    expect(m2.body.mission.id).toBe(m1.body.mission.id);
  });

  it("a bad key is refused naming the header, and nothing is made", async () => {
    const before = await taskCount();
    for (const [key, why] of [
      ["", /Idempotency-Key header: is empty/],
      ["k".repeat(256), /Idempotency-Key header: is 256 characters long; at most 255/],
      ["caf\u00e9", /Idempotency-Key header: must be printable ASCII/],
    ] as const) {
      const res = await post(`/work/missions/${missionId}/tasks`, { title: "bad key" }, key);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: "invalid_argument", details: { field: "Idempotency-Key" } });
      expect(res.body.error.message).toMatch(why);
    }
    expect(await taskCount()).toBe(before);
  });

  it("/openapi.json lists the header on the create routes", async () => {
    const doc = (await t.api("GET", "/openapi.json")).body;
    const names = (op: { parameters?: { name: string; in: string }[] }) =>
      (op.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name);
    expect(names(doc.paths["/work/missions/{mission_id}/tasks"].post)).toEqual(["Idempotency-Key"]);
    expect(names(doc.paths["/domains"].post)).toEqual(["Idempotency-Key"]);
    expect(names(doc.paths["/work/tasks/{task_id}/retry"].post)).toEqual([]);
  });
});

describe("Connect: request_id", () => {
  it("the same create twice with one request_id makes one task; another request with it is refused", async () => {
    const work = t.client(WorkService);
    const before = await taskCount();
    const req = {
      missionId,
      title: "connect",
      runtime: Runtime.SHELL,
      input: { command: "true" },
      requestId: "connect-key",
    };
    const first = await work.createTask(req);
    expect((await work.createTask(req)).task!.id).toBe(first.task!.id);
    expect(await taskCount()).toBe(before + 1);
    const err = await work.createTask({ ...req, title: "other" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.Aborted);
    expect(err?.rawMessage).toMatch(/connect-key/);
    const bad = await work.createTask({ ...req, requestId: "x".repeat(300) }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(bad?.code).toBe(Code.InvalidArgument);
    expect(bad?.rawMessage).toMatch(/^request_id: is 300 characters long/);
  });

  it("an error answer names idempotency_key_reused in EP's detail", async () => {
    const body = { missionId, title: "one", requestId: "detail-key" };
    const call = (b: unknown) =>
      fetch(`${t.url}/ep.tower.v1.WorkService/CreateTask`, {
        method: "POST",
        headers: { authorization: `Bearer ${t.adminToken}`, "content-type": "application/json" },
        body: JSON.stringify(b),
      });
    expect((await call(body)).status).toBe(200);
    const res = await call({ ...body, title: "two" });
    expect(res.status).toBe(409);
    expect(epErrorOfConnectJson(await res.json())?.code).toBe("idempotency_key_reused");
  });
});

describe("the CLI's retry through a proxy that answers 502 after the tower committed", () => {
  let proxy: Server;
  let proxyUrl: string;
  const seen: { method: string; key: string }[] = [];

  beforeAll(async () => {
    const upstream = new URL(t.url);
    let dropped = false;
    proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        const isCreate = req.url === "/ep.tower.v1.WorkService/CreateTask";
        // the CLI speaks binary Connect
        if (isCreate) seen.push({ method: "CreateTask", key: fromBinary(CreateTaskRequestSchema, body).requestId });
        const up = httpRequest(
          { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
          (upRes) => {
            const out: Buffer[] = [];
            upRes.on("data", (c: Buffer) => out.push(c));
            upRes.on("end", () => {
              // the tower answered (it committed): the first create's answer is lost on the way back
              if (isCreate && !dropped && upRes.statusCode === 200) {
                dropped = true;
                res.writeHead(502, { "content-type": "text/plain" }).end("bad gateway");
                return;
              }
              res.writeHead(upRes.statusCode ?? 502, upRes.headers).end(Buffer.concat(out));
            });
          },
        );
        up.on("error", () => res.writeHead(502).end());
        up.end(body);
      });
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => proxy.close(() => r())));

  it("ep task submit makes one task and prints it", async () => {
    const before = await taskCount();
    const res = await ep(["task", "submit", "--mission", missionId, "--command", "true", "--json", "retried"], {
      env: { EP_BASE_URL: proxyUrl, EP_TOKEN: t.adminToken },
    });
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    const tasks = (await t.api("GET", `/work/missions/${missionId}/tasks`)).body.tasks;
    expect(tasks.length).toBe(before + 1);
    expect(res.json().task.id).toBe(tasks[tasks.length - 1].id);
    // two attempts, one fresh key
    expect(seen.length).toBe(2);
    expect(seen[0].key).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen[1].key).toBe(seen[0].key);
  });
});
