// The daemon's validated MCP path against a real tower: schema pack -> Wasm booster ->
// /mcp/call with the node token, telemetry as `booster.verdict` matrix events, and the
// stdio `epd mcp` server driven by a real MCP client.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger, type Logger } from "../common/log.js";
import { loadBooster, loadBoosterFromBytes, type Booster } from "../daemon/booster/booster.js";
import { loadSchemaPack } from "../daemon/booster/schema-pack.js";
import { compileWat } from "../test-support/wat-compiler.js";
import { agentMcpConfig } from "../daemon/mcp/agent-config.js";
import { createToolCaller, type ToolCaller } from "../daemon/mcp/tool-call.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { ROOT, startTower, waitFor, type TestTower } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

let t: TestTower;
let dir: string;
let nodeToken: string;
let nodeId: string;
let domainId: string;
let missionId: string;
let agentId: string;
const boosters: Booster[] = [];

/** A booster module answering `verdict` with `reason`, or running `body` as validate(). */
function wat(opts: { verdict?: number; reason?: string; body?: string }): string {
  const reason = opts.reason ?? "";
  return `(module
  (memory (export "memory") 1)
  (data (i32.const 16) "${reason}")
  (func (export "alloc") (param $len i32) (result i32) (i32.const 1024))
  (func (export "reason_ptr") (result i32) (i32.const 16))
  (func (export "reason_len") (result i32) (i32.const ${Buffer.byteLength(reason)}))
  (func (export "validate") (param $ptr i32) (param $len i32) (result i32)
    ${opts.body ?? `(i32.const ${opts.verdict ?? 0})`}))`;
}

async function booster(source: string, name: string): Promise<Booster> {
  const b = await loadBoosterFromBytes(await compileWat(source), name, { timeoutMs: 100 });
  boosters.push(b);
  return b;
}

interface Counting {
  calls: string[];
  fetch: typeof fetch;
}
function countingFetch(): Counting {
  const calls: string[] = [];
  return {
    calls,
    fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
      calls.push(String(input));
      return fetch(input, init);
    }) as typeof fetch,
  };
}

/** Requests to /mcp/call (the catalog read of GET /mcp/tools is not a tool call). */
const toCall = (c: Counting) => c.calls.filter((u) => u.endsWith("/mcp/call"));

