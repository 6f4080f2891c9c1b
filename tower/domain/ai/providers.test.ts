import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EpError } from "../../../common/errors.js";
import { TOOLS } from "../tools/catalog.js";
import {
  anthropicMessage,
  openAiCompletion,
  startFakeLlmServer,
  type FakeLlmServer,
  type FakeReply,
  type RecordedRequest,
} from "../../../test-support/fake-llm-server.js";
import { createPlanner } from "./create-planner.js";
import type { Env, Planner, PlannerContext } from "./planner.js";
import { anthropicBaseUrl, openAiBaseUrl } from "./provider-common.js";
import { PROVIDER_A_DEFAULT_MODEL } from "./provider-a.js";

const ctx: PlannerContext = {
  findDomain: (v) => (v === "acme" || v === "dom_acme0001" ? { id: "dom_acme0001", name: "acme" } : undefined),
  findMission: (v) =>
    v === "Launch prep" ? { id: "msn_launch0001", title: "Launch prep", domain_id: "dom_acme0001" } : undefined,
  findTask: (v) =>
    v === "Run tests" ? { id: "tsk_tests00001", title: "Run tests", mission_id: "msn_launch0001" } : undefined,
  findAgent: (v) => (v === "builder-1" ? { id: "agt_builder001", name: "builder-1" } : undefined),
  listPendingActionIds: () => [],
  snapshot: () => "domains: acme (dom_acme0001)",
  defaultRuntime: "vendorA_code",
};

const servers: FakeLlmServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function fake(handler: (req: RecordedRequest) => FakeReply | Promise<FakeReply>): Promise<FakeLlmServer> {
  const s = await startFakeLlmServer(handler);
  servers.push(s);
  return s;
}

function planWith(planner: Planner, content: string, history: { role: "user" | "assistant"; content: string }[] = []) {
  return planner.plan({ content, history, tools: [...TOOLS], context: ctx });
}

async function failure(p: Promise<unknown>): Promise<EpError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(EpError);
    return err as EpError;
  }
  throw new Error("expected a failure");
}

describe("createPlanner", () => {
  it("uses the heuristic planner when EP_AI_PROVIDER is unset or empty", () => {
    expect(createPlanner({}).name).toBe("heuristic");
    expect(createPlanner({ EP_AI_PROVIDER: "" }).name).toBe("heuristic");
  });

  it("refuses a provider without its key, naming the variable", () => {
    expect(() => createPlanner({ EP_AI_PROVIDER: "providerA" })).toThrow(/PROVIDERA_API_KEY/);
    expect(() => createPlanner({ EP_AI_PROVIDER: "providerB", PROVIDERB_API_KEY: " " })).toThrow(/PROVIDERB_API_KEY/);
    expect(() => createPlanner({ EP_AI_PROVIDER: "providerB", PROVIDERA_API_KEY: "k" })).toThrow(/PROVIDERB_API_KEY/);
    try {
      createPlanner({ EP_AI_PROVIDER: "providerA" });
    } catch (err) {
      expect((err as EpError).code).toBe("config_invalid");
      expect((err as EpError).details).toEqual({ field: "PROVIDERA_API_KEY" });
    }
  });

  it("refuses unknown providers and bad settings, naming the variable", () => {
    expect(() => createPlanner({ EP_AI_PROVIDER: "providerC" })).toThrow(
      /EP_AI_PROVIDER must be providerA, providerB or unset/,
    );
    expect(() =>
      createPlanner({ EP_AI_PROVIDER: "providerA", PROVIDERA_API_KEY: "k", EP_AI_TIMEOUT_SECONDS: "soon" }),
    ).toThrow(/EP_AI_TIMEOUT_SECONDS/);
    expect(() =>
      createPlanner({ EP_AI_PROVIDER: "providerB", PROVIDERB_API_KEY: "k", EP_AI_BASE_URL: "not a url" }),
    ).toThrow(/EP_AI_BASE_URL/);
    expect(() =>
      createPlanner({ EP_AI_PROVIDER: "providerB", PROVIDERB_API_KEY: "k", EP_AI_BASE_URL: "ftp://x/v1" }),
    ).toThrow(/EP_AI_BASE_URL/);
  });

  it("takes the model from EP_AI_MODEL", () => {
    expect(createPlanner({ EP_AI_PROVIDER: "providerA", PROVIDERA_API_KEY: "k", EP_AI_MODEL: "m-1" }).model).toBe(
      "m-1",
    );
    expect(createPlanner({ EP_AI_PROVIDER: "providerB", PROVIDERB_API_KEY: "k" }).model).toBe("gpt-4o-mini");
  });
});

