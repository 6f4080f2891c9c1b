import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { ConnectRouter } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EpError, invalidField, toEpError } from "../../common/errors.js";
import { silentLogger } from "../../common/log.js";
import {
  AgentService,
  CronService,
  DaemonService,
  LocalAgentSchema,
  SuperviseService,
  ToolService,
} from "../../gen/ep/daemon/v1/mgmt_pb.js";
import type { AgentServiceEnrollRequest, LocalAgent } from "../../gen/ep/daemon/v1/mgmt_pb.js";
import { createMgmtTransport, jsonRpcCall } from "./client.js";
import { collectJsonRpcMethods, createJsonRpcHandler } from "./json-rpc.js";
import { openRawClient } from "./line-client.test-util.js";
import { serveMgmtSocket } from "./mgmt-socket.js";
import type { UnixSocketServer } from "./socket-server.js";

/** A small fake of the daemon's agent registry, as a class so `this` must survive registration. */
class FakeAgents {
  readonly agents: LocalAgent[] = [];

  enroll(req: AgentServiceEnrollRequest) {
    if (!req.domainId) throw invalidField("domainId", "is required");
    const agent = create(LocalAgentSchema, {
      id: `agt_${this.agents.length + 1}`,
      domainId: req.domainId,
      runtime: req.runtime,
      capabilities: req.capabilities,
      state: "idle",
    });
    this.agents.push(agent);
    return { agent };
  }

  list() {
    return { agents: this.agents };
  }

  signal(req: { target: string }): { deliveredVia: string } {
    throw new EpError("agent_not_found", `no agent or profile named ${req.target}`, { target: req.target });
  }
}

function fakeRoutes(agents: FakeAgents) {
  return (router: ConnectRouter) => {
    router.service(DaemonService, {
      status: () => ({
        nodeId: "nod_1",
        hostname: "worker-1",
        link: "connected",
        runningTasks: 2,
        agents: agents.agents,
      }),
    });
    router.service(AgentService, agents);
    router.service(CronService, {
      history: (req) => ({
        fires: Array.from({ length: req.limit }, (_, i) => ({
          job: req.name,
          slot: `slot-${i}`,
          status: "ok",
          exitCode: 0,
        })),
      }),
      gcNow: async () => ({ removed: 3 }),
    });
    router.service(SuperviseService, {
      restart: () => {
        throw new Error("database handle /var/private/thing exploded");
      },
    });
    router.service(ToolService, {
      run: (req) => ({
        result: { kind: { case: "stringValue", value: `${req.tool}:${req.domainId}` } },
        shortCircuited: true,
      }),
    });
  };
}

let dir: string;
let path: string;
let server: UnixSocketServer;
let agents: FakeAgents;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "ep-mgmt-"));
  path = join(dir, "mgmt.sock");
  agents = new FakeAgents();
  server = await serveMgmtSocket({ path, routes: fakeRoutes(agents), log: silentLogger });
});

