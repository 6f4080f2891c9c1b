// Work handed to linked nodes (issues 21, 35): a queued task goes to an idle agent able to take
// it (its domain, runtime and capabilities), never to a node serving other domains; the index of
// linked agents behind it. Real tower, real Connect link streams held as epd holds them.
import { ClaimPolicy } from "../gen/ep/tower/v1/resources_pb.js";
import { beforeAll, describe, expect, it } from "vitest";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { createWakeIndex } from "../tower/domain/fleet/fleet.js";
import { waitFor, type TestTower } from "./harness.js";
import { useLinkTower } from "./link-harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { runtimeOf } from "../test-support/words.js";

const linked = useLinkTower();
let t: TestTower;
beforeAll(() => void (t = linked.tower()));
const linkNode = (hostname: string) => linked.linkNode(hostname);

const enroll = (nodeId: string, domainId: string, runtime = "shell", capabilities: string[] = []) =>
  t
    .client(AgentService)
    .enrollAgent({ nodeId, domainId, runtime: runtimeOf(runtime), name: `${runtime}-${nodeId}`, capabilities })
    .then((r) => r.agent!);

describe("work handed to linked nodes", () => {
  it("a task goes only to a node with an idle agent of its domain, runtime and capabilities", async () => {
    const work = t.client(WorkService);
    const a = (await work.createDomain({ name: "wake-a" })).domain!.id;
    const b = (await work.createDomain({ name: "wake-b" })).domain!.id;
    const ma = (await work.createMission({ domainId: a, title: "ma" })).mission!.id;
    const mb = (await work.createMission({ domainId: b, title: "mb" })).mission!.id;
    const nA = await linkNode("node-a");
    const regB = await linkNode("node-b");
    await enroll(nA.nodeId, a);
    await enroll(regB.nodeId, b);
    const gpu = await linkNode("node-gpu");
    await enroll(gpu.nodeId, a, "shell", ["gpu"]);
    const codex = await linkNode("node-codex");
    await enroll(codex.nodeId, a, "vendorB");
    await waitFor(
      () => t.tower.services.fleet.wakeTargets(a).length === 3 && t.tower.services.fleet.wakeTargets(b).length === 1,
    );
    const ids = (n: { assigned(): { task?: { id: string } }[] }) => n.assigned().map((x) => x.task!.id);

    // one at a time, each waited for: the gpu task can only go to the gpu node, which is then busy
    const gpuTask = (
      await work.createTask({
        missionId: ma,
        title: "needs gpu",
        runtime: Runtime.SHELL,
        capabilities: ["gpu"],
        input: { command: "true" },
      })
    ).task!.id;
    await waitFor(() => ids(gpu).includes(gpuTask));
    const inA = (
      await work.createTask({ missionId: ma, title: "in A", runtime: Runtime.SHELL, input: { command: "true" } })
    ).task!.id;
    await waitFor(() => ids(nA).includes(inA));
    const forCodex = (await work.createTask({ missionId: ma, title: "vendorB", runtime: Runtime.VENDORB, input: {} }))
      .task!.id;
    await waitFor(() => ids(codex).includes(forCodex));
    const inB = (
      await work.createTask({ missionId: mb, title: "in B", runtime: Runtime.SHELL, input: { command: "true" } })
    ).task!.id;
    await waitFor(() => ids(regB).includes(inB));
    // every agent is busy now: a further task in A stays queued, handed to nobody
    const waiting = (
      await work.createTask({ missionId: ma, title: "waits", runtime: Runtime.SHELL, input: { command: "true" } })
    ).task!.id;
    // a barrier: a task in B's domain (B's agent is busy too), then the links are quiet
    expect(ids(regB)).toEqual([inB]);
    expect(ids(nA)).toEqual([inA]);
    expect(ids(gpu)).toEqual([gpuTask]);
    expect(ids(codex)).toEqual([forCodex]);
    expect((await work.getTask({ taskId: waiting })).task!.attempts).toBe(0);
  });

  it("assigned work goes only to the assignee's node; a broadcast to its agents' nodes", async () => {
    const work = t.client(WorkService);
    const d = (await work.createDomain({ name: "wake-assign" })).domain!.id;
    const m = (await work.createMission({ domainId: d, title: "m" })).mission!.id;
    const n1 = await linkNode("assign-1");
    const n2 = await linkNode("assign-2");
    const other = await linkNode("assign-other");
    const a1 = await enroll(n1.nodeId, d);
    const a2 = await enroll(n2.nodeId, d);
    await waitFor(() => t.tower.services.fleet.wakeTargets(d).length === 2);
    const ids = (n: { assigned(): { task?: { id: string } }[] }) => n.assigned().map((x) => x.task!.id);
    const assigned = (
      await work.createTask({
        missionId: m,
        title: "for a2",
        claimPolicy: ClaimPolicy.ASSIGNED,
        assigneeAgentId: a2.id,
        input: { command: "true" },
      })
    ).task!.id;
    await waitFor(() => ids(n2).includes(assigned));
    const bc = await work.createTask({
      missionId: m,
      title: "everyone",
      claimPolicy: ClaimPolicy.BROADCAST,
      input: { command: "true" },
    });
    const runs = Object.fromEntries(bc.runs.map((r) => [r.assigneeAgentId, r.id]));
    await waitFor(() => ids(n1).includes(runs[a1.id]));
    expect(ids(n1)).toEqual([runs[a1.id]]);
    expect(ids(n2)).toEqual([assigned]); // a2 is busy: its run waits for it
    expect(ids(other)).toEqual([]);
  });

  it("a closed link and a dead agent leave the index", async () => {
    const work = t.client(WorkService);
    const d = (await work.createDomain({ name: "wake-gone" })).domain!.id;
    const n = await linkNode("gone-1");
    await enroll(n.nodeId, d);
    await waitFor(() => t.tower.services.fleet.wakeTargets(d).includes(n.nodeId));
    await n.close();
    await waitFor(() => !t.tower.services.fleet.wakeTargets(d).includes(n.nodeId));
  });
});

