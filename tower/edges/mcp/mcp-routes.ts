// The MCP surfaces over the one tool catalog and executor:
//   POST /mcp/call   {tool, arguments, agent_id?, domain_id?} -> {result} | {error}
//   GET  /mcp/tools  the catalog, each tool with its JSON Schema and read/write kind
//   /mcp             a standard MCP Streamable HTTP endpoint (official SDK, stateless)
// The edge only decodes and encodes: authorization, the acting scope and the call itself are
// the domain's ToolService (tower/domain/tools/tool-service.ts), the same as Connect's.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { EpError, toEpError } from "../../../common/errors.js";
import { authorize, type Caller } from "../../domain/caller.js";
import { TOOLS } from "../../domain/tools/catalog.js";
import type { ToolScope, ToolService } from "../../domain/tools/tool-service.js";

const CALL_FIELDS = new Set(["tool", "arguments", "agent_id", "domain_id"]);

function optionalId(body: Record<string, unknown>, field: string): string | undefined {
  const v = body[field];
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string" || v.length > 200) throw new EpError("invalid_argument", `${field}: must be an id string`, { field });
  return v;
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return (Array.isArray(v) ? v[0] : v) || undefined;
}

/** MCP result for a tool's JSON result: the JSON as text, and as structured content when it is an object. */
function toolResult(result: unknown): CallToolResult {
  const out: CallToolResult = { content: [{ type: "text", text: JSON.stringify(result ?? null) }] };
  if (result !== null && typeof result === "object" && !Array.isArray(result)) out.structuredContent = result as Record<string, unknown>;
  return out;
}

export function registerMcpRoutes(app: FastifyInstance, tools: ToolService): void {
  const call = tools.call;

  app.post("/mcp/call", async (req) => {
    const body = req.body;
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
      throw new EpError("invalid_argument", 'send {"tool": "<name>", "arguments": {…}} as a JSON object', { field: "tool" });
    }
    const b = body as Record<string, unknown>;
    for (const k of Object.keys(b)) {
      if (!CALL_FIELDS.has(k)) throw new EpError("unknown_field", `${k}: no such field in a tool call (tool, arguments, agent_id, domain_id)`, { field: k });
    }
    const result = await call(req.caller!, b.tool, b.arguments, { agentId: optionalId(b, "agent_id"), domainId: optionalId(b, "domain_id") });
    return { result: result ?? null };
  });

  app.get("/mcp/tools", async (req) => tools.catalog(req.caller!));

  /** One MCP server per request (stateless Streamable HTTP): the caller is fixed for its handlers. */
  function mcpServer(caller: Caller, scope: ToolScope): Server {
    const server = new Server({ name: "ep-tower", version: "0.1.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: TOOLS.map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
        annotations: { readOnlyHint: t.kind === "read", destructiveHint: false },
      })),
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      try {
        return toolResult(await call(caller, request.params.name, request.params.arguments ?? {}, scope));
      } catch (err) {
        // tool failures are results the model can read, not protocol errors
        return { isError: true, content: [{ type: "text", text: JSON.stringify(toEpError(err).toJSON()) }] };
      }
    });
    return server;
  }

  const handleMcp = async (req: FastifyRequest, reply: import("fastify").FastifyReply) => {
    authorize(req.caller!, "read");
    const server = mcpServer(req.caller!, { agentId: header(req, "ep-agent-id"), domainId: header(req, "ep-domain-id") });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.hijack();
    reply.raw.on("close", () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(req.raw, reply.raw, req.body);
    } catch (err) {
      if (!reply.raw.headersSent) {
        const ep = toEpError(err);
        reply.raw.writeHead(ep.httpStatus, { "content-type": "application/json" }).end(JSON.stringify(ep.toJSON()));
      }
    }
  };
  app.post("/mcp", handleMcp);
  app.get("/mcp", handleMcp);
  app.delete("/mcp", handleMcp);
}
