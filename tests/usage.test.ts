// Issue 15: usage and cost on every task. The CLIs' own final events (claude's result with usage
// and total_cost_usd, codex's turn.completed usage) reach the task result through a real epd and
// tower, show in `ep task get`, add up in `ep mission get`, and ride on the task events. The CLIs
// here are the small fixture executables printing the real stream shapes (tests/real-cli.test.ts
// runs the real ones).
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import { adminClient, startTowerAndEpd, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, waitFor } from "./harness.js";
import { runtimeOf } from "../test-support/words.js";

const home = tempHome("ep-usage-");
let tower: TowerProcess;
let epd: EpdProcess;

beforeAll(async () => {
  assertBuilt();
  ({ tower, epd } = await startTowerAndEpd(home.dir));
}, 60_000);

afterAll(async () => {
  await epd?.stop();
  await tower?.stop();
  home.cleanup();
});

describe("usage and cost", () => {
  it("claude and codex report tokens and cost per task; the mission adds them up", async () => {
    const work = adminClient(tower, WorkService);
    const domainId = (await work.createDomain({ name: "usage" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "costed" })).mission!.id;
    for (const runtime of ["vendorA_code", "vendorB"])
      await epd.call("agent.enroll", { domainId, runtime, name: runtime });
    const ids: string[] = [];
    for (const [runtime, prompt] of [
      ["vendorA_code", "first"],
      ["vendorA_code", "second"],
      ["vendorB", "third"],
    ]) {
      ids.push(
        (await work.createTask({ missionId, title: prompt, runtime: runtimeOf(runtime), input: { prompt } })).task!.id,
      );
    }
    await waitFor(
      async () =>
        (await Promise.all(ids.map(async (id) => (await work.getTask({ taskId: id })).task!.status))).every(
          (s) => s === TaskStatus.SUCCEEDED,
        ),
      30_000,
      100,
    );

    const env = { EP_HOME: home.dir, EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken };
    const claude = (await ep(["task", "get", ids[0], "--json"], { env })).json().task.result;
    expect(claude.usage).toEqual({
      input_tokens: "10",
      output_tokens: "20",
      cached_input_tokens: "0",
      cost_usd: 0.0012,
      model: "fake-vendor-a-model",
    });
    const codex = (await ep(["task", "get", ids[2], "--json"], { env })).json().task.result;
    expect(codex.usage).toMatchObject({ input_tokens: "120", output_tokens: "30", cached_input_tokens: "0" });
    const human = await ep(["task", "get", ids[0]], { env });
    expect(human.stdout).toMatch(
      /usage:\n\s+tokens\s+10 in \(0 cached\), 20 out\n\s+cost\s+\$0\.0012\n\s+model\s+fake-vendor-a-model/,
    );

    const mission = await ep(["mission", "get", "costed", "--json"], { env });
    expect(mission.code, mission.stderr).toBe(0);
    expect(mission.json().usage).toMatchObject({ input_tokens: "140", output_tokens: "70", cost_usd: 0.0024 });
    const human2 = (await ep(["mission", "get", missionId], { env })).stdout;
    expect(human2).toContain("140 in (0 cached), 70 out");
    // split by the agent that ran each task, most expensive first, by name in the human output
    expect(mission.json().usage_by_agent.map((a: { usage: { input_tokens: string } }) => a.usage.input_tokens)).toEqual(
      ["20", "120"],
    );
    expect(human2).toMatch(/by agent:\n\s+vendorA_code\s+20 in, 40 out, \$0\.0024\n\s+vendorB\s+120 in, 30 out/);
    // and per agent
    const agentView = await ep(["agent", "get", "vendorA_code", "--json"], { env });
    expect(agentView.code, agentView.stderr).toBe(0);
    expect(agentView.json().usage).toMatchObject({ input_tokens: "20", output_tokens: "40", cost_usd: 0.0024 });

    const events = (await adminClient(tower, EventService).listEvents({ afterId: 0n, limit: 1000 })).events;
    const done = events.find((e) => e.name === "task.succeeded" && e.taskId === ids[0])!;
    expect(done.payload).toMatchObject({ usage: { input_tokens: 10, output_tokens: 20, cost_usd: 0.0012 } });
  }, 60_000);
});