describe("default models", () => {
  it("providerA's default is not on the Anthropic SDK's list of deprecated models", async () => {
    // not exported by the package: read the SDK's own table from its installed files
    const file = join(
      dirname(createRequire(import.meta.url).resolve("@anthropic-ai/sdk")),
      "internal",
      "data",
      "deprecated-models.js",
    );
    const { DEPRECATED_MODELS } = createRequire(import.meta.url)(file) as { DEPRECATED_MODELS: Record<string, string> };
    expect(Object.keys(DEPRECATED_MODELS).length).toBeGreaterThan(0);
    expect(
      DEPRECATED_MODELS[PROVIDER_A_DEFAULT_MODEL],
      `${PROVIDER_A_DEFAULT_MODEL} reaches end-of-life`,
    ).toBeUndefined();
  });
});

describe("EP_AI_BASE_URL normalisation", () => {
  it("gives the OpenAI SDK a base it appends /chat/completions to", () => {
    expect(openAiBaseUrl("https://api.openai.com/v1")).toBe("https://api.openai.com/v1");
    expect(openAiBaseUrl("https://api.openai.com/v1/")).toBe("https://api.openai.com/v1");
    expect(openAiBaseUrl("http://gateway:4000/v1")).toBe("http://gateway:4000/v1");
    expect(openAiBaseUrl("http://gateway:4000/v1/chat/completions")).toBe("http://gateway:4000/v1");
    expect(openAiBaseUrl("http://gateway:4000/openai/v1/chat/completions/")).toBe("http://gateway:4000/openai/v1");
    expect(openAiBaseUrl(undefined)).toBeUndefined();
    expect(openAiBaseUrl("")).toBeUndefined();
  });

  it("gives the Anthropic SDK a base it appends /v1/messages to", () => {
    expect(anthropicBaseUrl("https://api.anthropic.com")).toBe("https://api.anthropic.com");
    expect(anthropicBaseUrl("https://api.anthropic.com/")).toBe("https://api.anthropic.com");
    expect(anthropicBaseUrl("http://gateway:4000/v1")).toBe("http://gateway:4000");
    expect(anthropicBaseUrl("http://gateway:4000/anthropic/v1/messages")).toBe("http://gateway:4000/anthropic");
    expect(anthropicBaseUrl("http://gateway:4000/v1/chat/completions")).toBe("http://gateway:4000");
  });
});

const aEnv = (origin: string, baseSuffix: string, extra: Env = {}): Env => ({
  EP_AI_PROVIDER: "providerA",
  PROVIDERA_API_KEY: "sk-a-test",
  EP_AI_MODEL: "claude-test",
  EP_AI_BASE_URL: `${origin}${baseSuffix}`,
  ...extra,
});
const bEnv = (origin: string, baseSuffix: string, extra: Env = {}): Env => ({
  EP_AI_PROVIDER: "providerB",
  PROVIDERB_API_KEY: "sk-b-test",
  EP_AI_MODEL: "gpt-test",
  EP_AI_BASE_URL: `${origin}${baseSuffix}`,
  ...extra,
});

