// Work reaches epd one way (issue 35): the tower claims for an idle agent and hands the task over
// the link; the run's outcome (agent_idle) makes the agent idle again and the next queued task
// follows. No ClaimTask from a linked epd at all, each task run once; its outcome goes up the
// session (no CompleteTask call), or on the HTTP/1.1 link (EP_LINK=http1) as one CompleteTask per
// task. A real tower and a real epd; the tower's own HTTP/1.1 server counts the calls.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TaskKind, TaskStatus, Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { registerNode, spawnEpd, type EpdProcess } from "./epd-harness.js";
import { startTower, tempHome, useCleanups, waitFor, type TestTower } from "./harness.js";
import { countCalls } from "./tcp-proxy.js";

const cleanup = useCleanups();

/** A real tower whose HTTP server counts the calls by method, a real epd without periodic polls, one shell agent. */
async function setup(name: string, env: Record<string, string> = {}) {
  const h = tempHome(`ep-${name}-`);
  cleanup(() => h.cleanup());
  const t: TestTower = await startTower({ home: join(h.dir, "tower-home") });
  cleanup(() => t.close());
  const calls = countCalls(t.tower.app.server);
  const nodeFile = join(h.dir, "node.json");
  await registerNode(t.url, t.adminToken, nodeFile);
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  // no periodic poll (it runs only while the link is down anyway)
  const epd: EpdProcess = await spawnEpd({
    home: join(h.dir, "epd-home"),
    nodeFile,
    backendUrl: t.url,
    env: { EP_POLL_MS: "600000", ...env },
  });
  cleanup(() => epd.stop());
  await epd.call("agent.enroll", { domainId, runtime: "shell" });
  return { t, calls, work, domainId, missionId };
}

describe("an agent with work queued behind it", () => {
  it.each([
    ["session", 0],
    ["http1", 4],
  ] as const)(
    "gets each next task over the link once its outcome lands, with " +
      "no ClaimTask of its own (EP_LINK=%s: %i CompleteTask calls)",
    async (link, completes) => {
      const { calls, work, missionId } = await setup(`queue-${link}`, { EP_LINK: link });
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) {
        const task = (
          await work.createTask({
            missionId,
            kind: TaskKind.CLAIMABLE,
            title: `t${i}`,
            runtime: Runtime.SHELL,
            input: { command: `sleep 0.3; echo ${i}` },
          })
        ).task!;
        ids.push(task.id);
      }
      await waitFor(async () => {
        const tasks = await Promise.all(ids.map(async (taskId) => (await work.getTask({ taskId })).task!));
        return tasks.every((x) => x.status === TaskStatus.SUCCEEDED);
      }, 30_000);
      for (const [i, taskId] of ids.entries()) {
        const done = (await work.getTask({ taskId })).task!;
        expect(done.result?.output.trim()).toBe(String(i));
        expect(done.attempts).toBe(1);
      }
      expect(calls.get("CompleteTask") ?? 0).toBe(completes);
      expect(calls.get("ClaimTask") ?? 0).toBe(0);
      expect(calls.get("FailTask") ?? 0).toBe(0); // nothing was given back
    },
    60_000,
  );

  it("runs work handed to its idle agent one task at a time, each on its first attempt", async () => {
    const { t, calls, work, domainId, missionId } = await setup("pushed");
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
    for (let i = 0; i < 3; i++) {
      const task = (
        await work.createTask({
          missionId,
          kind: TaskKind.CLAIMABLE,
          title: `p${i}`,
          runtime: Runtime.SHELL,
          input: { command: `echo pushed ${i}` },
        })
      ).task!;
      await waitFor(
        async () => (await work.getTask({ taskId: task.id })).task!.status === TaskStatus.SUCCEEDED,
        15_000,
      );
      const done = (await work.getTask({ taskId: task.id })).task!;
      expect(done.result?.output.trim()).toBe(`pushed ${i}`);
      expect(done.attempts).toBe(1);
      expect(done.leaseId).toMatch(/^ls_/);
    }
    expect(calls.get("ClaimTask") ?? 0).toBe(0);
    expect(calls.get("CompleteTask") ?? 0).toBe(0); // outcomes go up the session
  }, 60_000);

  it("an agent whose run was cancelled (no outcome to report) is handed the next task", async () => {
    const { work, missionId } = await setup("cancelled");
    const long = (
      await work.createTask({
        missionId,
        kind: TaskKind.CLAIMABLE,
        title: "long",
        runtime: Runtime.SHELL,
        input: { command: "sleep 60" },
      })
    ).task!;
    await waitFor(async () => (await work.getTask({ taskId: long.id })).task!.status === TaskStatus.RUNNING, 15_000);
    const next = (
      await work.createTask({
        missionId,
        kind: TaskKind.CLAIMABLE,
        title: "next",
        runtime: Runtime.SHELL,
        input: { command: "echo next" },
      })
    ).task!;
    await work.cancelTask({ taskId: long.id, reason: "enough" });
    await waitFor(async () => (await work.getTask({ taskId: next.id })).task!.status === TaskStatus.SUCCEEDED, 15_000);
    expect((await work.getTask({ taskId: next.id })).task!.result?.output.trim()).toBe("next");
  }, 60_000);
});