afterEach(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("method names", () => {
  it("mirror the services: daemon.status, agent.enroll, cron.gcNow, supervise.restart, tool.run", () => {
    const all = (router: ConnectRouter) => {
      router.service(DaemonService, { status: () => ({}) });
      router.service(CronService, { list: () => ({}), gcNow: () => ({}) });
      router.service(SuperviseService, { restart: () => ({}) });
      router.service(ToolService, { run: () => ({}) });
      router.rpc(AgentService.method.enroll, () => ({}));
    };
    expect([...collectJsonRpcMethods(all).keys()].sort()).toEqual([
      "agent.enroll",
      "cron.gcNow",
      "cron.list",
      "daemon.status",
      "supervise.restart",
      "tool.run",
    ]);
    expect(createJsonRpcHandler({ routes: all }).methods).toContain("cron.gcNow");
  });
});

describe("the same implementation over JSON-RPC and Connect", () => {
  it("answers agent.enroll and daemon.status on a raw socket and through the generated client", async () => {
    const raw = await openRawClient(path);
    raw.send(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "agent.enroll",
        params: { domainId: "dom_1", runtime: "shell", capabilities: ["gpu"] },
      }) + "\n",
    );
    expect(await raw.next()).toMatchObject({
      jsonrpc: "2.0",
      id: 1,
      result: { agent: { id: "agt_1", domainId: "dom_1", runtime: "shell", capabilities: ["gpu"], state: "idle" } },
    });
    // Proto field names are accepted too, as in any proto JSON parser.
    raw.send(
      JSON.stringify({ jsonrpc: "2.0", id: "two", method: "agent.enroll", params: { domain_id: "dom_2" } }) + "\n",
    );
    expect(await raw.next()).toMatchObject({ id: "two", result: { agent: { id: "agt_2", domainId: "dom_2" } } });
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "daemon.status" }) + "\n");
    const viaJsonRpc = (await raw.next()) as { result: Record<string, unknown> };
    raw.end();
    await raw.closed;

    const client = createClient(DaemonService, createMgmtTransport(path));
    const viaConnect = await client.status({});
    expect(viaConnect.nodeId).toBe("nod_1");
    expect(viaConnect.agents.map((a) => a.id)).toEqual(["agt_1", "agt_2"]);
    expect(viaJsonRpc.result).toMatchObject({
      nodeId: "nod_1",
      hostname: "worker-1",
      link: "connected",
      runningTasks: 2,
    });
    expect((viaJsonRpc.result.agents as { id: string }[]).map((a) => a.id)).toEqual(["agt_1", "agt_2"]);
    // Implicit (default) fields are spelled out, so scripts need not guess them.
    expect(viaJsonRpc.result.booster).toBe("");
  });

  it("serves cron.history, cron.gcNow and tool.run with proto JSON params and results", async () => {
    expect(await jsonRpcCall(path, "cron.history", { name: "nightly", limit: 2 })).toEqual({
      fires: [
        { job: "nightly", slot: "slot-0", firedAt: "", status: "ok", exitCode: 0, output: "", error: "" },
        { job: "nightly", slot: "slot-1", firedAt: "", status: "ok", exitCode: 0, output: "", error: "" },
      ],
    });
    expect(await jsonRpcCall(path, "cron.gcNow")).toEqual({ removed: 3 });
    expect(
      await jsonRpcCall(path, "tool.run", { tool: "submit_mesh_task", domainId: "dom_1", arguments: { title: "x" } }),
    ).toEqual({
      result: "submit_mesh_task:dom_1",
      shortCircuited: true,
    });
    const cron = createClient(CronService, createMgmtTransport(path));
    expect((await cron.gcNow({})).removed).toBe(3);
  });

  it("maps an EpError to its JSON-RPC code and data, and to the Connect code", async () => {
    const raw = await openRawClient(path);
    raw.send(
      JSON.stringify({ jsonrpc: "2.0", id: 7, method: "agent.signal", params: { target: "ghost", prompt: "hi" } }) +
        "\n",
    );
    expect(await raw.next()).toEqual({
      jsonrpc: "2.0",
      id: 7,
      error: {
        code: -32004,
        message: "no agent or profile named ghost",
        data: { code: "agent_not_found", details: { target: "ghost" } },
      },
    });
    raw.end();

    await expect(jsonRpcCall(path, "agent.signal", { target: "ghost" })).rejects.toMatchObject({
      code: "agent_not_found",
      details: { target: "ghost" },
    });

    const client = createClient(AgentService, createMgmtTransport(path));
    const err = await client.signal({ target: "ghost" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.NotFound);
    expect(toEpError(err)).toMatchObject({ code: "agent_not_found", details: { target: "ghost" } });
  });

  it("hides an unexpected error's text behind an internal error on both protocols", async () => {
    const raw = await openRawClient(path);
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "supervise.restart", params: { id: "a" } }) + "\n");
    const reply = (await raw.next()) as { error: { code: number; message: string; data: { code: string } } };
    raw.end();
    expect(reply.error.code).toBe(-32603);
    expect(reply.error.data.code).toBe("internal");
    expect(reply.error.message).not.toContain("/var/private");

    const client = createClient(SuperviseService, createMgmtTransport(path));
    const err = await client.restart({ id: "a" }).catch((e: unknown) => e);
    expect((err as ConnectError).code).toBe(Code.Internal);
    expect((err as ConnectError).rawMessage).not.toContain("/var/private");
  });

  it("an implementation error on the Connect side keeps the field it names", async () => {
    const client = createClient(AgentService, createMgmtTransport(path));
    const err = await client.enroll({ runtime: "shell" }).catch((e: unknown) => e);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect(toEpError(err)).toMatchObject({ code: "invalid_argument", details: { field: "domainId" } });
  });
});

