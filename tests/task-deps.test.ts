// Issue 40: tasks that wait for other tasks (depends_on), through a real tower over Connect and
// REST: waiting until every parent succeeded, queued in the parent's commit, cancelled with the
// parent's reason, back to waiting when the parent is retried; parents that do not exist or are
// in another domain refused. The same rules through a real epd: tests/pipeline-diamond.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TaskWaitReason } from "../gen/ep/tower/v1/work_pb.js";
import { TaskStatus as Status } from "../gen/ep/tower/v1/resources_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { runtimeOf, statusWord } from "../test-support/words.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
beforeAll(async () => {
  t = await startTower();
});
afterAll(async () => {
  await t?.close();
});

const work = () => t.client(WorkService);

async function setup(name: string) {
  const { domain } = await work().createDomain({ name });
  const { mission } = await work().createMission({ domainId: domain!.id, title: "m" });
  const agentId = (
    await t.client(AgentService).enrollAgent({ domainId: domain!.id, runtime: runtimeOf("shell"), name: "a" })
  ).agent!.id;
  const task = async (title: string, dependsOn: string[] = []) =>
    (await work().createTask({ missionId: mission!.id, title, dependsOn })).task!;
  /** Claims the next task and ends it as asked; returns the task claimed. */
  const run = async (outcome: "succeed" | "fail") => {
    const claimed = (await work().claimTask({ agentId, start: true })).task;
    if (!claimed) throw new Error("nothing to claim");
    if (outcome === "succeed")
      await work().completeTask({ taskId: claimed.id, agentId, result: { output: `out of ${claimed.title}` } });
    else await work().failTask({ taskId: claimed.id, agentId, result: { error: "boom" } });
    return claimed;
  };
  const status = async (id: string) => statusWord((await work().getTask({ taskId: id })).task!.status);
  return { domainId: domain!.id, missionId: mission!.id, agentId, task, run, status };
}

