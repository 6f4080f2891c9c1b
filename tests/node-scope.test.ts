// Issue 14, points 3 and 4: a node serves the domains it was registered for. It enrolls agents,
// claims and reads only there; registering without domains records "*" (the explicit wide grant);
// an admin can change the set, which applies at once. An agent token's fleet-wide reads are
// limited to its domain's agents and nodes. Each attack from the issue against a real tower.
import { Role } from "../gen/ep/tower/v1/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toEpError } from "../common/errors.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, type TestTower } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

let t: TestTower;
let a: string;
let b: string;
let taskA: string;
let taskB: string;

beforeAll(async () => {
  t = await startTower();
  const work = t.client(WorkService);
  a = (await work.createDomain({ name: "scope-a" })).domain!.id;
  b = (await work.createDomain({ name: "scope-b" })).domain!.id;
  const ma = (await work.createMission({ domainId: a, title: "ma" })).mission!.id;
  const mb = (await work.createMission({ domainId: b, title: "mb" })).mission!.id;
  taskA = (await work.createTask({ missionId: ma, title: "in a", input: { secret_plan: "a" } })).task!.id;
  taskB = (await work.createTask({ missionId: mb, title: "in b", input: { secret_plan: "b" } })).task!.id;
});

afterAll(async () => {
  await t?.close();
});

const code = async (p: Promise<unknown>) =>
  toEpError(await p.then(() => new Error("allowed")).catch((e: unknown) => e)).code;

async function node(hostname: string, domainIds: string[] = []) {
  const res = await t.client(NodeService).registerNode({ hostname, domainIds });
  return { id: res.node!.id, token: res.token, domains: res.node!.domains };
}