describe("JSON-RPC errors", () => {
  it("100 malformed lines in a row get parse errors and the connection and server keep serving", async () => {
    const raw = await openRawClient(path);
    const junk = ["{", "not json", '{"jsonrpc":', "}}}", "GARBAGE IN", "\u0000\u0001", "[1,2", "{'single':'quotes'}"];
    let batch = "";
    for (let i = 0; i < 100; i++) batch += junk[i % junk.length] + "\n";
    raw.send(batch);
    for (let i = 0; i < 100; i++) {
      expect(await raw.next()).toMatchObject({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32700, data: { code: "invalid_json" } },
      });
    }
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 101, method: "cron.gcNow" }) + "\n");
    expect(await raw.next()).toEqual({ jsonrpc: "2.0", id: 101, result: { removed: 3 } });
    raw.end();
    expect(await jsonRpcCall(path, "cron.gcNow")).toEqual({ removed: 3 });
  });

  it("a connection that starts with capitals but is no HTTP request is read as a line", async () => {
    const raw = await openRawClient(path);
    raw.send("HELLO\n");
    expect(await raw.next()).toMatchObject({ error: { code: -32700 } });
    raw.end();
  });

  it("an unknown method is -32601 and lists the methods", async () => {
    const raw = await openRawClient(path);
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "daemon.explode" }) + "\n");
    const reply = (await raw.next()) as { error: { code: number; message: string; data: unknown } };
    expect(reply.error.code).toBe(-32601);
    expect(reply.error.message).toContain("daemon.status");
    expect(reply.error.data).toEqual({ code: "route_not_found", details: { method: "daemon.explode" } });
    // A method the service defines but this registration left out is not found either.
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "cron.reload" }) + "\n");
    expect(await raw.next()).toMatchObject({ id: 2, error: { code: -32601 } });
    raw.end();
    await expect(jsonRpcCall(path, "nope.nothing")).rejects.toMatchObject({ code: "route_not_found" });
  });

  it("bad params are -32602 naming the field", async () => {
    const raw = await openRawClient(path);
    const ask = async (params: unknown) => {
      raw.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "cron.history", params }) + "\n");
      return (await raw.next()) as {
        error: { code: number; message: string; data: { code: string; details: { field?: string } } };
      };
    };
    const wrongType = await ask({ name: "nightly", limit: "lots" });
    expect(wrongType.error.code).toBe(-32602);
    expect(wrongType.error.data).toEqual({ code: "invalid_argument", details: { field: "limit" } });
    expect(wrongType.error.message).toMatch(/^limit: /);

    const unknown = await ask({ name: "nightly", colour: "blue" });
    expect(unknown.error.code).toBe(-32602);
    expect(unknown.error.data).toEqual({ code: "unknown_field", details: { field: "colour" } });
    expect(unknown.error.message).toContain("colour");

    const positional = await ask(["nightly", 2]);
    expect(positional.error).toMatchObject({ code: -32602, data: { details: { field: "params" } } });

    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tool.run", params: { tool: "x", arguments: 5 } }) + "\n");
    expect(await raw.next()).toMatchObject({
      id: 2,
      error: { code: -32602, data: { details: { field: "arguments" } } },
    });

    raw.send(
      JSON.stringify({ jsonrpc: "2.0", id: 3, method: "daemon.status", params: { lastFire: { status: 1 } } }) + "\n",
    );
    expect(await raw.next()).toMatchObject({
      id: 3,
      error: { code: -32602, data: { code: "unknown_field", details: { field: "lastFire" } } },
    });
    raw.end();
    await expect(jsonRpcCall(path, "cron.history", { limit: 1.5 })).rejects.toMatchObject({
      code: "invalid_argument",
      details: { field: "limit" },
    });
  });

  it("invalid requests are -32600; notifications get no answer; batches answer together", async () => {
    const raw = await openRawClient(path);
    raw.send(JSON.stringify({ id: 1, method: "cron.gcNow" }) + "\n");
    expect(await raw.next()).toMatchObject({ id: 1, error: { code: -32600, data: { details: { field: "jsonrpc" } } } });
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: { no: 1 }, method: "cron.gcNow" }) + "\n");
    expect(await raw.next()).toMatchObject({ id: null, error: { code: -32600, data: { details: { field: "id" } } } });
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "cron.gcNow", extra: true }) + "\n");
    expect(await raw.next()).toMatchObject({ id: 2, error: { code: -32600, data: { details: { field: "extra" } } } });
    raw.send("42\n");
    expect(await raw.next()).toMatchObject({ id: null, error: { code: -32600 } });
    raw.send("[]\n");
    expect(await raw.next()).toMatchObject({ id: null, error: { code: -32600 } });

    // A notification (no id) runs but is not answered: the next answer is for id 3.
    raw.send(JSON.stringify({ jsonrpc: "2.0", method: "agent.enroll", params: { domainId: "dom_n" } }) + "\n");
    raw.send(
      JSON.stringify([
        { jsonrpc: "2.0", id: 3, method: "agent.list" },
        { jsonrpc: "2.0", method: "cron.gcNow" },
        { jsonrpc: "2.0", id: 4, method: "no.such" },
        "junk",
      ]) + "\n",
    );
    const batch = (await raw.next()) as {
      id: unknown;
      result?: { agents: { domainId: string }[] };
      error?: { code: number };
    }[];
    expect(batch).toHaveLength(3);
    expect(batch[0].id).toBe(3);
    expect(batch[0].result?.agents.map((a) => a.domainId)).toEqual(["dom_n"]);
    expect(batch[1]).toMatchObject({ id: 4, error: { code: -32601 } });
    expect(batch[2]).toMatchObject({ id: null, error: { code: -32600 } });
    raw.end();
  });

  it("a line over 1 MiB gets an error and its connection is closed; the server keeps serving", async () => {
    const raw = await openRawClient(path);
    raw.send(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tool.run", params: { tool: "x".repeat(1024 * 1024) } }) + "\n",
    );
    expect(await raw.next()).toMatchObject({ id: null, error: { code: -32013, data: { code: "payload_too_large" } } });
    await raw.closed;
    expect(await jsonRpcCall(path, "cron.gcNow")).toEqual({ removed: 3 });
  });

  it("answers a request sent without a trailing newline before the client hangs up", async () => {
    const raw = await openRawClient(path);
    raw.send(JSON.stringify({ jsonrpc: "2.0", id: 9, method: "cron.gcNow" }));
    raw.end();
    expect(await raw.next()).toEqual({ jsonrpc: "2.0", id: 9, result: { removed: 3 } });
    await raw.closed;
  });

  it("jsonRpcCall reports a missing daemon as unavailable", async () => {
    await expect(jsonRpcCall(join(dir, "absent.sock"), "daemon.status")).rejects.toMatchObject({ code: "unavailable" });
  });
});
