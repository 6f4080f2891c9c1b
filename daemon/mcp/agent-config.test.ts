import { lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MCP_CONFIG_FILE, writeAgentMcpConfig } from "./agent-config.js";

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});
const dirOf = () => {
  const d = mkdtempSync(join(tmpdir(), "ep-mcp-config-"));
  roots.push(d);
  return d;
};
const read = (path: string) => JSON.parse(readFileSync(path, "utf8")).mcpServers.ep;

describe("a run's MCP config file", () => {
  it("is written 0600 with the run's agent and task", async () => {
    const dir = dirOf();
    const path = await writeAgentMcpConfig(dir, { command: "/opt/epd", agentId: "agt_1", domainId: "dom_1", taskId: "tsk_1" });
    expect(path).toBe(join(dir, MCP_CONFIG_FILE));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(read(path)).toMatchObject({ command: "/opt/epd", args: ["mcp"], env: { EP_AGENT_ID: "agt_1", EP_TASK_ID: "tsk_1" } });
  });

  it("replaces a previous run's config in place, longer or shorter, leaving nothing of it", async () => {
    const dir = dirOf();
    const path = join(dir, MCP_CONFIG_FILE);
    writeFileSync(path, JSON.stringify({ old: "x".repeat(5000) }), { mode: 0o600 });
    const ino = statSync(path).ino;
    await writeAgentMcpConfig(dir, { command: "epd", agentId: "agt_2", taskId: "tsk_2" });
    expect(statSync(path).ino).toBe(ino);
    expect(read(path).env).toEqual({ EP_AGENT_ID: "agt_2", EP_TASK_ID: "tsk_2" });
    await writeAgentMcpConfig(dir, { command: "epd", agentId: "agt_2", taskId: "tsk_3", env: { EP_BASE_URL: "http://tower.example:8008" } });
    expect(read(path).env).toEqual({ EP_BASE_URL: "http://tower.example:8008", EP_AGENT_ID: "agt_2", EP_TASK_ID: "tsk_3" });
  });

  it("is never written through a symlink left in its place", async () => {
    const dir = dirOf();
    const target = join(dir, "elsewhere.txt");
    writeFileSync(target, "precious\n");
    symlinkSync(target, join(dir, MCP_CONFIG_FILE));
    await expect(writeAgentMcpConfig(dir, { command: "epd", taskId: "tsk_1" })).rejects.toThrow(/ELOOP/);
    expect(readFileSync(target, "utf8")).toBe("precious\n");
    expect(lstatSync(join(dir, MCP_CONFIG_FILE)).isSymbolicLink()).toBe(true);
  });
});
