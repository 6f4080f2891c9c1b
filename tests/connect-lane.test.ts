// The tower's Connect unary lane (tower/edges/connect/unary-lane.ts): which requests take it,
// that every unary method of every service has it in both encodings, and that it answers exactly
// what connect-es answers — every case is sent twice to a real tower, once as the lane takes it
// and once with a `connect-timeout-ms` header (which sends it to connect-es), and the status,
// content type and body bytes must be the same.
import type { DescMethod } from "@bufbuild/protobuf";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { Role } from "../gen/ep/tower/v1/resources_pb.js";
import { GetTaskRequestSchema, WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { laneOf } from "../tower/edges/connect/unary-lane.js";
import { SERVICES } from "./authz-probes.js";
import { startTower, type TestTower } from "./harness.js";

describe("which requests take the lane", () => {
  const req = (method: string, headers: Record<string, string>) => ({ method, headers });
  it("plain Connect unary POSTs, binary or JSON (with a charset, in any case)", () => {
    expect(laneOf(req("POST", { "content-type": "application/proto" }))).toBe("proto");
    expect(laneOf(req("POST", { "content-type": "application/json" }))).toBe("json");
    expect(laneOf(req("POST", { "content-type": "Application/JSON; charset=utf-8" }))).toBe("json");
  });
  it("everything else goes to connect-es", () => {
    expect(laneOf(req("GET", { "content-type": "application/proto" }))).toBeUndefined();
    expect(laneOf(req("POST", { "content-type": "application/grpc" }))).toBeUndefined();
    expect(laneOf(req("POST", { "content-type": "application/grpc-web+proto" }))).toBeUndefined();
    expect(laneOf(req("POST", { "content-type": "application/connect+proto" }))).toBeUndefined();
    expect(laneOf(req("POST", { "content-type": "application/proto", "content-encoding": "gzip" }))).toBeUndefined();
    expect(laneOf(req("POST", { "content-type": "application/json", "connect-timeout-ms": "1000" }))).toBeUndefined();
    expect(laneOf(req("POST", { "content-type": "text/plain" }))).toBeUndefined();
    expect(laneOf(req("POST", {}))).toBeUndefined();
  });
});

describe("the lane against connect-es, on a real tower", () => {
  let t: TestTower;
  let taskId: string;
  let viewer: string;
  beforeAll(async () => {
    t = await startTower();
    const work = t.client(WorkService);
    const domainId = (await work.createDomain({ name: "lane" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
    taskId = (await work.createTask({ missionId, title: "t", input: { command: "true" } })).task!.id;
    for (let i = 0; i < 8; i++)
      await work.createTask({
        missionId,
        title: `more ${i}`,
        description: "x".repeat(200),
        input: { command: "true" },
      });
    viewer = (await t.client(AuthService).createToken({ name: "v", role: Role.VIEWER })).secret;
    expect(taskId && viewer).toBeTruthy();
  });
  afterAll(() => t?.close());

  it("has a route for every unary method of every service, in both encodings", () => {
    let n = 0;
    for (const service of SERVICES) {
      for (const method of service.methods as DescMethod[]) {
        if (method.methodKind !== "unary") continue;
        for (const kind of ["proto", "json"]) {
          expect(
            t.tower.app.hasRoute({
              method: "POST",
              url: `/${service.typeName}/${method.name}`,
              constraints: { connectUnary: kind },
            }),
            `${method.name} ${kind}`,
          ).toBe(true);
          n++;
        }
      }
    }
    expect(n).toBeGreaterThan(80);
  });

  const getTask = "/ep.tower.v1.WorkService/GetTask";
  const bin = (id: string) => Buffer.from(toBinary(GetTaskRequestSchema, create(GetTaskRequestSchema, { taskId: id })));
  const cases: [string, string, string, () => string | Buffer, (() => string | undefined)?][] = [
    ["a read (JSON)", getTask, "application/json", () => JSON.stringify({ taskId })],
    ["a read (binary)", getTask, "application/proto", () => bin(taskId)],
    ["a read with a charset", getTask, "application/json; charset=utf-8", () => JSON.stringify({ taskId })],
    ["a list", "/ep.tower.v1.WorkService/ListDomains", "application/json", () => "{}"],
    [
      "a list over 1 KB (gzipped for a client that accepts it)",
      "/ep.tower.v1.WorkService/ListTasks",
      "application/json",
      () => "{}",
    ],
    ["a missing task (JSON)", getTask, "application/json", () => JSON.stringify({ taskId: "t_missing" })],
    ["a missing task (binary)", getTask, "application/proto", () => bin("t_missing")],
    ["an empty binary body (a required field missing)", getTask, "application/proto", () => Buffer.alloc(0)],
    ["a body that is not JSON", getTask, "application/json", () => "{"],
    ["an empty JSON body", getTask, "application/json", () => ""],
    ["an unknown field", getTask, "application/json", () => JSON.stringify({ taskId, nope: 1 })],
    ["a prototype key", getTask, "application/json", () => '{"__proto__":{"admin":true}}'],
    ["a field of the wrong type", getTask, "application/json", () => JSON.stringify({ taskId: 5 })],
    ["bytes that are not the message", getTask, "application/proto", () => Buffer.from([0xff, 0xff, 0xff])],
    [
      "an enum word REST takes but Connect JSON does not",
      "/ep.tower.v1.WorkService/ListTasks",
      "application/json",
      () => JSON.stringify({ status: "queued" }),
    ],
    ["no credential", getTask, "application/json", () => JSON.stringify({ taskId }), () => undefined],
    [
      "a role that may not",
      "/ep.tower.v1.WorkService/CreateDomain",
      "application/json",
      () => JSON.stringify({ name: "nope" }),
      () => viewer,
    ],
    [
      "a body over the limit",
      getTask,
      "application/json",
      () => JSON.stringify({ taskId: "x".repeat(2 * 1024 * 1024) }),
    ],
  ];

  for (const [name, path, type, body, token] of cases) {
    it(name, async () => {
      const send = async (extra: Record<string, string>) => {
        const auth = token ? token() : t.adminToken;
        const res = await fetch(t.url + path, {
          method: "POST",
          headers: { "content-type": type, ...(auth ? { authorization: `Bearer ${auth}` } : {}), ...extra },
          body: body() as unknown as BodyInit,
        });
        // fetch asks for gzip and inflates the body; the encoding it came in is compared too
        return {
          status: res.status,
          type: res.headers.get("content-type"),
          encoding: res.headers.get("content-encoding"),
          body: Buffer.from(await res.arrayBuffer()).toString("base64"),
        };
      };
      const lane = await send({});
      const connect = await send({ "connect-timeout-ms": "600000" });
      expect(lane).toEqual(connect);
      if (name.includes("gzipped")) expect(lane.encoding).toBe("gzip");
      if (lane.status !== 200) {
        // every refusal carries EP's typed detail
        const json = JSON.parse(Buffer.from(lane.body, "base64").toString("utf8"));
        expect(json.details?.[0]?.type, JSON.stringify(json)).toBe("ep.errors.v1.ErrorDetail");
      }
    });
  }
});
