// The work routes' POSTs are served from node:http before Fastify (tower/edges/rest/fast-lane.ts).
// Each request below goes once through the lane (Content-Type: application/json) and once
// through Fastify (a media type the lane leaves alone), and both answers must be the same:
// status, body, media type and WWW-Authenticate, for a good call and for every error class.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
let missionId: string;
let agentId: string;
beforeAll(async () => {
  t = await startTower({ env: { EP_BODY_LIMIT: "4096" } });
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name: "lane" })).domain!.id;
  missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  agentId = (await t.client(AgentService).enrollAgent({ domainId, runtime: Runtime.SHELL, name: "a" })).agent!.id;
});
afterAll(() => t.close());

const LANE = "application/json";
const FASTIFY = "application/json;charset=UTF-8";

async function post(path: string, body: string, type: string, auth: string | null = `Bearer ${t.adminToken}`) {
  const headers: Record<string, string> = { "content-type": type };
  if (auth) headers.authorization = auth;
  const res = await fetch(t.url + path, { method: "POST", headers, body });
  const text = await res.text();
  return { status: res.status, type: res.headers.get("content-type"), www: res.headers.get("www-authenticate"), body: text ? JSON.parse(text) : undefined };
}

/** The same request through the lane and through Fastify; the lane must have taken the first. */
async function both(path: string, body: string, auth?: string | null) {
  const before = t.tower.lane.served;
  const lane = await post(path, body, LANE, auth);
  expect(t.tower.lane.served, `${path} went through the lane`).toBe(before + 1);
  const fastify = await post(path, body, FASTIFY, auth);
  expect(t.tower.lane.served).toBe(before + 1);
  return { lane, fastify };
}

const strip = (x: { body?: { task?: Record<string, unknown> } }) => {
  // two calls make two tasks: compare their shape, not their ids and times
  const task = x.body?.task;
  if (task) for (const k of ["id", "created_at", "updated_at"]) task[k] = typeof task[k];
  return x;
};

describe("the REST fast lane", () => {
  it("answers a submit as Fastify does", async () => {
    const { lane, fastify } = await both(`/work/missions/${missionId}/tasks`, JSON.stringify({ title: "x", runtime: "shell", input: { command: "true" } }));
    expect(lane.status).toBe(201);
    expect(strip(lane)).toEqual(strip(fastify));
  });

  const cases: [string, () => string, string, string | null | undefined][] = [
    ["no credential (401, WWW-Authenticate)", () => `/work/missions/${missionId}/tasks`, JSON.stringify({ title: "x" }), null],
    ["an unknown token", () => `/work/missions/${missionId}/tasks`, JSON.stringify({ title: "x" }), "Bearer nope"],
    ["a malformed Authorization header", () => `/work/missions/${missionId}/tasks`, JSON.stringify({ title: "x" }), "Basic abc"],
    ["invalid JSON", () => `/work/missions/${missionId}/tasks`, '{"title": ', undefined],
    ["an array body", () => `/work/missions/${missionId}/tasks`, "[1]", undefined],
    ["null", () => `/work/missions/${missionId}/tasks`, "null", undefined],
    ["prototype poisoning", () => `/work/missions/${missionId}/tasks`, '{"title":"x","__proto__":{"admin":true}}', undefined],
    ["nested prototype poisoning", () => `/work/missions/${missionId}/tasks`, '{"title":"x","input":{"a":[{"__proto__":{}}]}}', undefined],
    ["constructor poisoning", () => `/work/missions/${missionId}/tasks`, '{"title":"x","input":{"constructor":{"prototype":{"admin":true}}}}', undefined],
    ["a body over the limit", () => `/work/missions/${missionId}/tasks`, JSON.stringify({ title: "x".repeat(5000) }), undefined],
    ["an unknown field", () => `/work/missions/${missionId}/tasks`, JSON.stringify({ title: "x", colour: "red" }), undefined],
    ["a word outside the set", () => `/work/missions/${missionId}/tasks`, JSON.stringify({ title: "x", claim_policy: "sometimes" }), undefined],
    ["a path parameter the body contradicts", () => `/work/missions/${missionId}/tasks`, JSON.stringify({ title: "x", mission_id: "msn_other" }), undefined],
    ["an unknown mission", () => "/work/missions/msn_nope/tasks", JSON.stringify({ title: "x" }), undefined],
    ["a bad wait_ms", () => `/work/agents/${agentId}/claim`, JSON.stringify({ wait_ms: -1 }), undefined],
    ["an unknown task", () => "/work/tasks/tsk_nope/complete", JSON.stringify({ agent_id: agentId }), undefined],
  ];
  for (const [name, path, body, auth] of cases) {
    it(`refuses ${name} as Fastify does`, async () => {
      const { lane, fastify } = await both(path(), body, auth);
      expect(lane.status).toBeGreaterThanOrEqual(400);
      expect(lane).toEqual(fastify);
    });
  }

  it("takes the words __proto__ and constructor as plain values, as Fastify does", async () => {
    const { lane, fastify } = await both(`/work/missions/${missionId}/tasks`, JSON.stringify({ title: "__proto__", description: "constructor", input: { constructor: "x" } }));
    expect(lane.status).toBe(201);
    expect(strip(lane)).toEqual(strip(fastify));
  });

  it("leaves the unusual to Fastify: a query string, a trailing slash, an empty body, another method", async () => {
    const before = t.tower.lane.served;
    const path = `/work/missions/${missionId}/tasks`;
    expect((await post(`${path}?x=1`, JSON.stringify({ title: "q" }), LANE)).status).toBe(400);
    expect((await post(`${path}/`, JSON.stringify({ title: "slash", runtime: "shell", input: { command: "true" } }), LANE)).status).toBe(201);
    expect((await fetch(`${t.url}/work/tasks/tsk_nope/retry`, { method: "POST", headers: { authorization: `Bearer ${t.adminToken}`, "content-type": LANE, "content-length": "0" } })).status).toBe(404);
    expect((await fetch(t.url + path, { method: "PUT", headers: { authorization: `Bearer ${t.adminToken}` } })).status).toBe(405);
    expect(t.tower.lane.served).toBe(before);
  });
});
