// The tower's MCP surfaces over real HTTP: GET /mcp/tools, POST /mcp/call (bad input, direct
// writes, a node acting for its agent), Connect ToolService, and a real MCP client on /mcp.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolService } from "../gen/ep/tower/v1/tools_pb.js";
import { AgentService, NodeService, CronKind, CronFireStatus } from "../gen/ep/tower/v1/fleet_pb.js";
import { startTower, type TestTower } from "./harness.js";
import { Runtime, ToolKind } from "../gen/ep/tower/v1/resources_pb.js";
import { timestampOf, msOf, isoOf } from "../common/vocab.js";

let t: TestTower;
let missionId: string;
let domainId: string;

beforeAll(async () => {
  t = await startTower();
  domainId = (await t.api("POST", "/domains", { name: "mcp" })).body.domain.id;
  missionId = (await t.api("POST", `/domains/${domainId}/m`, { title: "MCP mission" })).body.mission.id;
});
afterAll(async () => {
  await t?.close();
});

describe("GET /mcp/tools and POST /mcp/call", () => {
  it("lists the catalog with JSON Schemas and kinds", async () => {
    const res = await t.api("GET", "/mcp/tools");
    expect(res.status).toBe(200);
    const byName = new Map(res.body.tools.map((x: any) => [x.name, x]));
    expect(byName.get("submit_mesh_task")).toMatchObject({
      kind: "write",
      input_schema: { type: "object", required: ["mission_id", "title"] },
    });
    expect(byName.get("list_domains")).toMatchObject({ kind: "read" });
    expect((await t.api("GET", "/mcp/tools", undefined, null)).status).toBe(401);
  });

  it("runs reads and writes at once (the direct path has no approval step)", async () => {
    const submit = await t.api("POST", "/mcp/call", {
      tool: "submit_mesh_task",
      arguments: { mission_id: missionId, title: "direct", input: { command: "true" }, runtime: "shell" },
    });
    expect(submit.status).toBe(200);
    expect(submit.body.result.task).toMatchObject({ title: "direct", status: "queued", runtime: "shell" });
    const list = await t.api("POST", "/mcp/call", { tool: "list_tasks", arguments: { mission_id: missionId } });
    expect(list.body.result.tasks.map((x: any) => x.title)).toContain("direct");
    const doc = await t.api("POST", "/mcp/call", {
      tool: "put_doc",
      arguments: { mission_id: missionId, name: "plan.md", content: "# plan" },
    });
    expect(doc.body.result.doc).toMatchObject({ name: "plan.md", version: 1 });
    const again = await t.api("POST", "/mcp/call", {
      tool: "put_doc",
      arguments: { mission_id: missionId, name: "plan.md", content: "# plan v2" },
    });
    expect(again.body.result.doc).toMatchObject({ id: doc.body.result.doc.id, version: 2 });
    const mission = await t.api("POST", "/mcp/call", { tool: "get_mission", arguments: { mission_id: missionId } });
    expect(mission.body.result.docs.map((d: any) => d.name)).toEqual(["plan.md"]);
    const artifact = await t.api("POST", "/mcp/call", {
      tool: "put_artifact",
      arguments: { task_id: submit.body.result.task.id, name: "out.txt", content: "ok" },
    });
    expect(artifact.body.result.artifact).toMatchObject({ task_id: submit.body.result.task.id, version: 1 });
    const cron = await t.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: {} });
    expect(cron.status).toBe(200);
    expect(Array.isArray(cron.body.result.nodes)).toBe(true);
  });

  it("list_cron_jobs and get_supervision answer the latest state each node reported", async () => {
    const reg = await t.client(NodeService).registerNode({ hostname: "state-node" });
    const nodeId = reg.node!.id;
    const agent = (await t.client(AgentService).enrollAgent({ domainId, nodeId, runtime: Runtime.SHELL, name: "svc" }))
      .agent!;
    const asNode = t.client(NodeService, reg.token);
    // a node that never reported is listed only when asked for by id, with an empty report time
    const before = await t.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: { node_id: nodeId } });
    expect(before.body.result).toEqual({
      nodes: [
        {
          node_id: nodeId,
          hostname: "state-node",
          node_status: "registered",
          reported_at: "",
          jobs: [],
          config_errors: [],
        },
      ],
    });
    expect(
      (await t.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: {} })).body.result.nodes.map(
        (n: any) => n.node_id,
      ),
    ).not.toContain(nodeId);

    const first = await asNode.reportNodeState({
      cronJobs: [
        {
          name: "old",
          kind: CronKind.CRON,
          schedule: "0 * * * *",
          dispatch: "bash",
          prompt: "true",
          nextFireAt: timestampOf("2030-01-01T01:00:00.000Z"),
          line: 1,
        },
      ],
    });
    const res = await asNode.reportNodeState({
      cronJobs: [
        {
          name: "standup",
          kind: CronKind.CRON,
          schedule: "0 9 * * 1-5",
          dispatch: "signal",
          session: "pm",
          prompt: "/standup",
          missed: "skip",
          nextFireAt: timestampOf("2030-01-01T09:00:00.000Z"),
          line: 2,
          lastFire: {
            slot: "s",
            firedAt: timestampOf("2029-12-31T09:00:00.000Z"),
            status: CronFireStatus.FAILED,
            exitCode: 3,
            error: "boom",
          },
        },
      ],
      supervised: [
        {
          profile: "svc",
          agentId: agent.id,
          domainId,
          name: "svc",
          runtime: Runtime.SHELL,
          backend: "process",
          state: "running",
          pid: 42,
          restarts: 2,
          lastRestartReason: "found dead by the watchdog poll",
        },
        { profile: "other", name: "other", state: "dead", paused: true },
      ],
      configErrors: [{ file: "/x/agents.toml", line: 4, field: "runtime", item: "bad", message: "unknown runtime" }],
    });
    expect(msOf(res.reportedAt)).toBeGreaterThanOrEqual(msOf(first.reportedAt));

    const cron = (await t.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: { node_id: nodeId } })).body
      .result;
    expect(cron.nodes).toHaveLength(1);
    expect(cron.nodes[0]).toMatchObject({
      node_id: nodeId,
      hostname: "state-node",
      reported_at: isoOf(res.reportedAt),
      config_errors: [{ file: "/x/agents.toml", line: 4, item: "bad" }],
    });
    expect(cron.nodes[0].jobs).toEqual([
      {
        name: "standup",
        kind: "cron",
        schedule: "0 9 * * 1-5",
        interval: "",
        dispatch: "signal",
        session: "pm",
        prompt: "/standup",
        missed: "skip",
        next_fire_at: "2030-01-01T09:00:00.000Z",
        running: false,
        line: 2,
        last_fire: { slot: "s", fired_at: "2029-12-31T09:00:00.000Z", status: "failed", exit_code: 3, error: "boom" },
      },
    ]);
    // every reporting node, without a node_id
    expect(
      (await t.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: {} })).body.result.nodes.map(
        (n: any) => n.node_id,
      ),
    ).toContain(nodeId);

    const sup = (await t.api("POST", "/mcp/call", { tool: "get_supervision", arguments: { node_id: nodeId } })).body
      .result;
    expect(sup.nodes[0].reported_at).toBe(isoOf(res.reportedAt));
    expect(sup.nodes[0].agents.map((a: any) => a.profile)).toEqual(["svc", "other"]);
    expect(sup.nodes[0].agents[0]).toMatchObject({
      agent_id: agent.id,
      restarts: 2,
      pid: 42,
      backend: "process",
      tower_state: "idle",
    });
    const one = (await t.api("POST", "/mcp/call", { tool: "get_supervision", arguments: { agent_id: agent.id } })).body
      .result;
    expect(one.nodes).toHaveLength(1);
    expect(one.nodes[0].agents.map((a: any) => a.profile)).toEqual(["svc"]);
    expect(
      (await t.api("POST", "/mcp/call", { tool: "get_supervision", arguments: { agent_id: "agt_none" } })).status,
    ).toBe(404);
    expect(
      (await t.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: { node_id: "nod_none" } })).body.error
        .code,
    ).toBe("node_not_found");

    // only nodes report, with bounded, named input
    await expect(t.client(NodeService).reportNodeState({})).rejects.toThrow(/node/i);
    await expect(asNode.reportNodeState({ cronJobs: [{ name: "" }] })).rejects.toThrow(/cron_jobs\[0\]\.name/);
  });

  it("answers bad input with the JSON error: unknown tool 404, bad arguments 400 naming the path", async () => {
    const unknown = await t.api("POST", "/mcp/call", { tool: "drop_everything", arguments: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("tool_not_found");
    const bad = await t.api("POST", "/mcp/call", {
      tool: "submit_mesh_task",
      arguments: { mission_id: missionId, title: "x", input: { command: 5 } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "invalid_argument", details: { field: "arguments.input.command" } });
    const missing = await t.api("POST", "/mcp/call", { tool: "get_task", arguments: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.error.details.field).toBe("arguments.task_id");
    const extra = await t.api("POST", "/mcp/call", { tool: "list_domains", arguments: {}, approve: true });
    expect(extra.status).toBe(400);
    expect(extra.body.error.details.field).toBe("approve");
    const noTool = await t.api("POST", "/mcp/call", { arguments: {} });
    expect(noTool.status).toBe(400);
    expect(noTool.body.error.details.field).toBe("tool");
    const notFound = await t.api("POST", "/mcp/call", { tool: "get_task", arguments: { task_id: "tsk_nope" } });
    expect(notFound.status).toBe(404);
    expect(notFound.body.error.code).toBe("task_not_found");
  });

  it("lets a node act for its own agent, scoped to the agent's domain", async () => {
    const reg = await t.client(NodeService).registerNode({ hostname: "mcp-node" });
    const agent = (
      await t
        .client(AgentService)
        .enrollAgent({ domainId, nodeId: reg.node!.id, runtime: Runtime.SHELL, name: "mcp-agent" })
    ).agent!;
    const asNode = (body: unknown) => t.api("POST", "/mcp/call", body, reg.token);
    const ok = await asNode({
      tool: "submit_mesh_task",
      arguments: { mission_id: missionId, title: "from agent" },
      agent_id: agent.id,
    });
    expect(ok.status).toBe(200);
    const stranger = await asNode({ tool: "list_domains", arguments: {}, agent_id: "agt_not_here" });
    expect(stranger.status).toBe(404);
    const byDomain = await asNode({
      tool: "submit_mesh_task",
      arguments: { mission_id: missionId, title: "from domain" },
      domain_id: domainId,
    });
    expect(byDomain.status).toBe(200);
    // a domain scope narrows: work in another domain is refused
    const other = (await t.api("POST", "/domains", { name: "elsewhere" })).body.domain.id;
    const denied = await asNode({
      tool: "submit_mesh_task",
      arguments: { mission_id: missionId, title: "wrong domain" },
      domain_id: other,
    });
    expect(denied.status).toBe(403);
    const foreign = await asNode({ tool: "list_domains", arguments: {}, agent_id: agent.id, domain_id: other });
    expect(foreign.status).toBe(403);
  });
});

describe("Connect ToolService", () => {
  it("lists and calls tools", async () => {
    const tools = t.client(ToolService);
    const list = await tools.listTools({});
    expect(list.tools.find((x) => x.name === "retry_mesh_task")?.kind).toBe(ToolKind.WRITE);
    const res = await tools.callTool({ tool: "list_domains", arguments: {} });
    expect(JSON.stringify(res.result)).toContain("mcp");
  });

  it(
    "takes a node's agent and domain scope like POST " + "/mcp/call: the same tool behaves the same by either door",
    async () => {
      const reg = await t.client(NodeService).registerNode({ hostname: "connect-node" });
      const agent = (
        await t
          .client(AgentService)
          .enrollAgent({ domainId, nodeId: reg.node!.id, runtime: Runtime.SHELL, name: "connect-agent" })
      ).agent!;
      const asNode = t.client(ToolService, reg.token);
      const other = (await t.api("POST", "/domains", { name: "connect-elsewhere" })).body.domain.id;
      // acting as its agent: the task is the agent's work, in the agent's domain
      const viaConnect = await asNode.callTool({
        tool: "submit_mesh_task",
        arguments: { mission_id: missionId, title: "from connect" },
        agentId: agent.id,
      });
      const viaRest = await t.api(
        "POST",
        "/mcp/call",
        { tool: "submit_mesh_task", arguments: { mission_id: missionId, title: "from rest" }, agent_id: agent.id },
        reg.token,
      );
      expect(viaRest.status).toBe(200);
      const a = (toJson(ValueSchema, viaConnect.result!) as any).task;
      const b = viaRest.body.result.task;
      expect(a.domain_id).toBe(b.domain_id);
      // the same refusals at both doors: an agent that is not the node's, a domain it does not serve
      await expect(asNode.callTool({ tool: "list_domains", arguments: {}, agentId: "agt_not_here" })).rejects.toThrow(
        /agt_not_here/,
      );
      expect(
        (await t.api("POST", "/mcp/call", { tool: "list_domains", arguments: {}, agent_id: "agt_not_here" }, reg.token))
          .status,
      ).toBe(404);
      await expect(
        asNode.callTool({ tool: "list_domains", arguments: {}, agentId: agent.id, domainId: other }),
      ).rejects.toThrow(/not .*dom_/);
      expect(
        (
          await t.api(
            "POST",
            "/mcp/call",
            { tool: "list_domains", arguments: {}, agent_id: agent.id, domain_id: other },
            reg.token,
          )
        ).status,
      ).toBe(403);
    },
  );
});

describe("MCP Streamable HTTP at /mcp", () => {
  async function connect(token: string) {
    const client = new Client({ name: "ep-test", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    await client.connect(transport);
    return client;
  }

  it("a real MCP client lists and calls the tools with a Bearer header", async () => {
    const client = await connect(t.adminToken);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((x) => x.name)).toContain("submit_mesh_task");
      expect(tools.find((x) => x.name === "list_domains")?.annotations?.readOnlyHint).toBe(true);
      const res = await client.callTool({ name: "list_missions", arguments: { domain_id: domainId } });
      expect(res.isError).toBeFalsy();
      expect((res.structuredContent as any).missions[0].title).toBe("MCP mission");
      const bad = await client.callTool({ name: "get_task", arguments: {} });
      expect(bad.isError).toBe(true);
      expect((bad.content as { text: string }[])[0].text).toContain("arguments.task_id");
    } finally {
      await client.close();
    }
  });

  it("refuses a client without a valid token", async () => {
    await expect(connect("ept_not_a_token")).rejects.toThrow(/401|unauth/i);
  });

  it("answers malformed JSON with JSON-RPC -32700 and wrongly typed tools/call params with -32602", async () => {
    const post = (body: string) =>
      fetch(`${t.url}/mcp`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${t.adminToken}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body,
      });
    const parse = await post('{"jsonrpc":"2.0","id":1,');
    expect(parse.status).toBe(400);
    const pe = (await parse.json()) as { jsonrpc: string; id: unknown; error: { code: number; message: string } };
    expect(pe).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
    expect(pe.error.message).toContain("not valid JSON");

    for (const [params, says] of [
      [{ name: 5 }, "params.name must be a tool name (a string), not 5"],
      [{ name: "list_domains", arguments: [] }, "params.arguments must be an object"],
      [undefined, "params must be an object with name and arguments"],
    ] as const) {
      const res = await post(
        JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", ...(params ? { params } : {}) }),
      );
      expect(res.status).toBe(200);
      const body = (await res.json()) as { id: unknown; error: { code: number; message: string } };
      expect(body.id).toBe(7);
      expect(body.error.code).toBe(-32602);
      expect(body.error.message).toBe(`Invalid params: ${says}`);
    }
  });
});
