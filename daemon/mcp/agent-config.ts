// How agents launched by the daemon get the EP tools: the running epd serves them over streamable
// HTTP (mcp-endpoint.ts) and each run gets its own URL and bearer token. The run directory's
// `.ep-mcp.json` says so in the `mcpServers` shape claude's `--mcp-config` reads; codex, gemini and
// ACP agents are given the same URL and token their own way (the vendor files). `agentMcpConfig`
// (a config that starts `epd mcp` over stdio) remains for operators wiring other MCP clients.
import { closeSync, constants, ftruncateSync, openSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";

export const MCP_CONFIG_FILE = ".ep-mcp.json";
/** The tool of a run's `epd mcp` that claude's --permission-prompt-tool names (mcp__ep__permission_prompt). */
export const PERMISSION_TOOL = "permission_prompt";

export interface AgentMcpOptions {
  /** The command that runs epd (e.g. process.execPath) and the args before `mcp` (e.g. [epd entry script]). */
  command: string;
  commandArgs?: string[];
  agentId?: string;
  domainId?: string;
  /** the run's task: its permission requests (permission_prompt) are asked for it */
  taskId?: string;
  /** The daemon's --booster-wasm, so the agent's calls are boosted the same way. */
  boosterWasm?: string;
  /** Extra environment for the server (EP_NODE_FILE, EP_BASE_URL, EP_SCHEMA_PACK_FILE, EP_HOME …). */
  env?: Record<string, string>;
}

/** The `mcpServers` config that starts `epd mcp` for one agent. */
export function agentMcpConfig(o: AgentMcpOptions): {
  mcpServers: Record<string, { type: "stdio"; command: string; args: string[]; env: Record<string, string> }>;
} {
  const args = [...(o.commandArgs ?? []), "mcp", ...(o.boosterWasm ? ["--booster-wasm", o.boosterWasm] : [])];
  const env: Record<string, string> = { ...(o.env ?? {}) };
  if (o.agentId) env.EP_AGENT_ID = o.agentId;
  if (o.domainId) env.EP_DOMAIN_ID = o.domainId;
  if (o.taskId) env.EP_TASK_ID = o.taskId;
  return { mcpServers: { ep: { type: "stdio", command: o.command, args, env } } };
}

/**
 * The `mcpServers` config for a run's own HTTP door (its bearer token included: the file is 0600, in the run's
 * directory).
 */
export function runMcpConfig(grant: { url: string; token: string }): {
  mcpServers: Record<string, { type: "http"; url: string; headers: Record<string, string> }>;
} {
  return { mcpServers: { ep: { type: "http", url: grant.url, headers: { Authorization: `Bearer ${grant.token}` } } } };
}

/**
 * Writes the config into `dir` (0600: it holds the run's token) and returns its path. Synchronous:
 * one small file per run, cheaper than the promise round trips of open/write/close. A config a
 * previous run left there (a recycled run directory, worker/run-dirs.ts) is overwritten in place
 * (never through a symlink): truncating and reallocating its blocks costs several times the write.
 */
export function writeRunMcpConfig(dir: string, grant: { url: string; token: string }): string {
  return writeOwnFile(join(dir, MCP_CONFIG_FILE), JSON.stringify(runMcpConfig(grant), null, 2) + "\n");
}

/** Writes `text` to `path` (0600), in place over a file a previous run left, never through a symlink. */
export function writeOwnFile(path: string, text: string): string {
  const body = Buffer.from(text);
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    writeFileSync(path, body, { mode: 0o600, flag: "wx" });
    return path;
  }
  try {
    writeSync(fd, body, 0, body.length, 0);
    ftruncateSync(fd, body.length);
  } finally {
    closeSync(fd);
  }
  return path;
}
