import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import { EpError } from "../../../common/errors.js";
import { TOOLS, findTool, getTool, isWriteTool, listTools, summarizeToolCall, validateToolArgs } from "./catalog.js";

function invalid(tool: string, args: unknown): EpError {
  try {
    validateToolArgs(tool, args);
  } catch (err) {
    expect(err).toBeInstanceOf(EpError);
    return err as EpError;
  }
  throw new Error(`accepted ${JSON.stringify(args)}`);
}

describe("tool catalog", () => {
  it("holds exactly the read and write tools of the console", () => {
    expect(listTools("read").map((t) => t.name)).toEqual([
      "list_domains",
      "list_missions",
      "get_mission",
      "list_tasks",
      "get_task",
      "get_parent_results",
      "list_agents",
      "get_agent",
      "list_nodes",
      "list_pending_actions",
      "list_events",
      "list_cron_jobs",
      "get_supervision",
    ]);
    expect(listTools("write").map((t) => t.name)).toEqual([
      "create_domain",
      "create_mission",
      "run_pipeline",
      "put_doc",
      "submit_mesh_task",
      "claim_mesh_task",
      "retry_mesh_task",
      "cancel_task",
      "put_artifact",
      "signal_agent",
      "restart_agent",
      "pause_agent",
      "resume_agent",
    ]);
    expect(TOOLS).toHaveLength(26);
  });

  it("names read tools list_* or get_* and no write tool so (the daemon's embedded booster relies on it)", () => {
    // daemon/booster/default-booster.wat lets list_*/get_* calls through with no arguments and
    // refuses empty payloads for every other tool (docs/booster.md).
    for (const tool of TOOLS) expect(/^(list|get)_/.test(tool.name), tool.name).toBe(tool.kind === "read");
  });

  it("gives every tool a description and a closed object schema that compiles as standard JSON Schema", () => {
    const ajv = new Ajv({ strict: false });
    for (const tool of TOOLS) {
      expect(tool.description.length, tool.name).toBeGreaterThan(10);
      expect(tool.name).toMatch(/^[a-z_]{1,64}$/);
      expect(tool.inputSchema.type).toBe("object");
      expect(tool.inputSchema.additionalProperties).toBe(false);
      expect(() => ajv.compile(tool.inputSchema)).not.toThrow();
      for (const key of Object.keys(tool.inputSchema.properties)) expect(key).toMatch(/^[a-z][a-z_]*$/);
    }
  });

  it("is frozen so no caller can change it for everyone", () => {
    expect(Object.isFrozen(TOOLS)).toBe(true);
    expect(Object.isFrozen(getTool("list_domains"))).toBe(true);
  });

  it("finds tools by name and reports unknown ones as tool_not_found", () => {
    expect(findTool("get_task")?.kind).toBe("read");
    expect(findTool("nope")).toBeUndefined();
    expect(isWriteTool("retry_mesh_task")).toBe(true);
    const err = (() => {
      try {
        getTool("drop_database");
      } catch (e) {
        return e as EpError;
      }
    })();
    expect(err?.code).toBe("tool_not_found");
    expect(err?.httpStatus).toBe(404);
    expect(err?.message).toMatch(/drop_database/);
    expect(() => validateToolArgs("drop_database", {})).toThrow(/No tool named 'drop_database'/);
  });

  it("accepts valid arguments and treats missing arguments as {}", () => {
    expect(validateToolArgs("list_domains", undefined)).toEqual({});
    expect(validateToolArgs("list_domains", null)).toEqual({});
    const args = {
      mission_id: "msn_1",
      title: "Run tests",
      description: "all of them",
      claim_policy: "first_claim",
      priority: -5,
      capabilities: ["node", "linux"],
      max_attempts: 2,
      runtime: "shell",
      input: { command: "npm test", env_hint: "extra keys are the runtime's business" },
    };
    expect(validateToolArgs("submit_mesh_task", args)).toBe(args);
    expect(validateToolArgs(getTool("list_events"), { after_id: 10, limit: 5, types: ["approval", "matrix"] })).toEqual(
      {
        after_id: 10,
        limit: 5,
        types: ["approval", "matrix"],
      },
    );
  });

  it("names the JSON path of what is wrong", () => {
    const cases: [string, unknown, RegExp, string][] = [
      ["get_task", {}, /get_task: arguments\.task_id is required/, "arguments.task_id"],
      ["get_task", { task_id: 5 }, /arguments\.task_id must be string/, "arguments.task_id"],
      ["get_task", { task_id: "" }, /arguments\.task_id must NOT have fewer than 1 characters/, "arguments.task_id"],
      ["get_task", { task_id: "tsk_1", extra: 1 }, /arguments\.extra is not a known field/, "arguments.extra"],
      [
        "submit_mesh_task",
        { mission_id: "m", title: "t", priority: 1.5 },
        /arguments\.priority must be integer/,
        "arguments.priority",
      ],
      [
        "submit_mesh_task",
        { mission_id: "m", title: "t", priority: 2 ** 31 },
        /arguments\.priority must be <= 2147483647/,
        "arguments.priority",
      ],
      [
        "submit_mesh_task",
        { mission_id: "m", title: "t", claim_policy: "whoever" },
        /claim_policy must be one of "first_claim", "assigned", "broadcast"/,
        "arguments.claim_policy",
      ],
      [
        "submit_mesh_task",
        { mission_id: "m", title: "t", claim_policy: "assigned" },
        /arguments\.assignee_agent_id is required/,
        "arguments.assignee_agent_id",
      ],
      [
        "submit_mesh_task",
        { mission_id: "m", title: "t", capabilities: ["ok", 3] },
        /arguments\.capabilities\[1\] must be string/,
        "arguments.capabilities[1]",
      ],
      [
        "submit_mesh_task",
        { mission_id: "m", title: "t", input: { command: 7 } },
        /arguments\.input\.command must be string/,
        "arguments.input.command",
      ],
      [
        "submit_mesh_task",
        { mission_id: "m", title: "t", runtime: "bash" },
        /arguments\.runtime must be one of/,
        "arguments.runtime",
      ],
      ["list_events", { types: ["gossip"] }, /arguments\.types\[0\] must be one of/, "arguments.types[0]"],
      ["signal_agent", { agent_id: "agt_1" }, /arguments\.prompt is required/, "arguments.prompt"],
      ["create_domain", [], /arguments must be a JSON object/, "arguments"],
      ["create_domain", "acme", /arguments must be a JSON object/, "arguments"],
    ];
    for (const [tool, args, message, field] of cases) {
      const err = invalid(tool, args);
      expect(err.code, `${tool} ${JSON.stringify(args)}`).toBe("invalid_argument");
      expect(err.httpStatus).toBe(400);
      expect(err.message).toMatch(message);
      expect(err.details).toMatchObject({ tool, field });
    }
  });

  it("summarises a call in one line for approval cards", () => {
    expect(summarizeToolCall("retry_mesh_task", { task_id: "tsk_1" })).toBe("retry_mesh_task task_id=tsk_1");
    expect(summarizeToolCall("list_nodes", {})).toBe("list_nodes");
    expect(summarizeToolCall("signal_agent", { agent_id: "a", prompt: "x".repeat(200) })).toMatch(
      /prompt=x{77}\.\.\.$/,
    );
  });
});
