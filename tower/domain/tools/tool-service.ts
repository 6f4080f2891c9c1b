// The tool catalog as a service: listing and calling tools, the one path behind every door —
// POST /mcp/call, GET /mcp/tools, the MCP endpoint /mcp and Connect's ToolService. A node may
// name one of its agents (or a domain it serves) to act as it (actingCaller): every door takes
// that scope the same way, so a tool never behaves differently by the door it came through.
// Calls here run at once, writes included; only the AI planner's choices wait for approval.
import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { EpError } from "../../../common/errors.js";
import * as pb from "../../../gen/ep/tower/v1/tools_pb.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { TOOLS } from "./catalog.js";
import { actingCaller, type ToolExecutor } from "./executor.js";
import { valueOf } from "../convert.js";
import { ToolKindSchema, type ToolKind } from "../../../gen/ep/tower/v1/resources_pb.js";

export interface ToolScope {
  agentId?: string;
  domainId?: string;
}

/** The catalog as GET /mcp/tools shows it: snake_case, each tool with its JSON Schema and kind. */
export function catalogJson(): { tools: { name: string; description: string; kind: string; input_schema: unknown }[] } {
  return {
    tools: TOOLS.map((t) => ({ name: t.name, description: t.description, kind: t.kind, input_schema: t.inputSchema })),
  };
}

export type ToolService = ReturnType<typeof createToolService>;

export function createToolService(deps: Deps, executor: ToolExecutor) {
  /** Runs one tool as the caller (or as the agent or domain a node names). */
  async function call(caller: Caller, tool: unknown, args: unknown, scope: ToolScope = {}): Promise<unknown> {
    authorize(caller, "read");
    if (typeof tool !== "string" || tool === "")
      throw new EpError("invalid_argument", "tool: is required (a tool name from GET /mcp/tools)", { field: "tool" });
    return executor.run(await actingCaller(deps, caller, scope), tool, args);
  }

  return {
    call,

    catalog(caller: Caller) {
      authorize(caller, "read");
      return catalogJson();
    },

    async listTools(caller: Caller, _req: pb.ListToolsRequest): Promise<pb.ListToolsResponse> {
      authorize(caller, "read");
      return create(pb.ListToolsResponseSchema, {
        tools: TOOLS.map((t) =>
          create(pb.ToolSchema, {
            name: t.name,
            description: t.description,
            kind: valueOf<ToolKind>(ToolKindSchema, t.kind),
            inputSchema: t.inputSchema as unknown as JsonObject,
          }),
        ),
      });
    },

    async callTool(caller: Caller, req: pb.CallToolRequest): Promise<pb.CallToolResponse> {
      const result = await call(caller, req.tool, req.arguments ?? {}, {
        agentId: req.agentId || undefined,
        domainId: req.domainId || undefined,
      });
      return create(pb.CallToolResponseSchema, { result: fromJson(ValueSchema, (result ?? null) as JsonValue) });
    },
  };
}