describe("providerA (Anthropic Messages wire format)", () => {
  it.each([
    ["standard base", "", "/v1/messages"],
    ["gateway base", "/gw/v1", "/gw/v1/messages"],
    ["full endpoint URL", "/v1/messages", "/v1/messages"],
  ])("speaks to a %s and turns tool_use blocks into tool calls", async (_form, suffix, expectedPath) => {
    const server = await fake(() => ({
      body: anthropicMessage([
        { type: "text", text: "Looking up the task and proposing a retry." },
        { type: "tool_use", id: "toolu_1", name: "get_task", input: { task_id: "tsk_tests00001" } },
        { type: "tool_use", id: "toolu_2", name: "retry_mesh_task", input: { task_id: "Run tests" } },
      ]),
    }));
    const planner = createPlanner(aEnv(server.origin, suffix));
    const out = await planWith(planner, "retry the test task", [
      { role: "assistant", content: "hello" },
      { role: "user", content: "hi" },
      { role: "user", content: "list tasks" },
      { role: "assistant", content: "Here are the tasks." },
    ]);
    expect(out.reply).toBe("Looking up the task and proposing a retry.");
    expect(out.toolCalls).toEqual([
      { tool: "get_task", arguments: { task_id: "tsk_tests00001" } },
      { tool: "retry_mesh_task", arguments: { task_id: "tsk_tests00001" } },
    ]);

    expect(server.requests).toHaveLength(1);
    const req = server.requests[0];
    expect(req.method).toBe("POST");
    expect(req.path).toBe(expectedPath);
    expect(req.headers["x-api-key"]).toBe("sk-a-test");
    expect(req.headers.authorization).toBe("Bearer sk-a-test");
    expect(req.headers["anthropic-version"]).toBeDefined();
    const body = req.body as {
      model: string;
      max_tokens: number;
      system: string;
      messages: unknown[];
      tools: Record<string, unknown>[];
    };
    expect(body.model).toBe("claude-test");
    expect(body.max_tokens).toBeGreaterThan(0);
    expect(body.system).toMatch(/pending action/);
    expect(body.system).toMatch(/dom_acme0001/);
    expect(body.system).toMatch(/vendorA_code/);
    expect(body.messages).toEqual([
      { role: "user", content: "hi\n\nlist tasks" },
      { role: "assistant", content: "Here are the tasks." },
      { role: "user", content: "retry the test task" },
    ]);
    const submit = body.tools.find((t) => t.name === "submit_mesh_task")!;
    expect(Object.keys(submit).sort()).toEqual(["description", "input_schema", "name"]);
    expect(submit.input_schema).toMatchObject({ type: "object", required: ["mission_id", "title"] });
    expect(body.tools.map((t) => t.name)).toEqual([...TOOLS.map((t) => t.name), "show_view"]);
  });

  it(
    "drops unknown tools and invalid arguments with a note, " +
      "fills the session runtime, and keeps valid view_specs only",
    async () => {
      const server = await fake(() => ({
        body: anthropicMessage([
          { type: "tool_use", id: "t1", name: "drop_database", input: {} },
          { type: "tool_use", id: "t2", name: "get_task", input: { task_id: 42 } },
          { type: "tool_use", id: "t3", name: "submit_mesh_task", input: { mission_id: "Launch prep", title: "Lint" } },
          {
            type: "tool_use",
            id: "t4",
            name: "show_view",
            input: {
              view_specs: [
                { type: "kv", items: [{ key: "a", value: 1 }] },
                { type: "kv", items: [{ key: "x", value: "<script>alert(1)</script>" }] },
                { type: "iframe", src: "javascript:alert(1)" },
              ],
            },
          },
        ]),
      }));
      const out = await planWith(createPlanner(aEnv(server.origin, "")), "do things");
      expect(out.toolCalls).toEqual([
        {
          tool: "submit_mesh_task",
          arguments: { mission_id: "msn_launch0001", title: "Lint", runtime: "vendorA_code" },
        },
      ]);
      expect(out.viewSpecs).toEqual([{ type: "kv", items: [{ key: "a", value: 1 }] }]);
      expect(out.reply).toMatch(/Proposed submit_mesh_task/);
      expect(out.reply).toMatch(/unknown tool 'drop_database'/);
      expect(out.reply).toMatch(/arguments\.task_id must be string/);
      expect(out.reply).toMatch(/must not contain HTML tags/);
      expect(out.reply).toMatch(/must not contain a script URL|type must be one of/);
    },
  );

  it("turns an HTTP error into EpError unavailable naming the key, without retrying", async () => {
    const server = await fake(() => ({
      status: 401,
      body: { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } },
    }));
    const err = await failure(planWith(createPlanner(aEnv(server.origin, "")), "hi"));
    expect(err.code).toBe("unavailable");
    expect(err.message).toMatch(/providerA request failed with HTTP 401; check PROVIDERA_API_KEY/);
    expect(server.requests).toHaveLength(1);

    const busy = await fake(() => ({
      status: 529,
      body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
    }));
    const err2 = await failure(planWith(createPlanner(aEnv(busy.origin, "")), "hi"));
    expect(err2.message).toMatch(/HTTP 529/);
    expect(busy.requests).toHaveLength(1);
  });

  it("times out instead of hanging", async () => {
    const server = await fake(() => ({ hang: true }));
    const planner = createPlanner(aEnv(server.origin, "", { EP_AI_TIMEOUT_SECONDS: "0.3" }));
    const started = Date.now();
    const err = await failure(planWith(planner, "hi"));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(err.code).toBe("unavailable");
    expect(err.message).toMatch(/providerA did not answer within 0.3s \(EP_AI_TIMEOUT_SECONDS\)/);
  });

  it("reports an unreachable provider", async () => {
    const server = await fake(() => ({}));
    const origin = server.origin;
    await server.close();
    servers.pop();
    const err = await failure(planWith(createPlanner(aEnv(origin, "")), "hi"));
    expect(err.code).toBe("unavailable");
    expect(err.message).toMatch(/providerA could not be reached/);
  });

  it("rejects a malformed answer as unavailable", async () => {
    const server = await fake(() => ({ body: "{not json" }));
    const err = await failure(planWith(createPlanner(aEnv(server.origin, "")), "hi"));
    expect(err.code).toBe("unavailable");
  });
});