describe("wake index", () => {
  it("matches domain, runtime and capabilities, and forgets removed agents and nodes", () => {
    const ix = createWakeIndex();
    ix.add({ id: "a1", domainId: "d1", nodeId: "n1", runtime: "shell", capabilities: ["gpu", "linux"] });
    ix.add({ id: "a2", domainId: "d1", nodeId: "n2", runtime: "vendorB", capabilities: [] });
    ix.add({ id: "a3", domainId: "d2", nodeId: "n1", runtime: "shell", capabilities: [] });
    ix.add({ id: "a4", domainId: "d1", nodeId: "", runtime: "shell", capabilities: [] }); // no node: never woken
    expect([...ix.nodesFor("d1", "", [])].sort()).toEqual(["n1", "n2"]);
    expect([...ix.nodesFor("d1", "shell", [])]).toEqual(["n1"]);
    expect([...ix.nodesFor("d1", "", ["gpu"])]).toEqual(["n1"]);
    expect([...ix.nodesFor("d1", "vendorB", ["gpu"])]).toEqual([]);
    expect([...ix.nodesFor("d3", "", [])]).toEqual([]);
    // an agent moved to another domain is indexed once, under its new domain
    ix.add({ id: "a2", domainId: "d2", nodeId: "n2", runtime: "vendorB", capabilities: [] });
    expect([...ix.nodesFor("d1", "", [])]).toEqual(["n1"]);
    ix.remove("a1");
    expect([...ix.nodesFor("d1", "", [])]).toEqual([]);
    ix.dropNode("n2");
    expect([...ix.nodesFor("d2", "", [])]).toEqual(["n1"]);
  });

  it("pushes to the agent idle the longest, so work spreads over agents and nodes", () => {
    const ix = createWakeIndex();
    for (const [id, nodeId] of [
      ["a1", "n1"],
      ["a2", "n1"],
      ["a3", "n2"],
    ])
      ix.add({ id, domainId: "d1", nodeId, runtime: "shell", capabilities: [], state: "idle" });
    const pick = () => ix.claimable("d1", "shell", [])?.id;
    expect(pick()).toBe("a1");
    ix.setState("a1", "busy");
    ix.setState("a1", "idle"); // a1 ran a task: now the most recently idle
    expect(pick()).toBe("a2");
    expect(pick()).toBe("a3");
    // a claim that found nothing leaves the agent where it was: still idle the longest
    ix.unclaim("a2");
    ix.setState("a3", "busy");
    ix.setState("a3", "idle");
    expect(pick()).toBe("a2");
    // an event saying idle again about an agent already idle does not move it: a2, which never
    // ran a task, stays ahead of a1
    ix.unclaim("a2");
    ix.setState("a2", "idle");
    ix.setState("a1", "idle");
    expect(pick()).toBe("a2");
  });
});
