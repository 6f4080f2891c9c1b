// A busy agent drains a queue with one call per task: when a wake-up found every agent of the
// domain busy, the run's outcome claims the agent's next task in the same commit (CompleteTask
// with claim_next) instead of a ClaimTask after it; an idle agent gets its task pushed by the tower
// with no ClaimTask at all. A real tower and a real epd; the tower's own HTTP server counts the calls.
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
  // no periodic poll: only wake-ups, pushes and outcomes make claims
  const epd: EpdProcess = await spawnEpd({ home: join(h.dir, "epd-home"), nodeFile, backendUrl: t.url, env: { EP_POLL_MS: "600000", ...env } });
  cleanup(() => epd.stop());
  await epd.call("agent.enroll", { domainId, runtime: "shell" });
  return { t, calls, work, domainId, missionId };
}

describe("an agent with work queued behind it", () => {
  it("claims each next task with the previous one's outcome, not with a ClaimTask of its own", async () => {
    const { calls, work, missionId } = await setup("queue");
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const task = (await work.createTask({ missionId, kind: TaskKind.CLAIMABLE, title: `t${i}`, runtime: Runtime.SHELL, input: { command: `sleep 0.3; echo ${i}` } })).task!;
      ids.push(task.id);
    }
    await waitFor(async () => {
      const tasks = await Promise.all(ids.map(async (taskId) => (await work.getTask({ taskId })).task!));
      return tasks.every((x) => x.status === TaskStatus.SUCCEEDED);
    }, 30_000);
    for (const [i, taskId] of ids.entries()) expect((await work.getTask({ taskId })).task!.result?.output.trim()).toBe(String(i));
    // the first task is pushed to the idle agent (or claimed on its wake-up); tasks 2–4 arrive
    // while the agent is busy, and each outcome brings the next one (a ClaimTask per task and a
    // last empty one before claim_next)
    expect(calls.get("CompleteTask")).toBe(4);
    expect(calls.get("ClaimTask") ?? 0).toBeLessThanOrEqual(2);
  }, 60_000);

  it("runs work the tower pushes to its idle agent with no ClaimTask at all", async () => {
    const { t, calls, work, domainId, missionId } = await setup("pushed");
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
    // an agent enrolled claims once for what may be queued already (nothing here)
    await waitFor(() => (calls.get("ClaimTask") ?? 0) >= 1);
    const claimsBefore = calls.get("ClaimTask")!;
    // one task at a time to an idle agent: each is pushed, claimed and started by the tower
    for (let i = 0; i < 3; i++) {
      const task = (await work.createTask({ missionId, kind: TaskKind.CLAIMABLE, title: `p${i}`, runtime: Runtime.SHELL, input: { command: `echo pushed ${i}` } })).task!;
      await waitFor(async () => (await work.getTask({ taskId: task.id })).task!.status === TaskStatus.SUCCEEDED, 15_000);
      const done = (await work.getTask({ taskId: task.id })).task!;
      expect(done.result?.output.trim()).toBe(`pushed ${i}`);
      expect(done.attempts).toBe(1);
    }
    expect(calls.get("ClaimTask") ?? 0).toBe(claimsBefore);
    expect(calls.get("CompleteTask")).toBe(3);
  }, 60_000);
});
