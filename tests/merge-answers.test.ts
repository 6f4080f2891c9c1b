// MergeTask seen from the tower (in-process, a FakeClock) with a node holding a real link stream:
// the `merge` command it sends, the answer it takes (only from that node, only for that request),
// and the caller's error when no answer comes within 30 s. The node's side is
// tests/workspaces-merge.test.ts (a real epd).
import { ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../gen/ep/errors/v1/errors_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { MergeOutcome, WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { FakeClock } from "../test-support/fake-clock.js";
import { startTower, waitFor, type TestTower } from "./harness.js";
import { linkNode, type LinkedNode } from "./link-harness.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/** A tower, a linked node with an agent, and a task that agent finished with a workspace on main. */
async function setup() {
  const clock = new FakeClock(Date.now());
  const t: TestTower = await startTower({ clock });
  closers.push(() => t.close());
  const node = await linkNode(t, closers, "merger");
  const other = await linkNode(t, closers, "bystander");
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name: "merges" })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  const agent = (
    await t.client(AgentService, node.token).enrollAgent({ domainId, runtime: Runtime.SHELL, name: "sh0" })
  ).agent!;
  const task = (await work.createTask({ missionId, title: "edit", runtime: Runtime.SHELL, input: { command: "true" } }))
    .task!;
  const nodeWork = t.client(WorkService, node.token);
  // the tower hands the task to the node's idle agent over the link, its lease with it
  await waitFor(() => node.assigned().some((a) => a.task?.id === task.id));
  const leaseId = node.assigned().find((a) => a.task?.id === task.id)!.task!.leaseId;
  const workspace = {
    repo: "/srv/repo",
    branch: `ep/${task.id}`,
    base: "a".repeat(40),
    head: "b".repeat(40),
    baseBranch: "main",
    committed: true,
  };
  await nodeWork.completeTask({ taskId: task.id, agentId: agent.id, leaseId, result: { output: "", workspace } });
  return { t, clock, node, other, work, agent, task, domainId };
}

/** The merge commands the node got. */
const merges = (node: LinkedNode) => node.got.flatMap((m) => (m.command.case === "merge" ? [m.command.value] : []));

/** The merge command the node got, once it came. */
async function mergeCommand(node: LinkedNode) {
  await waitFor(() => merges(node).length > 0);
  return merges(node)[0];
}

/** Publishes an answer as `from` in the task's domain, as epd does (PublishEvents stamps its node id). */
async function answer(
  s: { t: TestTower; domainId: string },
  from: LinkedNode,
  name: string,
  payload: Record<string, unknown>,
) {
  await s.t
    .client(NodeService, from.token)
    .publishEvents({ events: [{ type: "matrix", name, domainId: s.domainId, payload: payload as never }] });
}

describe("MergeTask at the tower", () => {
  it(
    "sends the task's node a merge command and returns " + "its answer; an answer from another node is not taken",
    async () => {
      const s = await setup();
      const call = s.work.mergeTask({ taskId: s.task.id });
      const cmd = await mergeCommand(s.node);
      expect(merges(s.other)).toHaveLength(0);
      expect(cmd).toMatchObject({ taskId: s.task.id, agentId: s.agent.id });
      const d = cmd;
      expect(d).toMatchObject({
        repo: "/srv/repo",
        branch: `ep/${s.task.id}`,
        head: "b".repeat(40),
        into: "main",
        title: "edit",
        agentName: "sh0",
        domainId: s.domainId,
      });
      expect(d.requestId).toMatch(/^mrg_[0-9a-f]{16}$/);
      // the same request id from a node that was not asked: ignored
      await answer(s, s.other, "workspace.merged", {
        request_id: d.requestId,
        outcome: "fast_forward",
        into: "main",
        tip: "f".repeat(40),
      });
      await answer(s, s.node, "workspace.merged", {
        request_id: d.requestId,
        outcome: "merge_commit",
        into: "main",
        branch: `ep/${s.task.id}`,
        merged: "b".repeat(40),
        previous: "c".repeat(40),
        tip: "d".repeat(40),
        checkout: "",
      });
      const res = await call;
      expect(res).toMatchObject({
        outcome: MergeOutcome.MERGE_COMMIT,
        into: "main",
        merged: "b".repeat(40),
        previous: "c".repeat(40),
        tip: "d".repeat(40),
      });
    },
  );

  it("turns the node's refusal into merge_refused with its reason and files", async () => {
    const s = await setup();
    const call = s.work.mergeTask({ taskId: s.task.id, into: "release" }).catch((e: unknown) => e);
    const d = await mergeCommand(s.node);
    expect(d.into).toBe("release");
    await answer(s, s.node, "workspace.merge_refused", {
      request_id: d.requestId,
      reason: "conflict",
      files: ["a.txt"],
      message: "does not merge cleanly; nothing changed",
    });
    const err = await call;
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).rawMessage).toBe("does not merge cleanly; nothing changed");
    expect((err as ConnectError).findDetails(ErrorDetailSchema)[0]).toMatchObject({
      code: "merge_refused",
      details: { reason: "conflict", files: ["a.txt"], into: "release" },
    });
  });

  it("says the node did not answer after 30 s (the clock's), and refuses a bad branch name before asking", async () => {
    const s = await setup();
    let settled = false;
    const call = s.work
      .mergeTask({ taskId: s.task.id })
      .catch((e: unknown) => e)
      .finally(() => (settled = true));
    await mergeCommand(s.node);
    s.clock.advance(29_999);
    // a round trip to the tower: had the wait ended, the answer would be back before this one
    await s.work.getTask({ taskId: s.task.id });
    expect(settled).toBe(false);
    s.clock.advance(1);
    const err = (await call) as ConnectError;
    expect(err.findDetails(ErrorDetailSchema)[0]?.code).toBe("unavailable");
    expect(err.rawMessage).toMatch(/^node nod_\w+ did not answer within 30 s; the merge may still happen/);
    const bad = (await s.work
      .mergeTask({ taskId: s.task.id, into: "../main" })
      .catch((e: unknown) => e)) as ConnectError;
    expect(bad.findDetails(ErrorDetailSchema)[0]).toMatchObject({
      code: "invalid_argument",
      details: { field: "into" },
    });
    expect(merges(s.node)).toHaveLength(1);
  });
});
