// Agents launched by a real epd get an MCP config starting `epd mcp` for them: a shell task
// prints $EP_MCP_CONFIG, and a real MCP client started from that config (the built epd)
// lists the tools and submits work as that agent.
import { TaskKind, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { registerNode, spawnEpd, spawnTowerProcess, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, useCleanups, waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const cleanup = useCleanups();

describe("agents launched by epd", () => {
  it("get an MCP config for `epd mcp` that works as that agent", async () => {
    const h = tempHome("ep-mcp-agent-");
    cleanup(() => h.cleanup());
    const tower: TowerProcess = await spawnTowerProcess(h.dir);
    cleanup(() => tower.stop());
    const nodeFile = join(h.dir, "etc", "node.json");
    await registerNode(tower.url, tower.adminToken, nodeFile);
    const work = createClient(
      WorkService,
      createConnectTransport({ baseUrl: tower.url, httpVersion: "1.1", interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))] }),
    );
    const domainId = (await work.createDomain({ name: "agents-mcp" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
    const epd: EpdProcess = await spawnEpd({ home: h.dir, nodeFile, backendUrl: tower.url });
    cleanup(() => epd.stop());
    const agent = (await epd.call<{ agent: { id: string } }>("agent.enroll", { domainId, runtime: "shell" })).agent;

    /** Runs a shell task on the agent; its id and output once it succeeded. */
    const runShell = async (command: string) => {
      const t = (await work.createTask({ missionId, kind: TaskKind.CLAIMABLE, title: "run", runtime: Runtime.SHELL, input: { command } })).task!;
      let out = "";
      await waitFor(async () => {
        const now = (await work.getTask({ taskId: t.id })).task!;
        out = now.result?.output ?? "";
        return now.status === TaskStatus.SUCCEEDED;
      }, 20_000);
      return { id: t.id, out };
    };
    const task = await runShell('cat "$EP_MCP_CONFIG"');
    const config = JSON.parse(task.out) as { mcpServers: { ep: { command: string; args: string[]; env: Record<string, string> } } };
    const server = config.mcpServers.ep;
    expect(server.args[0]).toBe("mcp");
    expect(server.env).toMatchObject({ EP_AGENT_ID: agent.id, EP_DOMAIN_ID: domainId, EP_NODE_FILE: nodeFile });

    const client = new Client({ name: "agent", version: "1.0.0" });
    const transport = new StdioClientTransport({ command: server.command, args: server.args, env: { ...(process.env as Record<string, string>), EP_HOME: h.dir, ...server.env }, stderr: "pipe" });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    await client.connect(transport).catch((err: Error) => {
      throw new Error(`epd mcp did not start: ${err.message}\n${stderr}`);
    });
    try {
      expect((await client.listTools()).tools.map((x) => x.name)).toContain("claim_mesh_task");
      const res = await client.callTool({ name: "submit_mesh_task", arguments: { mission_id: missionId, title: "from an agent's MCP", runtime: "shell", input: { command: "true" } } });
      expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
      expect((res.structuredContent as any).task.title).toBe("from an agent's MCP");
    } finally {
      await client.close();
    }

    // Later runs: each in work/<its id>/ holding only its own config. The first run left its
    // directory empty but for the config, so a later run got it renamed (run-dirs.ts); a
    // directory a run wrote into stays where it is for the operator.
    const kept = await runShell("echo kept > out.txt");
    const shown = await runShell('pwd; ls -A; cat "$EP_MCP_CONFIG"');
    const [cwd, listing, ...json] = shown.out.split("\n");
    const workRoot = dirname(cwd);
    expect(cwd).toBe(join(workRoot, shown.id));
    expect(listing).toBe(".ep-mcp.json");
    expect((JSON.parse(json.join("\n")) as typeof config).mcpServers.ep.env.EP_TASK_ID).toBe(shown.id);
    expect(existsSync(join(workRoot, task.id))).toBe(false);
    expect(readFileSync(join(workRoot, kept.id, "out.txt"), "utf8")).toBe("kept\n");
  }, 90_000);
});
