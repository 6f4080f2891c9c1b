// EP's MCP tools for the agents this epd runs, served by the running epd itself: streamable HTTP
// on a loopback port, one bearer credential per run (docs/runtimes.md "EP's tools"). A run's
// credential carries its task's scope (agent, domain, task) and is revoked when the run ends, so
// nothing outlives the run. Every CLI speaks this transport (claude --mcp-config, codex's
// mcp_servers.<name>.url, gemini's httpUrl, ACP's session/new http servers); no process is
// started per run. Calls go through the daemon's one validated tool path (tool-call.ts).
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Clock } from "../../common/clock.js";
import { toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { TowerClients } from "../link/tower-client.js";
import { createAgentMcpServer, fetchCatalog, type CatalogTool, type LocalTool } from "./mcp-server.js";
import { createPermissionTool, PERMISSION_TOOL_SPEC } from "./permission-tool.js";
import type { ToolCaller } from "./tool-call.js";

/** What one run is allowed through the endpoint. */
export interface McpScope {
  taskId: string;
  agentId: string;
  domainId: string;
  /** permission = "ask": the run's CLI asks a person through the permission_prompt tool, within this time */
  ask?: { timeoutMs: number };
}

/** A run's door: the URL, its bearer token, and the revocation the run calls when it ends. */
export interface McpGrant {
  url: string;
  token: string;
  revoke(): void;
}

export interface McpEndpoint {
  listen(): Promise<void>;
  grant(scope: McpScope): McpGrant;
  /** grants alive now (for tests and status) */
  granted(): number;
  close(): Promise<void>;
}

export interface McpEndpointOptions {
  caller: ToolCaller;
  tower: TowerClients;
  towerUrl: string;
  token: string;
  clock: Clock;
  log: Logger;
  /** the tower's catalog; by default GET /mcp/tools, read once and again after a failure */
  catalog?: () => Promise<CatalogTool[]>;
  /** 127.0.0.1 and a free port unless given */
  host?: string;
  port?: number;
}

/** A request body larger than this is refused (a tool call's arguments are small JSON). */
const BODY_LIMIT = 4 * 1024 * 1024;

export function createMcpEndpoint(o: McpEndpointOptions): McpEndpoint {
  const log = o.log.child({ part: "mcp" });
  const grants = new Map<string, { scope: McpScope; local: LocalTool[] }>();
  let cached: Promise<CatalogTool[]> | undefined;
  const catalog = () => {
    cached ??= (o.catalog ?? (() => fetchCatalog(o.towerUrl, o.token)))().catch((err: unknown) => {
      cached = undefined; // asked again on the next request
      throw err;
    });
    return cached;
  };
  let server: HttpServer | undefined;
  let base = "";

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? "/";
    if (!url.startsWith("/mcp")) return reply(res, 404, "not found: EP's MCP endpoint is /mcp");
    const grant = grantOf(req.headers.authorization, grants);
    if (!grant)
      return reply(
        res,
        401,
        "unauthorized: this endpoint takes the run's own bearer token (EP_MCP_TOKEN), valid while the run lasts",
      );
    if (req.method !== "POST")
      return reply(res, 405, "method not allowed: this endpoint answers POST (stateless streamable HTTP)");
    let body: unknown;
    try {
      body = await readJson(req);
    } catch (err) {
      return reply(res, 400, `bad request: ${(err as Error).message}`);
    }
    let tools: CatalogTool[];
    try {
      tools = await catalog();
    } catch (err) {
      return reply(res, 503, `EP's tool catalog is not available: ${toEpError(err).message}`);
    }
    const mcp = createAgentMcpServer(
      o.caller,
      tools,
      { agentId: grant.scope.agentId, domainId: grant.scope.domainId },
      grant.local,
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  };

  return {
    async listen() {
      server = createServer((req, res) => {
        handle(req, res).catch((err: unknown) => {
          log.warn("MCP request failed", { error: toEpError(err).message });
          if (!res.headersSent) reply(res, 500, "internal error");
        });
      });
      await new Promise<void>((resolve, reject) => {
        server!.once("error", reject);
        server!.listen(o.port ?? 0, o.host ?? "127.0.0.1", () => resolve());
      });
      const addr = server.address() as AddressInfo;
      base = `http://${addr.family === "IPv6" ? `[${addr.address}]` : addr.address}:${addr.port}/mcp`;
      log.debug("MCP endpoint listening", { url: base });
    },
    grant(scope) {
      if (!base) throw new Error("the MCP endpoint is not listening");
      const token = `epr_${randomBytes(24).toString("base64url")}`;
      // the tool claude's --permission-prompt-tool names, offered only to a run that asks people
      const local = scope.ask
        ? [
            {
              spec: PERMISSION_TOOL_SPEC,
              call: createPermissionTool({
                tower: o.tower,
                clock: o.clock,
                log,
                taskId: scope.taskId,
                agentId: scope.agentId,
                timeoutMs: scope.ask.timeoutMs,
              }),
            },
          ]
        : [];
      grants.set(token, { scope, local });
      return { url: base, token, revoke: () => void grants.delete(token) };
    },
    granted: () => grants.size,
    async close() {
      grants.clear();
      if (!server) return;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
    },
  };
}

/** The grant a bearer header names (192 random bits per run: a lookup, nothing to guess at). */
function grantOf<G>(header: string | undefined, grants: Map<string, G>): G | undefined {
  const token = /^Bearer\s+(\S+)$/i.exec(header ?? "")?.[1];
  return token ? grants.get(token) : undefined;
}

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > BODY_LIMIT) {
        reject(new Error(`the body is larger than ${BODY_LIMIT} bytes`));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch {
        reject(new Error("the body is not JSON (a JSON-RPC message was expected)"));
      }
    });
    req.on("error", reject);
  });
}

function reply(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: status === 401 ? -32001 : -32000, message } }));
}