function caller(b: Booster, c: Counting = countingFetch(), packPath?: string, log: Logger = silentLogger): ToolCaller {
  const nodes = createClient(
    NodeService,
    createConnectTransport({
      baseUrl: t.url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${nodeToken}`), next(req))],
    }),
  );
  return createToolCaller({
    towerUrl: t.url,
    token: nodeToken,
    pack: loadSchemaPack(packPath, log),
    booster: b,
    publish: (events) => nodes.publishEvents({ events }),
    fetch: c.fetch,
    log,
  });
}

async function verdictEvents(): Promise<any[]> {
  const events = (
    await t.api("POST", "/mcp/call", { tool: "list_events", arguments: { types: ["matrix"], limit: 1000 } })
  ).body.result.events;
  return events.filter((e: any) => e.name === "booster.verdict");
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "ep-mcp-daemon-"));
  t = await startTower();
  const reg = await t.client(NodeService).registerNode({ hostname: "mcp-daemon" });
  nodeToken = reg.token;
  nodeId = reg.node!.id;
  domainId = (await t.api("POST", "/domains", { name: "boosted" })).body.domain.id;
  missionId = (await t.api("POST", `/domains/${domainId}/m`, { title: "Boosted mission" })).body.mission.id;
  agentId = (
    await t.client(AgentService).enrollAgent({ domainId, nodeId, runtime: Runtime.SHELL, name: "boosted-agent" })
  ).agent!.id;
});
afterAll(async () => {
  for (const b of boosters) await b.close();
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("validated tool calls", () => {
  it("allow: the call reaches the tower with the node token, acting for the domain", async () => {
    const c = countingFetch();
    const tools = caller(await loadBooster(undefined, { timeoutMs: 100 }).then((b) => (boosters.push(b), b)), c);
    const out = await tools.call(
      "submit_mesh_task",
      { mission_id: missionId, title: "boosted", runtime: "shell", input: { command: "true" } },
      { domainId },
    );
    expect(out.shortCircuited).toBe(false);
    expect((out.result as any).task).toMatchObject({ title: "boosted", status: "queued" });
    expect(toCall(c)).toHaveLength(1);
    const listed = (await tools.call("list_tasks", { mission_id: missionId }, { domainId })).result as any;
    expect(listed.tasks.map((x: any) => x.title)).toContain("boosted");
    // the embedded default rejects empty payloads without a request; unknown tools are known as such
    await expect(tools.call("create_mission", {})).rejects.toMatchObject({ code: "invalid_argument" });
    await expect(tools.call("drop_tables", { all: true })).rejects.toMatchObject({ code: "tool_not_found" });
    expect(toCall(c)).toHaveLength(2);
  });

  it("the embedded default runs read tools that take no arguments and refuses an empty write payload", async () => {
    // a pack that lets any domain payload through, so the refusal below is the booster's own
    const pack = join(dir, "open-domain-pack.json");
    writeFileSync(pack, JSON.stringify({ domain: { type: "object" } }));
    const c = countingFetch();
    const tools = caller(await loadBooster(undefined, { timeoutMs: 100 }).then((b) => (boosters.push(b), b)), c, pack);
    const domains = await tools.call("list_domains", {});
    expect((domains.result as any).domains.map((d: any) => d.id)).toContain(domainId);
    const nodes = await tools.call("list_nodes", {});
    expect((nodes.result as any).nodes.map((n: any) => n.id)).toContain(nodeId);
    await tools.call("list_pending_actions", {});
    expect(toCall(c)).toHaveLength(3);
    const err = await tools.call("create_domain", {}).catch((e) => e);
    expect(err).toMatchObject({
      code: "invalid_argument",
      details: {
        field: "arguments",
        tool: "create_domain",
        booster: "embedded",
        reason: "payload is empty: the tool arguments must have at least one field",
      },
    });
    expect(toCall(c)).toHaveLength(3);
  });

  it("short-circuit answers with success, makes no HTTP request and emits a telemetry event", async () => {
    const c = countingFetch();
    const tools = caller(await booster(wat({ verdict: 2, reason: "cached answer" }), "short.wasm"), c);
    const before = (await verdictEvents()).length;
    const out = await tools.call(
      "submit_mesh_task",
      { mission_id: missionId, title: "never sent" },
      { domainId, agentId },
    );
    expect(out).toEqual({
      shortCircuited: true,
      result: { short_circuited: true, tool: "submit_mesh_task", reason: "cached answer" },
    });
    expect(toCall(c)).toHaveLength(0);
    await waitFor(async () => (await verdictEvents()).length > before);
    const ev = (await verdictEvents()).at(-1);
    expect(ev).toMatchObject({
      type: "matrix",
      name: "booster.verdict",
      status: "short_circuit",
      domain_id: domainId,
      agent_id: agentId,
    });
    expect(ev.payload).toMatchObject({
      tool: "submit_mesh_task",
      verdict: "short_circuit",
      reason: "cached answer",
      booster: "short.wasm",
      node_id: nodeId,
    });
    const tasks = (await t.api("GET", `/work/missions/${missionId}/tasks`)).body.tasks;
    expect(tasks.map((x: any) => x.title)).not.toContain("never sent");
  });

  it("reject: invalid_argument with the booster's reason, nothing sent", async () => {
    const c = countingFetch();
    const tools = caller(await booster(wat({ verdict: 1, reason: "no tasks on fridays" }), "reject.wasm"), c);
    const err = await tools.call("submit_mesh_task", { mission_id: missionId, title: "x" }).catch((e) => e);
    expect(err).toMatchObject({
      code: "invalid_argument",
      details: { reason: "no tasks on fridays", booster: "reject.wasm" },
    });
    expect(err.message).toContain("no tasks on fridays");
    expect(toCall(c)).toHaveLength(0);
  });

  it("a trapping booster is a clear error and the path stays alive", async () => {
    const c = countingFetch();
    const tools = caller(await booster(wat({ body: "(unreachable)" }), "trap.wasm"), c);
    const err = await tools.call("list_domains", { any: 1 }).catch((e) => e);
    expect(err).toMatchObject({ code: "internal", details: { cause: "trap" } });
    const again = await tools.call("list_domains", { any: 1 }).catch((e) => e);
    expect(again.code).toBe("internal");
    expect(toCall(c)).toHaveLength(0);
  });

  it("an infinite loop is stopped after the timeout; the next call works", async () => {
    const c = countingFetch();
    // loops when the input is longer than 40 bytes, allows otherwise
    const b = await booster(
      wat({ body: "(if (i32.gt_u (local.get $len) (i32.const 40)) (then (loop $l (br $l)))) (i32.const 0)" }),
      "loop.wasm",
    );
    const tools = caller(b, c);
    const started = Date.now();
    const err = await tools.call("list_missions", { domain_id: domainId }).catch((e) => e);
    expect(err).toMatchObject({ code: "internal", details: { cause: "timeout" } });
    expect(Date.now() - started).toBeLessThan(2_000);
    const ok = await tools.call("list_nodes", {});
    expect((ok.result as any).nodes.map((n: any) => n.id)).toContain(nodeId);
    expect(toCall(c)).toHaveLength(1);
  });

  it("a payload violating the schema pack is refused naming the JSON path", async () => {
    const pack = join(dir, "pack.json");
    writeFileSync(
      pack,
      JSON.stringify({
        task: { type: "object", required: ["title"], properties: { priority: { type: "integer", maximum: 10 } } },
      }),
    );
    const c = countingFetch();
    const tools = caller(await booster(wat({ verdict: 0 }), "allow.wasm"), c, pack);
    const err = await tools
      .call("submit_mesh_task", { mission_id: missionId, title: "too urgent", priority: 50 })
      .catch((e) => e);
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toContain("/priority");
    expect(err.details).toMatchObject({ field: "/priority", kind: "task", schema_pack: pack });
    expect(toCall(c)).toHaveLength(0);
    // the tower still names the path for what the pack lets through
    const towerErr = await tools
      .call("submit_mesh_task", { mission_id: missionId, title: "t", capabilities: [""] })
      .catch((e) => e);
    expect(towerErr).toMatchObject({ code: "invalid_argument", details: { field: "arguments.capabilities[0]" } });
  });

  it("a broken pack falls back to the embedded defaults with a warning", async () => {
    const pack = join(dir, "broken.json");
    writeFileSync(pack, "{ not json");
    const warnings: string[] = [];
    const log: Logger = { ...silentLogger, warn: (msg: string) => void warnings.push(msg) };
    const loaded = loadSchemaPack(pack, log);
    expect(loaded.source).toBe("embedded");
    expect(warnings.join("\n")).toContain("using the embedded defaults");
    const tools = caller(await booster(wat({ verdict: 0 }), "allow2.wasm"), countingFetch(), pack, log);
    const err = await tools.call("create_mission", { domain_id: domainId, title: 7 }).catch((e) => e);
    expect(err.message).toContain("/title");
    const ok = await tools.call("create_mission", { domain_id: domainId, title: "fine" });
    expect((ok.result as any).mission.title).toBe("fine");
  });
});

describe("epd mcp over stdio", () => {
  it("a real MCP client lists the catalog and calls tools through the validated path", async () => {
    const nodeFile = join(dir, "node.json");
    writeFileSync(
      nodeFile,
      JSON.stringify({ node_id: nodeId, hostname: "mcp-daemon", token: nodeToken, tower_url: t.url }),
      { mode: 0o600 },
    );
    // inside the repo so the bundle resolves node_modules (dist/ is build output, ignored by git)
    const entryDir = join(ROOT, "dist", `mcp-test-${process.pid}`);
    mkdirSync(entryDir, { recursive: true });
    const entry = join(entryDir, "epd-mcp-entry.ts");
    writeFileSync(
      entry,
      `import { runMcpCommand } from ${JSON.stringify(join(ROOT, "daemon/mcp/mcp-command.ts"))};\n// ` +
        `like epd's main: "mcp" then its flags\nconst [cmd, ...rest] = process.argv.slice(2);\nif ` +
        `(cmd !== "mcp") throw new Error("expected the mcp command");\nawait runMcpCommand(rest);\n`,
    );
    const shortWasm = join(dir, "short.wasm");
    writeFileSync(
      shortWasm,
      await compileWat(
        wat({
          body:
            "(if (result i32) (i32.gt_u (local.get $len) (i32.const " +
            "200)) (then (i32.const 2)) (else (i32.const 0)))",
          reason: "big payloads are answered locally",
        }),
      ),
    );
    const config = agentMcpConfig({
      command: process.execPath,
      commandArgs: [join(ROOT, "scripts/run-ts.mjs"), entry],
      agentId,
      boosterWasm: shortWasm,
      env: { EP_NODE_FILE: nodeFile },
    });
    const server = config.mcpServers.ep;
    expect(server.args.slice(-3)).toEqual(["mcp", "--booster-wasm", shortWasm]);
    const transport = new StdioClientTransport({
      command: server.command,
      args: server.args,
      env: { ...(process.env as Record<string, string>), ...server.env },
      stderr: "pipe",
      cwd: ROOT,
    });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(transport).catch((err: Error) => {
      throw new Error(`epd mcp did not start: ${err.message}\n${stderr}`);
    });
    try {
      const { tools } = await client.listTools();
      expect(tools.map((x) => x.name)).toEqual(
        expect.arrayContaining(["submit_mesh_task", "claim_mesh_task", "retry_mesh_task"]),
      );
      const sent = await client.callTool({
        name: "submit_mesh_task",
        arguments: { mission_id: missionId, title: "from the agent" },
      });
      expect(sent.isError).toBeFalsy();
      expect((sent.structuredContent as any).task.title).toBe("from the agent");
      const shorted = await client.callTool({
        name: "put_doc",
        arguments: { mission_id: missionId, name: "big.md", content: "x".repeat(300) },
      });
      expect(shorted.structuredContent).toMatchObject({
        short_circuited: true,
        reason: "big payloads are answered locally",
      });
      expect(shorted._meta).toMatchObject({ short_circuited: true });
      const refused = await client.callTool({ name: "create_mission", arguments: { domain_id: domainId, title: 5 } });
      expect(refused.isError).toBe(true);
      expect((refused.content as { text: string }[])[0].text).toContain("/title");
    } finally {
      await client.close();
      rmSync(entryDir, { recursive: true, force: true });
    }
    const tasks = (await t.api("GET", `/work/missions/${missionId}/tasks`)).body.tasks;
    // created as the agent (the node acts for EP_AGENT_ID)
    expect(tasks.find((x: any) => x.title === "from the agent")).toBeDefined();
    const docs = (await t.api("POST", "/mcp/call", { tool: "get_mission", arguments: { mission_id: missionId } })).body
      .result.docs;
    expect(docs.map((d: any) => d.name)).not.toContain("big.md");
  }, 60_000);
});
