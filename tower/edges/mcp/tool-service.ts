// ToolService over Connect: the catalog and direct tool calls, the same functions as
// GET /mcp/tools and POST /mcp/call.
import { create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import * as pb from "../../../gen/ep/tower/v1/ai_pb.js";
import { authorize, type Caller } from "../../domain/caller.js";
import { TOOLS } from "../../domain/tools/catalog.js";
import type { ToolExecutor } from "../../domain/tools/executor.js";

/** The catalog as GET /mcp/tools shows it: snake_case, each tool with its JSON Schema and kind. */
export function catalogJson(): { tools: { name: string; description: string; kind: string; input_schema: unknown }[] } {
  return { tools: TOOLS.map((t) => ({ name: t.name, description: t.description, kind: t.kind, input_schema: t.inputSchema })) };
}

export function createToolService(executor: ToolExecutor) {
  return {
    async listTools(caller: Caller, _req: pb.ListToolsRequest): Promise<pb.ListToolsResponse> {
      authorize(caller, "read");
      return create(pb.ListToolsResponseSchema, {
        tools: TOOLS.map((t) => create(pb.ToolSchema, { name: t.name, description: t.description, kind: t.kind, inputSchema: t.inputSchema as unknown as JsonObject })),
      });
    },

    async callTool(caller: Caller, req: pb.CallToolRequest): Promise<pb.CallToolResponse> {
      authorize(caller, "read");
      const result = await executor.run(caller, req.tool, req.arguments ?? {});
      return create(pb.CallToolResponseSchema, { result: fromJson(ValueSchema, (result ?? null) as JsonValue) });
    },
  };
}
