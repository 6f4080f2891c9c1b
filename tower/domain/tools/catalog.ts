// The MCP tool catalog: one list shared by the planner, /mcp/call, GET /mcp/tools and the
// /mcp endpoint. Read tools run at once; write tools become pending actions until approved.
// Argument names are the REST API's snake_case field names.
import { RUNTIME_KINDS } from "../../../common/runtimes.js";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { EpError } from "../../../common/errors.js";

export type ToolKind = "read" | "write";

/** A JSON Schema object describing a tool's arguments (always `type: "object"`). */
export interface JsonSchemaObject {
  type: "object";
  properties: Record<string, unknown>;
  required?: string[];
  additionalProperties: false;
  [keyword: string]: unknown;
}

export interface Tool {
  name: string;
  description: string;
  kind: ToolKind;
  inputSchema: JsonSchemaObject;
}

const id = (what: string): Record<string, unknown> => ({
  type: "string",
  minLength: 1,
  maxLength: 200,
  description: `${what} id`,
});
const text = (description: string, maxLength = 10_000): Record<string, unknown> => ({
  type: "string",
  minLength: 1,
  maxLength,
  description,
});
const int32 = (description: string, minimum = -2147483648): Record<string, unknown> => ({
  type: "integer",
  minimum,
  maximum: 2147483647,
  description,
});

function schema(
  properties: Record<string, unknown>,
  required: string[] = [],
  extra: Record<string, unknown> = {},
): JsonSchemaObject {
  const out: JsonSchemaObject = { type: "object", properties, additionalProperties: false, ...extra };
  if (required.length > 0) out.required = required;
  return out;
}

export const RUNTIMES = RUNTIME_KINDS;
export const CLAIM_POLICIES = ["first_claim", "assigned", "broadcast"] as const;
export const TASK_STATUSES = [
  "queued",
  "claimed",
  "running",
  "succeeded",
  "failed",
  "cancelled",
  "todo",
  "in_progress",
  "blocked",
  "review",
  "done",
] as const;
export const EVENT_TYPES = ["approval", "inbox", "matrix", "progress"] as const;

