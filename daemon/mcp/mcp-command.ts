// `epd mcp [--backend-url <url>] [--booster-wasm <path>] [--agent-id <id>] [--domain <id>]`:
// the stdio MCP server agents are configured with. stdout carries the protocol only; logs go
// to stderr. Identity from the node file (EP_NODE_FILE); scope from the flags or
// EP_AGENT_ID / EP_DOMAIN_ID (set by the daemon for the agents it launches).
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { parseArgs } from "node:util";
import { EpError } from "../../common/errors.js";
import { createLogger } from "../../common/log.js";
import { readNodeIdentity } from "../../common/node-identity.js";
import { nodeFile } from "../../common/paths.js";
import { createTowerClients } from "../link/tower-client.js";
import { createAgentMcpServer, fetchCatalog } from "./mcp-server.js";
import { createPermissionTool, DEFAULT_PERMISSION_TIMEOUT_MS, PERMISSION_TOOL_SPEC } from "./permission-tool.js";
import { systemClock } from "../../common/clock.js";
import { openToolCaller } from "./tool-call.js";

export const MCP_HELP = `epd mcp — stdio MCP server offering the EP tool catalog to an agent

Usage: epd mcp [--backend-url <url>] [--booster-wasm <path>] [--agent-id <id>] [--domain <id>]

Every call is validated (schema pack EP_SCHEMA_PACK_FILE, planner booster) before it goes to
the tower's /mcp/call with this node's token.

Environment: EP_NODE_FILE, EP_BASE_URL, EP_SCHEMA_PACK_FILE, EP_BOOSTER_WASM, EP_AGENT_ID, EP_DOMAIN_ID,
EP_TASK_ID and EP_PERMISSION_TIMEOUT_MS (a run's server: the permission_prompt tool asks a person
for that task, for claude's --permission-prompt-tool)

Example (an MCP config for vendorA_code's --mcp-config):
  {"mcpServers": {"ep": {"command": "epd", "args": ["mcp"], "env": {"EP_AGENT_ID": "agt_..."}}}}
`;

export async function runMcpCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      "backend-url": { type: "string" },
      "booster-wasm": { type: "string" },
      "agent-id": { type: "string" },
      domain: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return void process.stdout.write(MCP_HELP);
  const log = createLogger("epd-mcp");
  const identity = await readNodeIdentity(nodeFile(env));
  const towerUrl = (values["backend-url"] || env.EP_BASE_URL || identity.tower_url).replace(/\/+$/, "");
  if (!/^https?:\/\/[^/]+/.test(towerUrl))
    throw new EpError("invalid_argument", `--backend-url must be an http(s) URL (got ${JSON.stringify(towerUrl)})`, {
      field: "backend-url",
    });
  const tower = createTowerClients(towerUrl, identity.token);
  const caller = await openToolCaller({
    towerUrl,
    token: identity.token,
    log,
    schemaPackFile: env.EP_SCHEMA_PACK_FILE,
    boosterWasm: values["booster-wasm"] || env.EP_BOOSTER_WASM,
    publish: (events) => tower.nodes.publishEvents({ events }),
  });
  const catalog = await fetchCatalog(towerUrl, identity.token);
  const agentId = values["agent-id"] || env.EP_AGENT_ID || undefined;
  // a run's server (the daemon wrote its task into the config) also answers the CLI's permission prompt
  const local =
    env.EP_TASK_ID && agentId
      ? [
          {
            spec: PERMISSION_TOOL_SPEC,
            call: createPermissionTool({
              tower,
              clock: systemClock,
              log,
              taskId: env.EP_TASK_ID,
              agentId,
              timeoutMs: Number(env.EP_PERMISSION_TIMEOUT_MS) || DEFAULT_PERMISSION_TIMEOUT_MS,
            }),
          },
        ]
      : [];
  const server = createAgentMcpServer(
    caller,
    catalog,
    { agentId, domainId: values.domain || env.EP_DOMAIN_ID || undefined },
    local,
  );
  const transport = new StdioServerTransport();
  await new Promise<void>((resolve, reject) => {
    transport.onclose = () => resolve();
    process.stdin.once("end", () => resolve());
    server.connect(transport).catch(reject);
  });
  await server.close().catch(() => undefined); // exiting: the transport may be closed already
  await caller.close();
}
