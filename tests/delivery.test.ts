// How work reaches a node (issue 35; docs/daemon.md "How work reaches a node"): one way, a task
// claimed and started for an idle agent of a linked node and handed over its link with a fresh
// lease; every later call about that run names the lease and is refused for any other; a link
// that opens squares the tower with what its daemon holds. Real tower, real Connect link streams
// held as epd holds them; no timing in the assertions.
import { beforeAll, describe, expect, it } from "vitest";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { AgentState, Runtime, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { runtimeOf, statusWord } from "../test-support/words.js";
import { waitFor, type TestTower } from "./harness.js";
import { useLinkTower } from "./link-harness.js";

const linked = useLinkTower();
let t: TestTower;
beforeAll(() => void (t = linked.tower()));

async function domainWithMission(name: string) {
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: name })).mission!.id;
  return { domainId, missionId };
}
const enroll = (nodeId: string, domainId: string) =>
  t
    .client(AgentService)
    .enrollAgent({ nodeId, domainId, runtime: runtimeOf("shell"), name: `a-${nodeId}-${domainId}` })
    .then((r) => r.agent!.id);
const submit = (missionId: string, title: string) =>
  t
    .client(WorkService)
    .createTask({ missionId, title, runtime: Runtime.SHELL, input: { command: "true" } })
    .then((r) => r.task!.id);
const getTask = (id: string) =>
  t
    .client(WorkService)
    .getTask({ taskId: id })
    .then((r) => r.task!);
const reasons = async (taskId: string, name: string) =>
  (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 }))
    .filter((e) => e.taskId === taskId && e.name === name)
    .map((e) => e.payload.reason);

