// The task vocabulary as the contract types it (TaskStatus, TaskKind, ClaimPolicy enums) and as
// REST, the CLI and the tools show it (lowercase words): one mapping (common/vocab.ts), so a REST
// client sees no change, a typed client gets enums, and a word that is not in the set is refused
// naming the field and the words it takes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClaimPolicy, Runtime, TaskKind, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { FrameKind, WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { isoOf } from "../common/vocab.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
beforeAll(async () => void (t = await startTower()));
afterAll(() => t.close());

async function mission() {
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name: `vocab-${Math.random()}` })).domain!.id;
  return { work, domainId, missionId: (await work.createMission({ domainId, title: "m" })).mission!.id };
}

describe("the task vocabulary", () => {
  it("is enums over Connect and words over REST, for the same task", async () => {
    const { work, missionId } = await mission();
    const created = await t.api("POST", `/work/missions/${missionId}/tasks`, {
      title: "x",
      claim_policy: "first_claim",
      priority: 2,
      runtime: "vendorA_code",
    });
    expect(created.status).toBe(201);
    expect(created.body.task).toMatchObject({
      kind: "claimable",
      status: "queued",
      claim_policy: "first_claim",
      runtime: "vendorA_code",
    });
    const typed = (await work.getTask({ taskId: created.body.task.id })).task!;
    expect([typed.kind, typed.status, typed.claimPolicy, typed.runtime]).toEqual([
      TaskKind.CLAIMABLE,
      TaskStatus.QUEUED,
      ClaimPolicy.FIRST_CLAIM,
      Runtime.VENDORA_CODE,
    ]);
    // a typed client's runtime reads back as the word over REST; unset is "" (any runtime)
    const acp = (await work.createTask({ missionId, title: "acp", runtime: Runtime.VENDORA_AGENT_ACP })).task!;
    expect((await t.api("GET", `/work/tasks/${acp.id}`)).body.task.runtime).toBe("vendorA_agent_acp");
    const any = (await work.createTask({ missionId, title: "any" })).task!;
    expect((await t.api("GET", `/work/tasks/${any.id}`)).body.task.runtime).toBe("");
    const card = (
      await work.createTask({ missionId, title: "card", kind: TaskKind.ASSIGNED, status: TaskStatus.IN_PROGRESS })
    ).task!;
    expect((await t.api("GET", `/work/tasks/${card.id}`)).body.task).toMatchObject({
      kind: "assigned",
      status: "in_progress",
      claim_policy: "",
    });
    const listed = await t.api("GET", `/work/missions/${missionId}/tasks?status=in_progress&kind=assigned`);
    expect(listed.body.tasks.map((x: { id: string }) => x.id)).toEqual([card.id]);
  });

  it(
    "carries times as Timestamps and the claim's wait as a " +
      "Duration over Connect, ISO strings and wait_ms over REST",
    async () => {
      const { work, domainId, missionId } = await mission();
      const task = (await work.createTask({ missionId, title: "when" })).task!;
      const rest = (await t.api("GET", `/work/tasks/${task.id}`)).body.task;
      expect(rest.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(rest.created_at).toBe(isoOf(task.createdAt));
      expect(rest.lease_expires_at).toBe(""); // not claimed: unset over Connect, "" over REST
      expect(task.leaseExpiresAt).toBeUndefined();
      const agentId = (await t.client(AgentService).enrollAgent({ domainId, runtime: Runtime.SHELL, name: "w" })).agent!
        .id;
      const claimed = await t.api("POST", `/work/agents/${agentId}/claim`, { wait_ms: 0 });
      expect(claimed.status).toBe(200);
      expect(Date.parse(claimed.body.task.lease_expires_at)).toBeGreaterThan(Date.parse(claimed.body.task.created_at));
      const bad = await t.api("POST", `/work/agents/${agentId}/claim`, { wait_ms: -5 });
      expect(bad.body.error).toMatchObject({
        code: "invalid_argument",
        message: "wait_ms: must be a whole number of milliseconds, 0 or more (got -5)",
        details: { field: "wait_ms" },
      });
      await expect(work.claimTask({ agentId, wait: { seconds: -1n } })).rejects.toThrow(/wait: must not be negative/);
      // a typed frame kind reaches the event stream as its word
      await work.reportProgress({
        taskId: claimed.body.task.id,
        agentId,
        frames: [{ kind: FrameKind.TOOL, text: "ls" }],
      });
      const events = (
        await t.client(EventService).listEvents({ filter: { taskId: claimed.body.task.id, types: ["progress"] } })
      ).events;
      expect(events.map((e) => e.payload?.kind)).toEqual(["tool"]);
    },
  );

  it("refuses a word that is not in the set, naming the field and the words", async () => {
    const { missionId } = await mission();
    const badWord = await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x", claim_policy: "sometimes" });
    expect(badWord.status).toBe(400);
    expect(badWord.body.error).toMatchObject({
      code: "invalid_argument",
      message: 'claim_policy: must be one of first_claim, assigned, broadcast (got "sometimes")',
      details: { field: "claim_policy" },
    });
    const badRuntime = await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x", runtime: "vendorD" });
    expect(badRuntime.body.error).toMatchObject({
      code: "invalid_argument",
      message:
        "runtime: must be one of vendorA_code, vendorA_agent_acp, " +
        'vendorB, vendorC, muxhost_hosted, shell (got "vendorD")',
    });
    const badFilter = await t.api("GET", `/work/missions/${missionId}/tasks?status=finished`);
    expect(badFilter.status).toBe(400);
    const states = "queued, claimed, running, succeeded, failed, cancelled, todo, in_progress, blocked, review, done";
    expect(badFilter.body.error.message).toMatch(new RegExp(`^status: must be one of ${states}`));
    // a number the enum does not have (a typed client's mistake) is refused too
    const work = t.client(WorkService);
    await expect(work.listTasks({ missionId, status: 42 as TaskStatus })).rejects.toThrow(
      /status: is not a TaskStatus \(got 42\)/,
    );
  });
});