const TOOL_LIST: Tool[] = [
  // ---- read tools ----
  {
    name: "list_domains",
    kind: "read",
    description: "List all domains (the top of the domain → mission → task hierarchy).",
    inputSchema: schema({}),
  },
  {
    name: "list_missions",
    kind: "read",
    description: "List missions, optionally only those of one domain.",
    inputSchema: schema({ domain_id: id("Domain") }),
  },
  {
    name: "get_mission",
    kind: "read",
    description: "Show one mission with its details.",
    inputSchema: schema({ mission_id: id("Mission") }, ["mission_id"]),
  },
  {
    name: "list_tasks",
    kind: "read",
    description: "List tasks, optionally filtered by mission, domain, kind or status.",
    inputSchema: schema({
      mission_id: id("Mission"),
      domain_id: id("Domain"),
      kind: { type: "string", enum: ["assigned", "claimable"] },
      status: { type: "string", enum: [...TASK_STATUSES] },
      limit: int32("Maximum number of tasks", 1),
    }),
  },
  {
    name: "get_task",
    kind: "read",
    description: "Show one task with its state, attempts and result (output, exit status, error).",
    inputSchema: schema({ task_id: id("Task") }, ["task_id"]),
  },
  {
    name: "get_parent_results",
    kind: "read",
    description:
      "The tasks a task depends on (depends_on) with their state and result: " +
      "output, exit status, error, and the branch and commits of their workspace. " +
      "A task started after its parents succeeded reads what they produced here.",
    inputSchema: schema({ task_id: id("Task") }, ["task_id"]),
  },
  {
    name: "list_agents",
    kind: "read",
    description: "List agents, optionally only those of one domain or node.",
    inputSchema: schema({ domain_id: id("Domain"), node_id: id("Node") }),
  },
  {
    name: "get_agent",
    kind: "read",
    description: "Show one agent: runtime, capabilities, state and node.",
    inputSchema: schema({ agent_id: id("Agent") }, ["agent_id"]),
  },
  {
    name: "list_nodes",
    kind: "read",
    description: "List registered nodes and whether they are online.",
    inputSchema: schema({}),
  },
  {
    name: "list_pending_actions",
    kind: "read",
    description: "List actions waiting for approval (by default those of the current AI session).",
    inputSchema: schema({
      session_id: id("AI session"),
      status: { type: "string", enum: ["pending", "approved", "rejected"] },
    }),
  },
  {
    name: "list_events",
    kind: "read",
    description: "List recent events from the event log, optionally filtered.",
    inputSchema: schema({
      after_id: { type: "integer", minimum: 0, description: "Only events with a larger id" },
      limit: int32("Maximum number of events", 1),
      types: { type: "array", items: { type: "string", enum: [...EVENT_TYPES] }, uniqueItems: true },
      domain_id: id("Domain"),
      mission_id: id("Mission"),
      agent_id: id("Agent"),
      session_id: id("AI session"),
    }),
  },
  {
    name: "list_cron_jobs",
    kind: "read",
    description: "List cron jobs on the nodes with their next fire time and last fire.",
    inputSchema: schema({ node_id: id("Node") }),
  },
  {
    name: "get_supervision",
    kind: "read",
    description: "Show supervision state (auto-restart, pauses, restarts) of agents, or of one agent.",
    inputSchema: schema({ agent_id: id("Agent"), node_id: id("Node") }),
  },
  // ---- write tools ----
  {
    name: "create_domain",
    kind: "write",
    description: "Create a domain.",
    inputSchema: schema({ name: text("Domain name", 200) }, ["name"]),
  },
  {
    name: "create_mission",
    kind: "write",
    description: "Create a mission in a domain.",
    inputSchema: schema(
      {
        domain_id: id("Domain"),
        title: text("Mission title", 500),
        description: { type: "string", maxLength: 10_000 },
      },
      ["domain_id", "title"],
    ),
  },
  {
    name: "run_pipeline",
    kind: "write",
    description:
      'Create a mission\'s tasks from a pipeline file (TOML: name = "…", ' +
      "then [[step]] tables with name, runtime or agent, prompt or command, " +
      ("workspace {repo, ref?}, depends_on (step names), max_attempts, " +
        "claim_policy): each step waits until the steps it depends on succeeded. ") +
      "A malformed file is refused naming its line; nothing is created then.",
    inputSchema: schema(
      {
        domain_id: id("Domain"),
        source: text("The pipeline file's TOML text", 512 * 1024),
        title: { type: "string", maxLength: 500 },
        mission_id: id("Mission (add the steps to it)"),
      },
      ["domain_id", "source"],
    ),
  },
  {
    name: "put_doc",
    kind: "write",
    description: "Create or replace a mission document.",
    inputSchema: schema(
      {
        mission_id: id("Mission"),
        name: text("Document name", 200),
        content: { type: "string", maxLength: 1_000_000 },
        content_type: { type: "string", minLength: 1, maxLength: 200 },
      },
      ["mission_id", "name", "content"],
    ),
  },
  {
    name: "submit_mesh_task",
    kind: "write",
    description:
      "Create a claimable task in a mission; an agent with matching capabilities claims and runs it. " +
      "The shell runtime runs input.command; agent runtimes take input.prompt, else the title and description. " +
      ("With depends_on (task ids of the same domain) it waits until every one " +
        "of them succeeded, and its run gets their results (get_parent_results); ") +
      'input.workspace.ref "task:<id>" starts its worktree from that parent\'s branch.',
    inputSchema: schema(
      {
        mission_id: id("Mission"),
        title: text("Task title", 500),
        description: { type: "string", maxLength: 10_000 },
        claim_policy: { type: "string", enum: [...CLAIM_POLICIES], description: "Default first_claim" },
        priority: int32("Higher runs first (any 32-bit integer)"),
        capabilities: { type: "array", items: { type: "string", minLength: 1, maxLength: 100 }, maxItems: 50 },
        assignee_agent_id: id("Agent (required when claim_policy is assigned)"),
        max_attempts: int32("Attempts before the task fails", 1),
        runtime: { type: "string", enum: [...RUNTIMES] },
        depends_on: {
          type: "array",
          items: { type: "string", minLength: 1, maxLength: 100 },
          maxItems: 100,
          uniqueItems: true,
          description: "Tasks (ids, same domain) that must succeed first",
        },
        input: {
          type: "object",
          description: "Runtime input, e.g. {command} for shell or {prompt} for agent runtimes",
          properties: {
            command: { type: "string", minLength: 1, maxLength: 100_000 },
            prompt: { type: "string", minLength: 1, maxLength: 100_000 },
          },
        },
      },
      ["mission_id", "title"],
      {
        if: { properties: { claim_policy: { const: "assigned" } }, required: ["claim_policy"] },
        then: { required: ["assignee_agent_id"] },
      },
    ),
  },
  {
    name: "claim_mesh_task",
    kind: "write",
    description: "Claim the next matching claimable task for an agent (takes a lease).",
    inputSchema: schema({ agent_id: id("Agent"), wait_ms: { type: "integer", minimum: 0, maximum: 60_000 } }, [
      "agent_id",
    ]),
  },
  {
    name: "retry_mesh_task",
    kind: "write",
    description: "Put a failed or cancelled task back in the queue.",
    inputSchema: schema({ task_id: id("Task") }, ["task_id"]),
  },
  {
    name: "cancel_task",
    kind: "write",
    description: "Cancel a task; a running one is stopped.",
    inputSchema: schema({ task_id: id("Task"), reason: { type: "string", maxLength: 2_000 } }, ["task_id"]),
  },
  {
    name: "put_artifact",
    kind: "write",
    description: "Attach an artifact (an output file) to a task.",
    inputSchema: schema(
      {
        task_id: id("Task"),
        name: text("Artifact name", 200),
        content: { type: "string", maxLength: 1_000_000 },
        content_type: { type: "string", minLength: 1, maxLength: 200 },
      },
      ["task_id", "name", "content"],
    ),
  },
  {
    name: "signal_agent",
    kind: "write",
    description: "Deliver a prompt to an agent's inbox.",
    inputSchema: schema({ agent_id: id("Agent"), prompt: text("What to tell the agent", 100_000) }, [
      "agent_id",
      "prompt",
    ]),
  },
  {
    name: "restart_agent",
    kind: "write",
    description: "Restart an agent on its node.",
    inputSchema: schema({ agent_id: id("Agent") }, ["agent_id"]),
  },
  {
    name: "pause_agent",
    kind: "write",
    description: "Pause a supervised agent (auto-restart off).",
    inputSchema: schema({ agent_id: id("Agent") }, ["agent_id"]),
  },
  {
    name: "resume_agent",
    kind: "write",
    description: "Resume a paused agent (auto-restart on).",
    inputSchema: schema({ agent_id: id("Agent") }, ["agent_id"]),
  },
];

