// Pushed work (issue 21): a link opened with take_tasks gets a new task already claimed and
// started for an idle agent of its node (kind "task"), instead of a task_ready to claim it; a busy
// agent's node gets the task_ready; FailTask release gives a task back without counting the
// attempt; a task claimed for a node whose link went away goes back to the queue. Real tower,
// real Connect link streams held as epd holds them; no timing in the assertions.
import { beforeAll, describe, expect, it } from "vitest";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { runtimeOf, statusWord } from "../test-support/words.js";
import { waitFor, type TestTower } from "./harness.js";
import { useLinkTower } from "./link-harness.js";

const linked = useLinkTower();
let t: TestTower;
beforeAll(() => void (t = linked.tower()));
const linkNode = (hostname: string, takeTasks: boolean) => linked.linkNode(hostname, { takeTasks });

async function domainWithMission(name: string) {
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: name })).mission!.id;
  return { domainId, missionId };
}

const enroll = (nodeId: string, domainId: string) => t.client(AgentService).enrollAgent({ nodeId, domainId, runtime: runtimeOf("shell"), name: `a-${nodeId}` }).then((r) => r.agent!.id);
const submit = (missionId: string, title: string) => t.client(WorkService).createTask({ missionId, title, runtime: Runtime.SHELL, input: { command: "true" } }).then((r) => r.task!.id);