describe("a node serves the domains it was registered for", () => {
  it("records * without --domain, and the given set with it", async () => {
    expect((await node("wide")).domains).toEqual(["*"]);
    expect((await node("narrow", [a])).domains).toEqual([a]);
    expect(await code(t.client(NodeService).registerNode({ hostname: "bad", domainIds: ["dom_nope"] }))).toBe(
      "domain_not_found",
    );
  });

  it("point 3: cannot enroll an agent outside its domains (it could before, then operate there)", async () => {
    const n = await node("enroll-a", [a]);
    const agents = t.client(AgentService, n.token);
    expect((await agents.enrollAgent({ domainId: a, runtime: Runtime.SHELL, name: "ok" })).agent!.domainId).toBe(a);
    expect(await code(agents.enrollAgent({ domainId: b, runtime: Runtime.SHELL, name: "intruder" }))).toBe("forbidden");
    // nor can an admin place one there on its behalf
    expect(
      await code(
        t.client(AgentService).enrollAgent({ nodeId: n.id, domainId: b, runtime: Runtime.SHELL, name: "placed" }),
      ),
    ).toBe("forbidden");
    // a * node may, as it always could: the wide grant is explicit
    const wide = await node("enroll-wide");
    expect(
      (await t.client(AgentService, wide.token).enrollAgent({ domainId: b, runtime: Runtime.SHELL, name: "w" })).agent!
        .domainId,
    ).toBe(b);
  });

  it("point 4: reads only its domains (task by id, lists, events, MCP get_task)", async () => {
    const n = await node("reader-a", [a]);
    const work = t.client(WorkService, n.token);
    expect((await work.getTask({ taskId: taskA })).task!.id).toBe(taskA);
    expect(await code(work.getTask({ taskId: taskB }))).toBe("forbidden");
    const rest = await t.api("GET", `/work/tasks/${taskB}`, undefined, n.token);
    expect(rest.status).toBe(403);
    expect(JSON.stringify(rest.body)).not.toContain("secret_plan");
    expect((await work.listTasks({})).tasks.map((x) => x.domainId)).toEqual([a]);
    expect((await work.listMissions({})).missions.every((m) => m.domainId === a)).toBe(true);
    expect((await work.listDomains({})).domains.map((d) => d.id)).toEqual([a]);
    const events = (await t.client(EventService, n.token).listEvents({ afterId: 0n, limit: 1000 })).events;
    expect(events.length).toBeGreaterThan(0);
    expect(events.filter((e) => e.domainId !== a)).toEqual([]);
    const mcp = await t.api("POST", "/mcp/call", { tool: "get_task", arguments: { task_id: taskB } }, n.token);
    expect(mcp.status).toBe(403);
    // acting "for" a domain narrows: never into one where the node has no agents
    const acting = await t.api("POST", "/mcp/call", { tool: "list_missions", arguments: {}, domain_id: b }, n.token);
    expect(acting.status).toBe(403);
  });

  it("an admin changes the set, with an event; a removed domain is closed at once", async () => {
    const n = await node("changing");
    const agents = t.client(AgentService, n.token);
    const inB = (await agents.enrollAgent({ domainId: b, runtime: Runtime.SHELL, name: "b-worker" })).agent!;
    const set = await t.client(NodeService).setNodeDomains({ nodeId: n.id, domainIds: [a] });
    expect(set.node!.domains).toEqual([a]);
    expect(await code(t.client(WorkService, n.token).claimTask({ agentId: inB.id }))).toBe("forbidden");
    expect(await code(t.client(WorkService, n.token).getTask({ taskId: taskB }))).toBe("forbidden");
    const ev = (await t.client(EventService).listEvents({ afterId: 0n, limit: 10_000 })).events.filter(
      (e) => e.name === "node.domains_set" && JSON.stringify(e.payload).includes(n.id),
    );
    expect(ev).toHaveLength(1);
    expect((await t.client(NodeService).setNodeDomains({ nodeId: n.id, all: true })).node!.domains).toEqual(["*"]);
    expect((await t.client(WorkService, n.token).getTask({ taskId: taskB })).task!.id).toBe(taskB);
    // bad input names the field; only an admin may change it
    expect(await code(t.client(NodeService).setNodeDomains({ nodeId: n.id }))).toBe("invalid_argument");
    expect(await code(t.client(NodeService).setNodeDomains({ nodeId: n.id, domainIds: [a], all: true }))).toBe(
      "invalid_argument",
    );
    expect(await code(t.client(NodeService).setNodeDomains({ nodeId: "nod_missing", all: true }))).toBe(
      "node_not_found",
    );
    expect(await code(t.client(NodeService, n.token).setNodeDomains({ nodeId: n.id, all: true }))).toBe("forbidden");
  });
});

describe("an agent token's fleet-wide reads stay in its domain", () => {
  it("list_nodes and list_cron_jobs show only nodes with agents of its domain", async () => {
    const inA = await node("fleet-a", [a]);
    const inB = await node("fleet-b", [b]);
    await t.client(AgentService, inA.token).enrollAgent({ domainId: a, runtime: Runtime.SHELL, name: "fa" });
    await t.client(AgentService, inB.token).enrollAgent({ domainId: b, runtime: Runtime.SHELL, name: "fb" });
    for (const n of [inA, inB])
      await t
        .client(NodeService, n.token)
        .reportNodeState({ cronJobs: [{ name: `job-${n.id}`, schedule: "* * * * *" }] });
    const agentToken = (await t.client(AuthService).createToken({ name: "agent-a", role: Role.AGENT, domainId: a }))
      .secret;
    const nodes = await t.api("POST", "/mcp/call", { tool: "list_nodes", arguments: {} }, agentToken);
    const ids = nodes.body.result.nodes.map((n: { id: string }) => n.id);
    expect(ids).toContain(inA.id);
    expect(ids).not.toContain(inB.id);
    const cron = await t.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: {} }, agentToken);
    const cronNodes = cron.body.result.nodes.map((n: { node_id: string }) => n.node_id);
    expect(cronNodes).toContain(inA.id);
    expect(cronNodes).not.toContain(inB.id);
    expect(
      (await t.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: { node_id: inB.id } }, agentToken)).status,
    ).toBe(404);
    expect(await code(t.client(NodeService, agentToken).getNode({ nodeId: inB.id }))).toBe("node_not_found");
  });
});