describe("providerB (OpenAI Chat Completions wire format)", () => {
  it.each([
    ["standard base", "/v1", "/v1/chat/completions"],
    ["OpenAI-compatible gateway base", "/litellm/v1", "/litellm/v1/chat/completions"],
    ["full chat-completions endpoint URL", "/v1/chat/completions", "/v1/chat/completions"],
  ])("speaks to a %s and turns tool_calls into tool calls", async (_form, suffix, expectedPath) => {
    const server = await fake(() => ({
      body: openAiCompletion(null, [
        { name: "list_agents", arguments: { domain_id: "acme" } },
        { name: "restart_agent", arguments: { agent_id: "builder-1" } },
      ]),
    }));
    const out = await planWith(createPlanner(bEnv(server.origin, suffix)), "restart builder-1", [
      { role: "user", content: "hi" },
    ]);
    expect(out.toolCalls).toEqual([
      { tool: "list_agents", arguments: { domain_id: "dom_acme0001" } },
      { tool: "restart_agent", arguments: { agent_id: "agt_builder001" } },
    ]);
    expect(out.reply).toMatch(/Proposed list_agents, restart_agent; approve or reject in the action bar/);

    expect(server.requests).toHaveLength(1);
    const req = server.requests[0];
    expect(req.method).toBe("POST");
    expect(req.path).toBe(expectedPath);
    expect(req.headers.authorization).toBe("Bearer sk-b-test");
    const body = req.body as {
      model: string;
      messages: { role: string; content: string }[];
      tools: Record<string, unknown>[];
      tool_choice: string;
    };
    expect(body.model).toBe("gpt-test");
    expect(body.tool_choice).toBe("auto");
    expect(body.messages[0].role).toBe("system");
    expect(body.messages.slice(1)).toEqual([{ role: "user", content: "hi\n\nrestart builder-1" }]);
    const tool = body.tools.find((t) => (t.function as { name: string }).name === "signal_agent")!;
    expect(tool).toEqual({
      type: "function",
      function: {
        name: "signal_agent",
        description: expect.any(String),
        parameters: expect.objectContaining({ type: "object", required: ["agent_id", "prompt"] }),
      },
    });
  });

  it("keeps the model's text and skips tool calls whose arguments are not JSON", async () => {
    const server = await fake(() => ({
      body: openAiCompletion("Here you go.", [
        { name: "get_task", arguments: "{task_id: oops" },
        { name: "list_nodes", arguments: "" },
        { name: "show_view", arguments: { view_specs: [{ type: "log_stream", lines: ["a", "b"] }] } },
      ]),
    }));
    const out = await planWith(createPlanner(bEnv(server.origin, "/v1")), "show nodes");
    expect(out.toolCalls).toEqual([{ tool: "list_nodes", arguments: {} }]);
    expect(out.viewSpecs).toEqual([{ type: "log_stream", lines: ["a", "b"] }]);
    expect(out.reply).toMatch(/^Here you go\.\nIgnored a call to 'get_task' whose arguments were not valid JSON\.$/);
  });

  it("turns HTTP errors into EpError unavailable with a hint", async () => {
    const server = await fake(() => ({ status: 500, body: { error: { message: "boom", type: "server_error" } } }));
    const err = await failure(planWith(createPlanner(bEnv(server.origin, "/v1")), "hi"));
    expect(err.code).toBe("unavailable");
    expect(err.message).toMatch(/providerB request failed with HTTP 500: .*boom/);
    expect(server.requests).toHaveLength(1);

    const missing = await fake(() => ({ status: 404, body: { error: { message: "model not found" } } }));
    const err2 = await failure(planWith(createPlanner(bEnv(missing.origin, "/v1")), "hi"));
    expect(err2.message).toMatch(/HTTP 404; check EP_AI_BASE_URL and EP_AI_MODEL/);

    const denied = await fake(() => ({ status: 401, body: { error: { message: "bad key" } } }));
    expect((await failure(planWith(createPlanner(bEnv(denied.origin, "/v1")), "hi"))).message).toMatch(
      /check PROVIDERB_API_KEY/,
    );
  });

  it("times out instead of hanging", async () => {
    const server = await fake(() => ({ hang: true }));
    const planner = createPlanner(bEnv(server.origin, "/v1/chat/completions", { EP_AI_TIMEOUT_SECONDS: "0.3" }));
    const started = Date.now();
    const err = await failure(planWith(planner, "hi"));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(err.code).toBe("unavailable");
    expect(err.message).toMatch(/providerB did not answer within 0.3s/);
  });

  it("rejects an answer without choices as unavailable", async () => {
    const server = await fake(() => ({ body: { id: "x", object: "chat.completion", choices: [] } }));
    const err = await failure(planWith(createPlanner(bEnv(server.origin, "/v1")), "hi"));
    expect(err.code).toBe("unavailable");
    expect(err.message).toMatch(/no choices/);
  });
});