describe("work handed over the link, under a lease per claim", () => {
  it(
    "an idle agent's node gets the task running with a fresh lease; " +
      "a give-back queues it uncounted and keeps the agent busy",
    async () => {
      const { domainId, missionId } = await domainWithMission("lease-a");
      const node = await linked.linkNode("lease-a-node");
      const agentId = await enroll(node.nodeId, domainId);
      await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);

      const first = await submit(missionId, "first");
      await waitFor(() => node.assigned().length === 1);
      const a = node.assigned()[0];
      expect(a.agentId).toBe(agentId);
      expect(a.task).toMatchObject({ id: first, claimedBy: agentId, attempts: 1, status: TaskStatus.RUNNING });
      expect(a.task!.leaseId).toMatch(/^ls_[A-Za-z0-9_-]{16}$/);

      // the node gives it back: queued, uncounted; the agent stays busy, so nothing more comes to it
      const work = t.client(WorkService, node.token);
      await work.failTask({
        taskId: first,
        agentId,
        leaseId: a.task!.leaseId,
        release: true,
        retryable: true,
        result: { error: "the agent is busy" },
      });
      const back = await getTask(first);
      expect(statusWord(back.status)).toBe("queued");
      expect(back.attempts).toBe(0);
      expect(await reasons(first, "task.requeued")).toEqual(["given back by its agent"]);
      expect((await t.client(AgentService).getAgent({ agentId })).agent!.state).toBe(AgentState.BUSY);

      // idle again (an outcome says so): the queued task comes, under a new lease
      await t.client(AgentService, node.token).updateAgentState({ agentId, state: AgentState.IDLE });
      await waitFor(() => node.assigned().length === 2);
      const again = node.assigned()[1].task!;
      expect(again).toMatchObject({ id: first, attempts: 1 });
      expect(again.leaseId).not.toBe(a.task!.leaseId);
      await work.completeTask({
        taskId: first,
        agentId,
        leaseId: again.leaseId,
        agentIdle: true,
        result: { output: "ok" },
      });
      expect(statusWord((await getTask(first)).status)).toBe("succeeded");
    },
  );

  it(
    "a heartbeat, progress or outcome under a stale lease is refused " +
      "(lease_not_held), even when the same agent holds the newer claim",
    async () => {
      const { domainId, missionId } = await domainWithMission("lease-b");
      const node = await linked.linkNode("lease-b-node");
      const agentId = await enroll(node.nodeId, domainId);
      await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
      const id = await submit(missionId, "twice claimed");
      await waitFor(() => node.assigned().length === 1);
      const stale = node.assigned()[0].task!.leaseId;
      const work = t.client(WorkService, node.token);
      // given back, then claimed again by the same agent (its own claim): a new lease
      await work.failTask({ taskId: id, agentId, leaseId: stale, release: true, retryable: true });
      const fresh = (await work.claimTask({ agentId, start: true })).task!;
      expect(fresh.id).toBe(id);
      expect(fresh.leaseId).not.toBe(stale);

      const refused = { rawMessage: expect.stringContaining(`lease ${stale} is not task ${id}'s current claim`) };
      await expect(work.heartbeatTask({ taskId: id, agentId, leaseId: stale })).rejects.toMatchObject(refused);
      await expect(
        work.reportProgress({ taskId: id, agentId, leaseId: stale, frames: [{ text: "late" }] }),
      ).rejects.toMatchObject(refused);
      await expect(
        work.completeTask({ taskId: id, agentId, leaseId: stale, result: { output: "stale" } }),
      ).rejects.toMatchObject(refused);
      await expect(
        work.failTask({ taskId: id, agentId, leaseId: stale, result: { error: "stale" } }),
      ).rejects.toMatchObject(refused);
      await expect(work.startTask({ taskId: id, agentId, leaseId: stale })).rejects.toMatchObject(refused);
      // nothing moved; the current lease is accepted
      expect(await getTask(id)).toMatchObject({ status: TaskStatus.RUNNING, attempts: 1, leaseId: fresh.leaseId });
      await work.heartbeatTask({ taskId: id, agentId, leaseId: fresh.leaseId });
      await work.completeTask({ taskId: id, agentId, leaseId: fresh.leaseId, result: { output: "fresh" } });
      const done = await getTask(id);
      expect(statusWord(done.status)).toBe("succeeded");
      expect(done.result!.output).toBe("fresh");
      // after it finished, the stale lease is still refused, as a lease, not a finished task
      await expect(
        work.completeTask({ taskId: id, agentId, leaseId: stale, result: { output: "stale" } }),
      ).rejects.toMatchObject({ rawMessage: expect.stringContaining("not task") });
    },
  );

  it("a lease id that is not one is refused naming lease_id, and changes nothing", async () => {
    const { domainId, missionId } = await domainWithMission("lease-c");
    const node = await linked.linkNode("lease-c-node");
    const agentId = await enroll(node.nodeId, domainId);
    const id = await submit(missionId, "held");
    await waitFor(() => node.assigned().length === 1);
    const work = t.client(WorkService, node.token);
    for (const leaseId of ["x".repeat(65), "ls_a b", "ls_'; DROP TABLE tasks; --"]) {
      await expect(
        work.completeTask({ taskId: id, agentId, leaseId, result: { output: "bad" } }),
      ).rejects.toMatchObject({ rawMessage: expect.stringContaining("lease_id") });
    }
    expect(statusWord((await getTask(id)).status)).toBe("running");
  });

  it(
    "a link that opens gives back what its daemon does not hold (lost with the " +
      "last link) uncounted, keeps what it does, and hands the idle agents work",
    async () => {
      const { domainId, missionId } = await domainWithMission("lease-d");
      const reg = await t.client(NodeService).registerNode({ hostname: "lease-d-node" });
      const nodeId = reg.node!.id;
      const keeps = await enroll(nodeId, domainId);
      const lost = await enroll(nodeId, domainId);
      const work = t.client(WorkService, reg.token);
      // claimed while no link was open (their answers are as good as lost to a daemon that restarted)
      const kept = await submit(missionId, "kept");
      const keptTask = (await work.claimTask({ agentId: keeps, start: true })).task!;
      expect(keptTask.id).toBe(kept);
      const dropped = await submit(missionId, "dropped");
      expect((await work.claimTask({ agentId: lost, start: true })).task!.id).toBe(dropped);

      const node = await linked.linkNode("lease-d-node", {
        token: reg.token,
        nodeId,
        agents: [
          { agentId: keeps, leaseIds: [keptTask.leaseId], idle: false },
          { agentId: lost, leaseIds: [], idle: true },
        ],
      });
      // the dropped task went back uncounted, and comes straight back to the idle agent under a new lease
      await waitFor(() => node.assigned().length === 1);
      const handed = node.assigned()[0];
      expect(handed.agentId).toBe(lost);
      expect(handed.task).toMatchObject({ id: dropped, attempts: 1 });
      expect(await reasons(dropped, "task.requeued")).toEqual(["handed to its node and lost with the link"]);
      // the kept one is untouched: same lease, still running, its agent busy
      expect(await getTask(kept)).toMatchObject({ status: TaskStatus.RUNNING, attempts: 1, leaseId: keptTask.leaseId });
      expect((await t.client(AgentService).getAgent({ agentId: keeps })).agent!.state).toBe(AgentState.BUSY);
    },
  );

  it("a link cannot give back or set the state of another node's agents", async () => {
    const { domainId, missionId } = await domainWithMission("lease-f");
    const owner = await linked.linkNode("lease-f-owner");
    const agentId = await enroll(owner.nodeId, domainId);
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
    const id = await submit(missionId, "held by the owner");
    await waitFor(() => owner.assigned().length === 1);
    const lease = owner.assigned()[0].task!.leaseId;
    // another node opens its link naming the owner's agent as idle with no lease
    await linked.linkNode("lease-f-intruder", { agents: [{ agentId, leaseIds: [], idle: true }] });
    expect(await getTask(id)).toMatchObject({ status: TaskStatus.RUNNING, attempts: 1, leaseId: lease });
    expect(await reasons(id, "task.requeued")).toEqual([]);
    expect((await t.client(AgentService).getAgent({ agentId })).agent!.state).toBe(AgentState.BUSY);
  });

  it("hands nothing into a domain the node no longer serves", async () => {
    const { domainId, missionId } = await domainWithMission("lease-e");
    const other = await domainWithMission("lease-e-other");
    const node = await linked.linkNode("lease-e-node");
    await enroll(node.nodeId, domainId);
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
    await t.client(NodeService).setNodeDomains({ nodeId: node.nodeId, domainIds: [other.domainId] });
    const id = await submit(missionId, "out of scope");
    // a barrier: a task the node may take is handed over after it, on the same ordered link
    const otherAgent = await enroll(node.nodeId, other.domainId);
    const inScope = await submit(other.missionId, "in scope");
    await waitFor(() => node.assigned().some((x) => x.task!.id === inScope));
    expect(node.assigned().map((x) => [x.agentId, x.task!.id])).toEqual([[otherAgent, inScope]]);
    expect(await getTask(id)).toMatchObject({ status: TaskStatus.QUEUED, attempts: 0 });
  });
});
