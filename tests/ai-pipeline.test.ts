// Issue 40: the AI console proposes a pipeline (the write tool run_pipeline) from a prompt, against
// a fake provider speaking the Anthropic wire format. The proposal is a pending action that
// creates nothing; approving it creates the mission and its waiting steps; a malformed file the
// model wrote is refused at approval, naming the line, and still creates nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  anthropicMessage,
  startFakeLlmServer,
  type FakeLlmServer,
  type FakeReply,
} from "../test-support/fake-llm-server.js";
import { startTower, type TestTower } from "./harness.js";

let reply: FakeReply = { status: 500 };
let fake: FakeLlmServer;
let t: TestTower;

beforeAll(async () => {
  fake = await startFakeLlmServer(() => reply);
  t = await startTower({
    env: {
      EP_AI_BASE_URL: fake.origin,
      EP_AI_PROVIDER: "providerA",
      PROVIDERA_API_KEY: "sk-test-a",
      EP_AI_TIMEOUT_SECONDS: "5",
    },
  });
});
afterAll(async () => {
  await t?.close();
  await fake?.close();
});

const PIPELINE = [
  'name = "ship it"',
  "[[step]]",
  'name = "build"',
  'command = "make"',
  "[[step]]",
  'name = "test"',
  'depends_on = ["build"]',
  'command = "make test"',
  "",
].join("\n");

async function propose(domainId: string, source: string) {
  reply = {
    body: anthropicMessage([
      { type: "text", text: "Here is a pipeline." },
      { type: "tool_use", id: "tu_1", name: "run_pipeline", input: { domain_id: domainId, source } },
    ]),
  };
  const session = (await t.api("POST", "/ai/sessions", { title: "plan" })).body.session.id as string;
  const res = await t.api("POST", `/ai/sessions/${session}/turns`, { content: "build then test" });
  expect(res.status).toBe(201);
  return { session, action: res.body.actions[0] };
}

describe("the AI console proposing a pipeline", () => {
  it("is a pending action that creates nothing until a person approves it; then the steps exist and wait", async () => {
    const domainId = (await t.api("POST", "/domains", { name: "ai-pipe" })).body.domain.id as string;
    const { session, action } = await propose(domainId, PIPELINE);
    expect(action).toMatchObject({ tool: "run_pipeline", status: "pending" });
    expect(action.summary).toBe('Run pipeline "ship it" in domain "ai-pipe": 2 step(s) (build → test)');
    expect((await t.api("GET", `/domains/${domainId}/m`)).body.missions).toEqual([]);

    const approved = await t.api("POST", `/ai/sessions/${session}/actions/${action.id}/approve`, {});
    expect(approved.status).toBe(200);
    const missions = (await t.api("GET", `/domains/${domainId}/m`)).body.missions;
    expect(missions.map((m: { title: string }) => m.title)).toEqual(["ship it"]);
    const pipeline = (await t.api("GET", `/work/missions/${missions[0].id}/pipeline`)).body;
    expect(pipeline.steps.map((s: { step: string; status: string }) => [s.step, s.status])).toEqual([
      ["build", "queued"],
      ["test", "waiting"],
    ]);
  });

  it("a malformed file the model wrote is refused at approval naming the line, and nothing is created", async () => {
    const domainId = (await t.api("POST", "/domains", { name: "ai-pipe-bad" })).body.domain.id as string;
    const { session, action } = await propose(domainId, '[[step]]\nname = "a"\ncommand = "x"\ndepends_on = ["nope"]\n');
    const approved = await t.api("POST", `/ai/sessions/${session}/actions/${action.id}/approve`, {});
    // approved and executed: the execution's outcome is the refusal, recorded as the action's error
    expect(approved.body.action).toMatchObject({
      status: "approved",
      error: expect.stringContaining(
        'pipeline_invalid: pipeline.toml:4: step "a": depends_on names unknown step "nope"',
      ),
    });
    expect((await t.api("GET", `/domains/${domainId}/m`)).body.missions).toEqual([]);
  });
});
