// The `permission_prompt` tool of `epd mcp`: claude in -p mode (vendorA_code with
// permission = "ask") names it with `--permission-prompt-tool mcp__ep__permission_prompt` and
// calls it whenever its own rules would ask a person. Each call becomes a tower approval for the
// run's task (the same asker as ACP agents' requests); the answer is claude's JSON:
// {"behavior":"allow","updatedInput":…} or {"behavior":"deny","message":…}. "Allow <tool> for
// this task" is remembered by this server, which lives as long as the run.
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { TowerClients } from "../link/tower-client.js";
import { PERMISSION_TOOL } from "./agent-config.js";
import { pathsOf } from "../runtimes/acp-permission.js";
import { frameMsg, type ProgressFrame } from "../runtimes/runtime.js";
import { createPermissionAsker } from "../worker/permission-asker.js";

export const DEFAULT_PERMISSION_TIMEOUT_MS = 600_000;

export const PERMISSION_TOOL_SPEC: Tool = {
  name: PERMISSION_TOOL,
  description:
    "Asks a person (an EP approval) whether a tool call may run. " +
    "For the agent CLI's permission prompt, not for agents to call.",
  inputSchema: {
    type: "object",
    properties: { tool_name: { type: "string" }, input: { type: "object" }, tool_use_id: { type: "string" } },
    required: ["tool_name"],
  },
};

const OPTIONS = (tool: string) => [
  { optionId: "allow", name: "Allow", kind: "allow_once" },
  { optionId: "allow_always", name: `Allow ${tool} for this task`, kind: "allow_always" },
  { optionId: "reject", name: "Reject", kind: "reject_once" },
];

export function createPermissionTool(o: {
  tower: TowerClients;
  clock: Clock;
  log: Logger;
  taskId: string;
  agentId: string;
  timeoutMs: number;
}) {
  const allowed = new Set<string>();
  const report = (f: ProgressFrame) =>
    void o.tower.work
      .reportProgress({ taskId: o.taskId, agentId: o.agentId, frames: [frameMsg(f)] })
      .catch((err: Error) => o.log.debug("progress not delivered", { error: err.message }));
  const ask = createPermissionAsker({
    approvals: o.tower.approvals,
    clock: o.clock,
    log: o.log,
    taskId: o.taskId,
    agentId: o.agentId,
    onFrame: report,
  });
  const answer = (v: object): CallToolResult => ({ content: [{ type: "text", text: JSON.stringify(v) }] });

  return async (args: Record<string, unknown>, signal: AbortSignal): Promise<CallToolResult> => {
    const tool = typeof args.tool_name === "string" && args.tool_name ? args.tool_name : "tool";
    const input =
      args.input && typeof args.input === "object" && !Array.isArray(args.input)
        ? (args.input as Record<string, unknown>)
        : {};
    if (allowed.has(tool)) return answer({ behavior: "allow", updatedInput: input });
    try {
      const paths = [
        ...new Set(
          pathsOf({
            sessionId: "",
            options: [],
            toolCall: { toolCallId: String(args.tool_use_id ?? ""), rawInput: input },
          }) ?? [],
        ),
      ];
      const title =
        typeof input.description === "string"
          ? input.description
          : typeof input.command === "string"
            ? input.command
            : "";
      const decided = await ask(
        { tool, title, arguments: input, paths, options: OPTIONS(tool), timeoutMs: o.timeoutMs },
        signal,
      );
      if (!decided.approved)
        return answer({ behavior: "deny", message: `a person did not allow this (${decided.note})` });
      if (decided.optionId === "allow_always") allowed.add(tool);
      return answer({ behavior: "allow", updatedInput: input });
    } catch (err) {
      o.log.warn("could not ask for permission; denying", { error: (err as Error).message });
      return answer({ behavior: "deny", message: `EP could not ask a person: ${(err as Error).message}` });
    }
  };
}
