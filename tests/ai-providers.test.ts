// AI sessions with the LLM planners against fake providers speaking the real wire formats:
// tool calls become pending actions; failures and timeouts become a visible turn error.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  anthropicMessage,
  openAiCompletion,
  startFakeLlmServer,
  type FakeLlmServer,
  type FakeReply,
} from "../test-support/fake-llm-server.js";
import { startTower, type TestTower } from "./harness.js";

let reply: FakeReply = { status: 500 };
let fake: FakeLlmServer;
let t: TestTower | undefined;

afterEach(async () => {
  await t?.close();
  t = undefined;
});
afterAll(async () => {
  await fake?.close();
});

async function towerWith(env: {
  EP_AI_PROVIDER: string;
  PROVIDERA_API_KEY?: string;
  PROVIDERB_API_KEY?: string;
}): Promise<TestTower> {
  fake ??= await startFakeLlmServer(() => reply);
  const keys = Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined);
  t = await startTower({
    env: { EP_AI_BASE_URL: fake.origin, EP_AI_TIMEOUT_SECONDS: "1", ...Object.fromEntries(keys) },
  });
  return t;
}

async function turn(tt: TestTower, content: string) {
  const s = (await tt.api("POST", "/ai/sessions", { title: "llm" })).body.session.id;
  const started = Date.now();
  const res = await tt.api("POST", `/ai/sessions/${s}/turns`, { content });
  return { s, res, ms: Date.now() - started };
}

describe.each([
  {
    provider: "providerA",
    env: { EP_AI_PROVIDER: "providerA", PROVIDERA_API_KEY: "sk-test-a" },
    toolReply: () =>
      anthropicMessage([
        { type: "text", text: "Creating it." },
        { type: "tool_use", id: "tu_1", name: "create_domain", input: { name: "llm-made" } },
      ]),
  },
  {
    provider: "providerB",
    env: { EP_AI_PROVIDER: "providerB", PROVIDERB_API_KEY: "sk-test-b" },
    toolReply: () => openAiCompletion("Creating it.", [{ name: "create_domain", arguments: { name: "llm-made" } }]),
  },
])("$provider", ({ provider, env, toolReply }) => {
  it("a tool call becomes a pending action that mutates nothing", async () => {
    const tt = await towerWith(env);
    reply = { body: toolReply() };
    const { res } = await turn(tt, "make a domain llm-made");
    expect(res.status).toBe(201);
    expect(res.body.reply).toMatchObject({ role: "assistant", error: "" });
    expect(res.body.actions).toHaveLength(1);
    expect(res.body.actions[0]).toMatchObject({
      tool: "create_domain",
      status: "pending",
      arguments: { name: "llm-made" },
    });
    expect((await tt.api("GET", "/domains")).body.domains).toHaveLength(0);
  });

  it("a provider failure is a visible turn error", async () => {
    const tt = await towerWith(env);
    reply = { status: 500, body: { error: { message: "upstream exploded", type: "server_error" } } };
    const { s, res } = await turn(tt, "list domains");
    expect(res.status).toBe(201);
    expect(res.body.reply.error).toContain(provider);
    expect(res.body.reply.error).toMatch(/500/);
    expect(res.body.reply.content).toContain(res.body.reply.error);
    expect(res.body.actions).toHaveLength(0);
    const stored = (await tt.api("GET", `/ai/sessions/${s}`)).body;
    expect(stored.turns.at(-1).error).toBe(res.body.reply.error);
    expect(stored.events.at(-1).payload.error).toBe(res.body.reply.error);
  });

  it("a provider that never answers times out into a turn error, never a hung turn", async () => {
    const tt = await towerWith(env);
    reply = { hang: true };
    const { res, ms } = await turn(tt, "list domains");
    expect(res.status).toBe(201);
    expect(res.body.reply.error).toMatch(/within 1s|EP_AI_TIMEOUT_SECONDS|timed out/i);
    expect(ms).toBeLessThan(5_000);
  });
});

describe("startup", () => {
  it("a provider without its key is a startup error naming the variable", async () => {
    await expect(startTower({ env: { EP_AI_PROVIDER: "providerB" } })).rejects.toThrow(/PROVIDERB_API_KEY/);
  });
});