describe("pushed work", () => {
  it("an idle agent's node gets the task claimed and running; a busy agent's node gets a task_ready; release and completion make it idle again", async () => {
    const { domainId, missionId } = await domainWithMission("push-a");
    const node = await linkNode("push-node", true);
    const agentId = await enroll(node.nodeId, domainId);
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);

    const first = await submit(missionId, "first");
    await waitFor(() => node.pushed().length === 1);
    const msg = node.pushed()[0];
    expect(msg).toMatchObject({ agentId, taskId: first });
    expect(msg.task).toMatchObject({ id: first, claimedBy: agentId, attempts: 1, status: TaskStatus.RUNNING });
    expect(node.woken()).not.toContain(first);

    // the agent is busy now: the next task wakes the node to claim it when it can
    const second = await submit(missionId, "second");
    await waitFor(() => node.woken().includes(second));
    expect(node.pushed()).toHaveLength(1);

    // the node gives the first back: queued, the attempt not counted
    const work = t.client(WorkService, node.token);
    await work.failTask({ taskId: first, agentId, release: true, retryable: true, result: { error: "the agent is busy" } });
    const back = (await t.client(WorkService).getTask({ taskId: first })).task!;
    expect(statusWord(back.status)).toBe("queued");
    expect(back.attempts).toBe(0);
    expect(back.claimedBy).toBe("");
    const events = (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 })).filter((e) => e.taskId === first && e.name === "task.requeued");
    expect(events.map((e) => e.payload.reason)).toEqual(["given back by its agent"]);

    // a claim (the node's own, as after the task_ready) and its completion with agent_idle
    const claimed = (await work.claimTask({ agentId, start: true })).task!;
    expect(claimed.id).toBe(first); // the oldest queued task
    await work.completeTask({ taskId: first, agentId, agentIdle: true, result: { output: "ok" } });
    // idle again: the queued second task stays where it is (nothing queued anew), the next new one is pushed
    const third = await submit(missionId, "third");
    await waitFor(() => node.pushed().length === 2);
    // the claim takes the best queued task for the agent: the second, older than the third
    expect(node.pushed()[1].task!.id).toBe(second);
    expect(node.woken()).toContain(third); // still queued: the busy agent's node is woken for it
  });

  it("a link without take_tasks is only woken (the daemon claims)", async () => {
    const { domainId, missionId } = await domainWithMission("push-b");
    const node = await linkNode("wake-node", false);
    await enroll(node.nodeId, domainId);
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
    const id = await submit(missionId, "only woken");
    await waitFor(() => node.woken().includes(id));
    expect(node.pushed()).toHaveLength(0);
    expect(statusWord((await t.client(WorkService).getTask({ taskId: id })).task!.status)).toBe("queued");
  });

  it("release is refused for a task the agent does not hold, and by another node", async () => {
    const { domainId, missionId } = await domainWithMission("push-c");
    const node = await linkNode("push-c-node", true);
    const other = await linkNode("push-c-other", true);
    const agentId = await enroll(node.nodeId, domainId);
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
    const id = await submit(missionId, "held");
    await waitFor(() => node.pushed().length === 1);
    await expect(t.client(WorkService, other.token).failTask({ taskId: id, agentId, release: true })).rejects.toMatchObject({ rawMessage: expect.stringContaining("another node") });
    const unheld = (await t.client(WorkService).createTask({ missionId, title: "kanban-free", runtime: Runtime.SHELL, assigneeAgentId: "", input: { command: "true" } })).task!.id;
    await expect(t.client(WorkService, node.token).failTask({ taskId: unheld, agentId, release: true })).rejects.toMatchObject({ rawMessage: expect.stringMatching(/does not hold the lease/) });
    const still = (await t.client(WorkService).getTask({ taskId: id })).task!;
    expect(statusWord(still.status)).toBe("running");
    expect(still.attempts).toBe(1);
  });

  it("a task claimed for an agent whose node is gone goes back to the queue uncounted, the agent idle", async () => {
    const { domainId, missionId } = await domainWithMission("push-d");
    const node = await linkNode("push-d-node", true);
    const agentId = await enroll(node.nodeId, domainId);
    const id = await submit(missionId, "undeliverable");
    await waitFor(() => node.pushed().length === 1);
    // the link goes away before the task is handed over (as when send() finds no link)
    await node.close();
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 0);
    const agent = { id: agentId, domainId, nodeId: node.nodeId, runtime: "shell", capabilities: [] };
    await t.tower.services.work.releaseClaimed(agent, id);
    const back = (await t.client(WorkService).getTask({ taskId: id })).task!;
    expect(statusWord(back.status)).toBe("queued");
    expect(back.attempts).toBe(0);
    const events = (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 })).filter((e) => e.taskId === id && e.name === "task.requeued");
    expect(events.map((e) => e.payload.reason)).toEqual(["not delivered to its node"]);
    // a task no longer held by the agent is left alone
    await t.tower.services.work.releaseClaimed(agent, id);
    expect((await t.client(WorkService).getTask({ taskId: id })).task!.attempts).toBe(0);
  });

  it("pushes nothing into a domain the node no longer serves", async () => {
    const { domainId, missionId } = await domainWithMission("push-e");
    const other = await domainWithMission("push-e-other");
    const node = await linkNode("push-e-node", true);
    await enroll(node.nodeId, domainId);
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
    await t.client(NodeService).setNodeDomains({ nodeId: node.nodeId, domainIds: [other.domainId] });
    const id = await submit(missionId, "out of scope");
    // the node is woken as before (its own claim is refused), nothing is claimed for it
    await waitFor(() => node.woken().includes(id));
    expect(node.pushed()).toHaveLength(0);
    const still = (await t.client(WorkService).getTask({ taskId: id })).task!;
    expect(statusWord(still.status)).toBe("queued");
    expect(still.attempts).toBe(0);
  });

  it("a claim with resume takes up what its agent already holds (a lost answer or push) before the queue; without it, the queue", async () => {
    const { domainId, missionId } = await domainWithMission("resume-a");
    const node = await linkNode("resume-node", false);
    const agentId = await enroll(node.nodeId, domainId);
    const otherAgent = await enroll(node.nodeId, domainId);
    const work = t.client(WorkService, node.token);
    const [a, b, c, d] = [await submit(missionId, "a"), await submit(missionId, "b"), await submit(missionId, "c"), await submit(missionId, "d")];
    // two claims whose answers never reached the daemon: the agent holds a (claimed) and b (running)
    expect((await work.claimTask({ agentId })).task!.id).toBe(a);
    const bHeld = (await work.claimTask({ agentId, start: true })).task!;
    expect(bHeld.id).toBe(b);
    // the other agent's task is not this agent's to resume
    expect((await work.claimTask({ agentId: otherAgent, start: true })).task!.id).toBe(c);

    const resumed = (await work.claimTask({ agentId, start: true, resume: true })).task!;
    expect(resumed).toMatchObject({ id: a, status: TaskStatus.RUNNING, claimedBy: agentId, attempts: 1 });
    expect(Number(resumed.leaseExpiresAt!.seconds)).toBeGreaterThanOrEqual(Number(bHeld.leaseExpiresAt!.seconds));
    // the other task it held goes back uncounted, with its reason
    const back = (await t.client(WorkService).getTask({ taskId: b })).task!;
    expect(statusWord(back.status)).toBe("queued");
    expect(back.attempts).toBe(0);
    const events = (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 })).filter((e) => e.taskId === b && e.name === "task.requeued");
    expect(events.map((e) => e.payload.reason)).toEqual(["its agent took up another task it held"]);
    // resuming again answers the same task; nothing else moved
    expect((await work.claimTask({ agentId, start: true, resume: true })).task!).toMatchObject({ id: a, attempts: 1 });
    expect(statusWord((await t.client(WorkService).getTask({ taskId: c })).task!.status)).toBe("running");

    // a lease that has run out is the sweep's (it counts the attempt), not resumed: the queue answers
    await t.tower.deps.store.updateTask(a, { leaseExpiresMs: Date.now() - 1 });
    expect((await work.claimTask({ agentId, start: true, resume: true })).task!).toMatchObject({ id: b, attempts: 1 });
    // without resume, a claim takes from the queue even while the agent holds a task
    expect((await work.claimTask({ agentId, start: true })).task!.id).toBe(d);
  });

  it("pushes nothing to an agent its node's own claim made busy first: the task stays queued and the node is woken", async () => {
    const { domainId, missionId } = await domainWithMission("push-race");
    const node = await linkNode("push-race-node", true);
    const agentId = await enroll(node.nodeId, domainId);
    await waitFor(() => t.tower.services.fleet.wakeTargets(domainId).length === 1);
    // the node's claim won: the agent is busy in the store, and the tower has not seen its event yet
    expect(await t.tower.deps.store.moveAgentState(agentId, "idle", "busy", new Date().toISOString())).toBeTruthy();
    const id = await submit(missionId, "raced");
    await waitFor(() => node.woken().includes(id));
    expect(node.pushed()).toHaveLength(0);
    const still = (await t.client(WorkService).getTask({ taskId: id })).task!;
    expect(statusWord(still.status)).toBe("queued");
    expect(still.attempts).toBe(0);
    const names = (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 })).filter((e) => e.taskId === id).map((e) => e.name);
    expect(names).toEqual(["task.created"]);
    // idle again (its event): the next task is pushed to it
    await t.client(WorkService, node.token).claimTask({ agentId }); // nothing queued for it but "raced", which it takes
    await t.client(WorkService, node.token).completeTask({ taskId: id, agentId, agentIdle: true, result: { output: "ok" } });
    const next = await submit(missionId, "after");
    await waitFor(() => node.pushed().some((m) => m.taskId === next));
  });
});