describe("depends_on", () => {
  it(
    "a child waits, is never claimed, and is queued in its " + "last parent's commit; the events say waiting → queued",
    async () => {
      const s = await setup("deps-diamond");
      const a = await s.task("A");
      const b = await s.task("B", [a.id]);
      const c = await s.task("C", [a.id]);
      const d = await s.task("D", [b.id, c.id]);
      expect(statusWord(b.status)).toBe("waiting");
      expect(b.dependsOn).toEqual([a.id]);
      expect(d.dependsOn).toEqual([b.id, c.id]);
      // D shows whom it waits on, and why, on Connect and REST
      const got = await work().getTask({ taskId: d.id });
      expect(got.task!.waitingOn).toEqual([b.id, c.id]);
      expect(got.wait).toMatchObject({ reason: TaskWaitReason.PARENTS, waitingOn: [b.id, c.id] });
      const rest = await t.api("GET", `/work/tasks/${d.id}`);
      expect(rest.body.task).toMatchObject({ status: "waiting", depends_on: [b.id, c.id], waiting_on: [b.id, c.id] });
      expect(rest.body.wait).toMatchObject({ reason: "parents", waiting_on: [b.id, c.id] });

      expect((await s.run("succeed")).id).toBe(a.id);
      expect([await s.status(b.id), await s.status(c.id), await s.status(d.id)]).toEqual([
        "queued",
        "queued",
        "waiting",
      ]);
      expect((await s.run("succeed")).id).toBe(b.id);
      // one parent left: D waits on C alone, in a list too
      const listed = (await work().listTasks({ missionId: s.missionId })).tasks.find((x) => x.id === d.id)!;
      expect(listed.waitingOn).toEqual([c.id]);
      expect((await s.run("succeed")).id).toBe(c.id);
      expect(await s.status(d.id)).toBe("queued");
      expect((await s.run("succeed")).id).toBe(d.id);
      expect((await work().claimTask({ agentId: s.agentId })).task).toBeUndefined();

      const events = (await t.client(EventService).listEvents({ limit: 1000, filter: { taskId: d.id } })).events;
      expect(events.map((e) => [e.name, e.status])).toEqual([
        ["task.created", "waiting"],
        ["task.queued", "queued"],
        ["task.claimed", "claimed"],
        ["task.running", "running"],
        ["task.succeeded", "succeeded"],
      ]);
      expect(events[1]!.payload).toMatchObject({ after: c.id, runtime: "", claim_policy: "first_claim" });
    },
  );

  it(
    "a parent that fails for good cancels its dependents " +
      "transitively, naming it; retrying it brings them back to waiting",
    async () => {
      const s = await setup("deps-fail");
      const a = await s.task("A");
      const b = await s.task("B", [a.id]);
      const c = await s.task("C", [b.id]);
      await s.run("fail");
      for (const id of [b.id, c.id]) {
        const x = (await work().getTask({ taskId: id })).task!;
        expect(x.status).toBe(Status.CANCELLED);
        expect(x.result!.error).toBe(`parent ${a.id} failed`);
      }
      // a cancelled dependent cannot be retried on its own while its parent is failed
      await expect(work().retryTask({ taskId: c.id })).rejects.toThrow(
        `task ${c.id}'s parent ${b.id} is cancelled; retry the parent`,
      );
      // a new child of a failed parent is refused, naming it
      await expect(s.task("late", [a.id])).rejects.toThrow(`depends_on[0]: task ${a.id} is failed; retry it first`);

      await work().retryTask({ taskId: a.id });
      expect([await s.status(a.id), await s.status(b.id), await s.status(c.id)]).toEqual([
        "queued",
        "waiting",
        "waiting",
      ]);
      expect((await work().getTask({ taskId: b.id })).task!.result).toBeUndefined();
      await s.run("succeed");
      await s.run("succeed");
      await s.run("succeed");
      expect(await s.status(c.id)).toBe("succeeded");
    },
  );

  it(
    "cancelling a waiting task cancels its dependents; a child " +
      "with two failed parents stays cancelled until both are retried",
    async () => {
      const s = await setup("deps-cancel");
      const a = await s.task("A");
      const b = await s.task("B");
      const c = await s.task("C", [a.id, b.id]);
      const w = await s.task("W", [c.id]);
      await work().cancelTask({ taskId: c.id, reason: "not needed" });
      expect((await work().getTask({ taskId: w.id })).task!.result!.error).toBe(`parent ${c.id} was cancelled`);
      await work().retryTask({ taskId: c.id });
      expect(await s.status(w.id)).toBe("waiting");

      await s.run("fail");
      await s.run("fail");
      expect((await work().getTask({ taskId: c.id })).task!.result!.error).toBe(`parent ${a.id} failed`);
      await work().retryTask({ taskId: a.id });
      // B failed too: C stays cancelled, now naming B
      const c1 = (await work().getTask({ taskId: c.id })).task!;
      expect([statusWord(c1.status), c1.result!.error]).toEqual(["cancelled", `parent ${b.id} failed`]);
      await work().retryTask({ taskId: b.id });
      expect([await s.status(c.id), await s.status(w.id)]).toEqual(["waiting", "waiting"]);
    },
  );

  it("a child of parents that all succeeded already is queued at once", async () => {
    const s = await setup("deps-done");
    const a = await s.task("A");
    await s.run("succeed");
    const b = await s.task("B", [a.id]);
    expect(statusWord(b.status)).toBe("queued");
  });

  it(
    "refuses parents that do not exist, are in another domain, are Kanban " +
      "tasks or are named twice, naming the parent; nothing is created",
    async () => {
      const s = await setup("deps-refused");
      const other = await setup("deps-other");
      const foreign = await other.task("elsewhere");
      const kanban = (await work().createTask({ missionId: s.missionId, title: "k", kind: 1 })).task!;
      const before = (await work().listTasks({ missionId: s.missionId })).tasks.length;
      const cases: [string[], string][] = [
        [["tsk_nope"], 'depends_on[0]: task "tsk_nope" does not exist'],
        [
          [foreign.id],
          `depends_on[0]: task ${foreign.id} is in domain ${other.domainId}, ` +
            `not ${s.domainId}; a task depends only on tasks of its own domain`,
        ],
        [[kanban.id], `depends_on[0]: task ${kanban.id} is a Kanban task`],
        [[foreign.id, foreign.id], "depends_on: names a task twice"],
        [[""], "depends_on[0]: is required"],
      ];
      for (const [dependsOn, message] of cases)
        await expect(work().createTask({ missionId: s.missionId, title: "x", dependsOn })).rejects.toThrow(message);
      // REST says the same with a 400 naming the field
      const rest = await t.api("POST", `/work/missions/${s.missionId}/tasks`, { title: "x", depends_on: [foreign.id] });
      expect(rest.status).toBe(400);
      expect(rest.body.error).toMatchObject({
        code: "parent_invalid",
        details: { field: "depends_on[0]", task_id: foreign.id },
      });
      const wrongType = await t.api("POST", `/work/missions/${s.missionId}/tasks`, { title: "x", depends_on: "tsk_1" });
      expect(wrongType.status).toBe(400);
      expect((await work().listTasks({ missionId: s.missionId })).tasks.length).toBe(before);
      // and a Kanban task takes no parents
      await expect(
        work().createTask({ missionId: s.missionId, title: "k2", kind: 1, dependsOn: [kanban.id] }),
      ).rejects.toThrow("depends_on: applies only to claimable tasks");
    },
  );
});