for (const tool of TOOL_LIST) {
  Object.freeze(tool);
}

/** Every tool, in catalog order (reads first). */
export const TOOLS: readonly Tool[] = Object.freeze(TOOL_LIST);

const byName = new Map(TOOLS.map((t) => [t.name, t]));

export function listTools(kind?: ToolKind): Tool[] {
  return TOOLS.filter((t) => kind === undefined || t.kind === kind);
}

export function findTool(name: string): Tool | undefined {
  return byName.get(name);
}

/** The named tool, or EpError `tool_not_found`. */
export function getTool(name: string): Tool {
  const tool = typeof name === "string" ? byName.get(name) : undefined;
  if (!tool)
    throw new EpError("tool_not_found", `No tool named '${String(name)}'; list them with GET /mcp/tools.`, {
      tool: name,
    });
  return tool;
}

export function isWriteTool(name: string): boolean {
  return getTool(name).kind === "write";
}

const ajv = new Ajv({ allErrors: false, strict: true, strictRequired: false });
const validators = new Map<string, ValidateFunction>();

function validatorFor(tool: Tool): ValidateFunction {
  let v = validators.get(tool.name);
  if (!v) {
    v = ajv.compile(tool.inputSchema);
    validators.set(tool.name, v);
  }
  return v;
}

/** Turns an Ajv instance path (`/input/command`, `/capabilities/0`) into `input.command`, `capabilities[0]`. */
export function jsonPathOf(instancePath: string, child?: string): string {
  const parts = instancePath
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (child !== undefined) parts.push(child);
  let out = "";
  for (const p of parts) {
    if (/^\d+$/.test(p)) out += `[${p}]`;
    else out += out === "" ? p : `.${p}`;
  }
  return out;
}

/** A clear message and the JSON path for the first Ajv error. */
export function describeAjvError(err: ErrorObject): { path: string; message: string } {
  const params = err.params as Record<string, unknown>;
  switch (err.keyword) {
    case "required":
      return { path: jsonPathOf(err.instancePath, String(params.missingProperty)), message: "is required" };
    case "additionalProperties":
      return { path: jsonPathOf(err.instancePath, String(params.additionalProperty)), message: "is not a known field" };
    case "enum":
      return {
        path: jsonPathOf(err.instancePath),
        message: `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`,
      };
    default:
      return { path: jsonPathOf(err.instancePath), message: err.message ?? "is invalid" };
  }
}

/**
 * Checks a tool call's arguments against the tool's schema. Returns the arguments (an object;
 * `undefined`/`null` count as `{}`) or throws EpError `invalid_argument` naming the JSON path,
 * or `tool_not_found` for an unknown tool.
 */
export function validateToolArgs(tool: string | Tool, args: unknown): Record<string, unknown> {
  const t = typeof tool === "string" ? getTool(tool) : tool;
  const value = args === undefined || args === null ? {} : args;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new EpError("invalid_argument", `${t.name}: arguments must be a JSON object`, {
      tool: t.name,
      field: "arguments",
    });
  }
  const validate = validatorFor(t);
  if (!validate(value)) {
    const { path, message } = describeAjvError(validate.errors![0]);
    const field = path === "" ? "arguments" : `arguments.${path}`;
    throw new EpError("invalid_argument", `${t.name}: ${field} ${message}`, { tool: t.name, field, path });
  }
  return value as Record<string, unknown>;
}

/** One line a human reads on an approval card, e.g. `retry_mesh_task task_id=tsk_…`. */
export function summarizeToolCall(tool: string, args: Record<string, unknown>): string {
  const parts = Object.entries(args)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => {
      const s = typeof v === "string" ? v : JSON.stringify(v);
      return `${k}=${s.length > 80 ? `${s.slice(0, 77)}...` : s}`;
    });
  return parts.length > 0 ? `${tool} ${parts.join(" ")}` : tool;
}
