// The MCP surfaces over the one tool catalog and executor:
//   POST /mcp/call   {tool, arguments, agent_id?, domain_id?} -> {result} | {error}
//   GET  /mcp/tools  the catalog, each tool with its JSON Schema and read/write kind
//   /mcp             a standard MCP Streamable HTTP endpoint (official SDK, stateless)
// The edge only decodes and encodes: authorization, the acting scope and the call itself are
// the domain's ToolService (tower/domain/tools/tool-service.ts), the same as Connect's.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { EpError, toEpError } from "../../../common/errors.js";
import { authorize, type Caller } from "../../domain/caller.js";
import { TOOLS, type ToolScope, type ToolService } from "../../domain/tools/index.js";

const CALL_FIELDS = new Set(["tool", "arguments", "agent_id", "domain_id"]);

function optionalId(body: Record<string, unknown>, field: string): string | undefined {
  const v = body[field];
  if (v === undefined || v === null || v === "") return undefined;
  if (typeof v !== "string" || v.length > 200)
    throw new EpError("invalid_argument", `${field}: must be an id string`, { field });
  return v;
}

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return (Array.isArray(v) ? v[0] : v) || undefined;
}

/** MCP result for a tool's JSON result: the JSON as text, and as structured content when it is an object. */
function toolResult(result: unknown): CallToolResult {
  const out: CallToolResult = { content: [{ type: "text", text: JSON.stringify(result ?? null) }] };
  if (result !== null && typeof result === "object" && !Array.isArray(result))
    out.structuredContent = result as Record<string, unknown>;
  return out;
}

export function registerMcpRoutes(app: FastifyInstance, tools: ToolService): void {
  const call = tools.call;

  app.post("/mcp/call", async (req) => {
    const body = req.body;
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
      throw new EpError("invalid_argument", 'send {"tool": "<name>", "arguments": {…}} as a JSON object', {
        field: "tool",
      });
    }
    const b = body as Record<string, unknown>;
    for (const k of Object.keys(b)) {
      if (!CALL_FIELDS.has(k))
        throw new EpError(
          "unknown_field",
          `${k}: no such field in a tool call (tool, arguments, agent_id, domain_id)`,
          { field: k },
        );
    }
    const result = await call(req.caller!, b.tool, b.arguments, {
      agentId: optionalId(b, "agent_id"),
      domainId: optionalId(b, "domain_id"),
    });
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

  const handleMcp = async (req: FastifyRequest, reply: FastifyReply) => {
    authorize(req.caller!, "read");
    // a tools/call whose params have the wrong types is the client's error (-32602), said plainly,
    // not the SDK's schema failure reported as an internal error
    const bad = badToolCall(req.body);
    if (bad) return reply.code(200).type("application/json").send(bad);
    const server = mcpServer(req.caller!, {
      agentId: header(req, "ep-agent-id"),
      domainId: header(req, "ep-domain-id"),
    });
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
  // a body that is not JSON is a JSON-RPC parse error (-32700), not the REST error shape
  app.post("/mcp", { errorHandler: mcpParseError }, handleMcp);
  app.get("/mcp", handleMcp);
  app.delete("/mcp", handleMcp);
}

/** JSON-RPC's answer to a body that does not parse; any other error goes to the tower's handler. */
function mcpParseError(err: Error & { code?: string }, _req: FastifyRequest, reply: FastifyReply): void {
  if (
    err.code === "FST_ERR_CTP_INVALID_JSON_BODY" ||
    err instanceof SyntaxError ||
    err.code === "FST_ERR_CTP_EMPTY_JSON_BODY"
  ) {
    void reply
      .code(400)
      .type("application/json")
      .send({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32700, message: `Parse error: the body is not valid JSON (${err.message})` },
      });
    return;
  }
  throw err;
}

/** The JSON-RPC error for a tools/call whose name or arguments have the wrong type, else undefined. */
export function badToolCall(body: unknown): object | undefined {
  if (!body || typeof body !== "object" || Array.isArray(body)) return undefined;
  const msg = body as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
  if (msg.method !== "tools/call") return undefined;
  const params = msg.params as { name?: unknown; arguments?: unknown } | undefined;
  const problem =
    !params || typeof params !== "object" || Array.isArray(params)
      ? "params must be an object with name and arguments"
      : typeof params.name !== "string" || !params.name
        ? `params.name must be a tool name (a string), not ${JSON.stringify(params.name ?? null)}`
        : params.arguments !== undefined &&
            (params.arguments === null || typeof params.arguments !== "object" || Array.isArray(params.arguments))
          ? "params.arguments must be an object"
          : undefined;
  if (!problem) return undefined;
  const id = typeof msg.id === "string" || typeof msg.id === "number" ? msg.id : null;
  return { jsonrpc: "2.0", id, error: { code: -32602, message: `Invalid params: ${problem}` } };
}
