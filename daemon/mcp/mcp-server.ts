// `epd mcp`: a stdio MCP server (official SDK) offering the tower's tool catalog to an agent.
// The catalog comes from the tower's GET /mcp/tools (so it always matches the tower); every
// call goes through the validated path in tool-call.ts.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { EpError, toEpError } from "../../common/errors.js";
import type { ToolCaller, ToolCallScope } from "./tool-call.js";

export interface CatalogTool {
  name: string;
  description: string;
  kind: "read" | "write";
  input_schema: { type: "object"; [k: string]: unknown };
}

/** Reads the catalog from the tower (GET /mcp/tools with the node token). */
export async function fetchCatalog(
  towerUrl: string,
  token: string,
  doFetch: typeof fetch = fetch,
): Promise<CatalogTool[]> {
  let res: Response;
  try {
    res = await doFetch(`${towerUrl.replace(/\/+$/, "")}/mcp/tools`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(15_000),
    });
  } catch (err) {
    throw new EpError(
      "unavailable",
      `cannot read the tool catalog from ${towerUrl}/mcp/tools: ${(err as Error).message}`,
    );
  }
  // a body that is not JSON: the HTTP status below says what went wrong
  const body = (await res.json().catch(() => undefined)) as
    | { tools?: CatalogTool[]; error?: { message?: string } }
    | undefined;
  if (!res.ok || !Array.isArray(body?.tools)) {
    throw new EpError(
      "unavailable",
      `the tower answered HTTP ${res.status} for /mcp/tools${body?.error?.message ? `: ${body.error.message}` : ""}`,
    );
  }
  return body.tools;
}

function result(value: unknown, shortCircuited: boolean): CallToolResult {
  const out: CallToolResult = { content: [{ type: "text", text: JSON.stringify(value ?? null) }] };
  if (value !== null && typeof value === "object" && !Array.isArray(value))
    out.structuredContent = value as Record<string, unknown>;
  if (shortCircuited) out._meta = { short_circuited: true };
  return out;
}

/** A tool this server answers itself (not from the tower's catalog), e.g. permission_prompt. */
export interface LocalTool {
  spec: Tool;
  call(args: Record<string, unknown>, signal: AbortSignal): Promise<CallToolResult>;
}

/** The MCP server for one agent: tools/list is the catalog (and any local tools), tools/call the validated path. */
export function createAgentMcpServer(
  caller: ToolCaller,
  catalog: CatalogTool[],
  scope: ToolCallScope = {},
  local: LocalTool[] = [],
): Server {
  const server = new Server({ name: "epd", version: "0.1.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      ...catalog.map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: t.input_schema,
        annotations: { readOnlyHint: t.kind === "read" },
      })),
      ...local.map((t) => t.spec),
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const own = local.find((t) => t.spec.name === req.params.name);
    if (own) return own.call(req.params.arguments ?? {}, extra.signal);
    try {
      const out = await caller.call(req.params.name, req.params.arguments ?? {}, scope);
      return result(out.result, out.shortCircuited);
    } catch (err) {
      // a refused or failed call is a tool result the agent can read and act on
      return { isError: true, content: [{ type: "text", text: JSON.stringify(toEpError(err).toJSON()) }] };
    }
  });
  return server;
}
