// Outcomes and claims that save calls: a claim that is also the start, and an outcome that sets the
// agent idle (agent_idle), on Connect and REST; the tool calls a run was refused (denials) kept with
// its outcome.
import { statusWord, runtimeOf } from "../test-support/words.js";
import { AgentState, DenialSource, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
beforeAll(async () => {
  t = await startTower();
});
afterAll(async () => {
  await t?.close();
});

async function enroll(domainId: string): Promise<string> {
  return (await t.client(AgentService).enrollAgent({ domainId, runtime: runtimeOf("shell"), name: "a" })).agent!.id;
}

describe("claims and outcomes in fewer calls", () => {
  it("a claim with start: true is also the start: the task comes back running, with both events in order", async () => {
    const work = t.client(WorkService);
    const { domain } = await work.createDomain({ name: "claim-start" });
    const { mission } = await work.createMission({ domainId: domain!.id, title: "m" });
    const agentId = await enroll(domain!.id);
    const { task } = await work.createTask({ missionId: mission!.id, title: "t" });
    const claimed = await work.claimTask({ agentId, start: true });
    expect(claimed.task).toMatchObject({ id: task!.id, status: TaskStatus.RUNNING, claimedBy: agentId });
    // a StartTask after it changes nothing
    expect(statusWord((await work.startTask({ taskId: task!.id, agentId })).task!.status)).toBe("running");
    const events = (await t.client(EventService).listEvents({ limit: 1000, filter: { taskId: task!.id } })).events;
    expect(events.map((e) => [e.name, e.status])).toEqual([
      ["task.created", "queued"],
      ["task.claimed", "claimed"],
      ["task.running", "running"],
    ]);
    // the idle agent became busy in that commit; an outcome sent with agent_idle makes it idle again
    const agents = t.client(AgentService);
    expect((await agents.getAgent({ agentId })).agent!.state).toBe(AgentState.BUSY);
    await work.completeTask({ taskId: task!.id, agentId, result: { output: "ok" }, agentIdle: true });
    expect((await agents.getAgent({ agentId })).agent!.state).toBe(AgentState.IDLE);
    const states = (
      await t.client(EventService).listEvents({ limit: 1000, filter: { agentId, types: ["matrix"] } })
    ).events.filter((e) => e.name === "agent.state");
    expect(states.map((e) => [e.payload?.from, e.payload?.to])).toEqual([
      ["idle", "busy"],
      ["busy", "idle"],
    ]);
    // and over REST
    const { task: t2 } = await work.createTask({ missionId: mission!.id, title: "t2" });
    const rest = await t.api("POST", `/work/agents/${agentId}/claim`, { start: true });
    expect(rest.body.task).toMatchObject({ id: t2!.id, status: "running" });
    // a failure sent without agent_idle leaves the agent's state alone
    await work.failTask({ taskId: t2!.id, agentId, result: { error: "no" } });
    expect((await agents.getAgent({ agentId })).agent!.state).toBe(AgentState.BUSY);
  });
});

describe("denials in an outcome", () => {
  it(
    "are kept in the result (at most 50, fields clipped), counted in the " +
      "outcome's event, and shown over REST as result.denials with source words",
    async () => {
      const work = t.client(WorkService);
      const { domain } = await work.createDomain({ name: "denials" });
      const { mission } = await work.createMission({ domainId: domain!.id, title: "m" });
      const agentId = await enroll(domain!.id);
      const { task } = await work.createTask({ missionId: mission!.id, title: "t" });
      await work.claimTask({ agentId, start: true });
      const long = "y".repeat(5000);
      const denials = [
        {
          tool: "Bash",
          tried: "echo hi > /root/x",
          reason: "needs approval",
          source: DenialSource.POLICY,
          callId: "toolu_1",
        },
        ...Array.from({ length: 70 }, (_, i) => ({
          tool: "exec_command",
          tried: long,
          reason: long,
          source: DenialSource.SANDBOX,
          callId: `c${i}`,
        })),
      ];
      await work.completeTask({ taskId: task!.id, agentId, result: { output: "ok", denials } });
      const got = (await work.getTask({ taskId: task!.id })).task!;
      expect(statusWord(got.status)).toBe("succeeded");
      expect(got.result!.denials).toHaveLength(50);
      expect(got.result!.denials[0]).toMatchObject({
        tool: "Bash",
        tried: "echo hi > /root/x",
        reason: "needs approval",
        source: DenialSource.POLICY,
        callId: "toolu_1",
      });
      expect(got.result!.denials[1]!.tried).toHaveLength(501);
      const rest = await t.api("GET", `/work/tasks/${task!.id}`);
      expect(rest.body.task.result.denials[0]).toEqual({
        tool: "Bash",
        tried: "echo hi > /root/x",
        reason: "needs approval",
        source: "policy",
        call_id: "toolu_1",
      });
      expect(rest.body.task.result.denials[1].source).toBe("sandbox");
      const events = (await t.client(EventService).listEvents({ limit: 1000, filter: { taskId: task!.id } })).events;
      expect(events.find((e) => e.name === "task.succeeded")!.payload).toMatchObject({ denials: 50 });
      // an outcome without denials has none, and its event no count
      const { task: plain } = await work.createTask({ missionId: mission!.id, title: "plain" });
      await work.claimTask({ agentId, start: true });
      await work.failTask({ taskId: plain!.id, agentId, result: { error: "no" } });
      expect((await t.api("GET", `/work/tasks/${plain!.id}`)).body.task.result.denials).toEqual([]);
      const failed = (
        await t.client(EventService).listEvents({ limit: 1000, filter: { taskId: plain!.id } })
      ).events.find((e) => e.name === "task.failed")!;
      expect(failed.payload).not.toHaveProperty("denials");
    },
  );
});
