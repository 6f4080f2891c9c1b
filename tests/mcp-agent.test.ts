// Agents launched by a real epd get EP's tools from that epd: a URL and a bearer token of their
// run's own (EP_MCP_URL, EP_MCP_TOKEN, and EP_MCP_CONFIG for claude). A shell task prints them; a
// real MCP client (the SDK's streamable HTTP transport) lists the tools and submits work as that
// agent; the token is refused once the run is over, and without it nothing is served.
import { TaskKind, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { registerNode, spawnEpd, spawnTowerProcess, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, useCleanups, waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const cleanup = useCleanups();

describe("agents launched by epd", () => {
  it("get EP's tools over HTTP from their epd, with a credential that ends with the run", async () => {
    const h = tempHome("ep-mcp-agent-");
    cleanup(() => h.cleanup());
    const tower: TowerProcess = await spawnTowerProcess(h.dir);
    cleanup(() => tower.stop());
    const nodeFile = join(h.dir, "etc", "node.json");
    await registerNode(tower.url, tower.adminToken, nodeFile);
    const work = createClient(
      WorkService,
      createConnectTransport({
        baseUrl: tower.url,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))],
      }),
    );
    const domainId = (await work.createDomain({ name: "agents-mcp" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
    const epd: EpdProcess = await spawnEpd({ home: h.dir, nodeFile, backendUrl: tower.url });
    cleanup(() => epd.stop());
    await epd.call("agent.enroll", { domainId, runtime: "shell" });

    /** Runs a shell task on the agent; its id and output once it succeeded. */
    const runShell = async (command: string) => {
      const t = (
        await work.createTask({
          missionId,
          kind: TaskKind.CLAIMABLE,
          title: "run",
          runtime: Runtime.SHELL,
          input: { command },
        })
      ).task!;
      let out = "";
      await waitFor(async () => {
        const now = (await work.getTask({ taskId: t.id })).task!;
        out = now.result?.output ?? "";
        return now.status === TaskStatus.SUCCEEDED;
      }, 20_000);
      return { id: t.id, out };
    };
    // the run uses its door while it lasts: the shell task calls the endpoint itself
    const call =
      `curl -s -X POST "$EP_MCP_URL" -H "Authorization: Bearer $EP_MCP_TOKEN" ` +
      `-H 'content-type: application/json' -H 'accept: application/json, ` +
      `text/event-stream' -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'`;
    const task = await runShell(`tr -d '\\n' < "$EP_MCP_CONFIG"; echo; echo "$EP_MCP_URL $EP_MCP_TOKEN"; ${call}`);
    const [configText, door, listed] = task.out.split("\n");
    const config = JSON.parse(configText!) as {
      mcpServers: { ep: { type: string; url: string; headers: Record<string, string> } };
    };
    const [url, token] = door!.split(" ");
    expect(config.mcpServers.ep).toEqual({ type: "http", url, headers: { Authorization: `Bearer ${token}` } });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    expect(
      (JSON.parse(listed!) as { result: { tools: { name: string }[] } }).result.tools.map((t) => t.name),
    ).toContain("claim_mesh_task");

    // the run is over: its token is refused, as is none at all and a malformed body
    const post = (headers: Record<string, string>, body: string) =>
      fetch(url!, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body,
      });
    const toolsList = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    const ended = await post({ authorization: `Bearer ${token}` }, toolsList);
    expect(ended.status).toBe(401);
    expect(((await ended.json()) as { error: { message: string } }).error.message).toContain(
      "valid while the run lasts",
    );
    expect((await post({}, toolsList)).status).toBe(401);

    // a run in progress: a real MCP client with its token lists the tools and submits work as the agent
    const held = await work.createTask({
      missionId,
      kind: TaskKind.CLAIMABLE,
      title: "hold",
      runtime: Runtime.SHELL,
      input: { command: 'echo "$EP_MCP_TOKEN" > token.txt; sleep 30' },
    });
    let live = "";
    await waitFor(async () => {
      const dir = join(h.dir, "epd", "work", held.task!.id, "token.txt");
      live = existsSync(dir) ? readFileSync(dir, "utf8").trim() : "";
      return live !== "";
    }, 20_000);
    const bad = await post({ authorization: `Bearer ${live}` }, "{not json");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("not JSON");
    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url!), {
        requestInit: { headers: { authorization: `Bearer ${live}` } },
      }),
    );
    try {
      const tools = (await client.listTools()).tools.map((x) => x.name);
      expect(tools).toContain("claim_mesh_task");
      expect(tools).not.toContain("permission_prompt"); // only a run whose policy is "ask" is offered it
      const res = await client.callTool({
        name: "submit_mesh_task",
        arguments: {
          mission_id: missionId,
          title: "from an agent's MCP",
          runtime: "shell",
          input: { command: "true" },
        },
      });
      expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
      expect((res.structuredContent as any).task.title).toBe("from an agent's MCP");
    } finally {
      await client.close();
    }
    await work.cancelTask({ taskId: held.task!.id });
    await waitFor(async () => (await post({ authorization: `Bearer ${live}` }, toolsList)).status === 401, 20_000);

    // Later runs: each in work/<its id>/ holding only its own config. The first run left its
    // directory empty but for the config, so a later run got it renamed (run-dirs.ts); a
    // directory a run wrote into stays where it is for the operator.
    const kept = await runShell("echo kept > out.txt");
    const shown = await runShell('pwd; ls -A; cat "$EP_MCP_CONFIG"');
    const [cwd, listing, ...json] = shown.out.split("\n");
    const workRoot = dirname(cwd);
    expect(cwd).toBe(join(workRoot, shown.id));
    expect(listing).toBe(".ep-mcp.json");
    expect((JSON.parse(json.join("\n")) as typeof config).mcpServers.ep.url).toBe(url);
    expect(existsSync(join(workRoot, task.id))).toBe(false);
    expect(readFileSync(join(workRoot, kept.id, "out.txt"), "utf8")).toBe("kept\n");
  }, 90_000);
});
