// Targeted wake-ups (issue 21): a queued task wakes only the linked nodes that carry an agent
// able to claim it (its domain, runtime and capabilities), never a node serving other domains.
// Real tower, real Connect link streams held as epd holds them; no timing in the assertions:
// a later task in the other domain is the barrier that proves the earlier one was not sent.
import { ClaimPolicy } from "../gen/ep/tower/v1/resources_pb.js";
import { beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { createWakeIndex, wakeUps } from "../tower/domain/fleet.js";
import type { EventRow } from "../tower/store/store.js";
import { waitFor, type TestTower } from "./harness.js";
import { useLinkTower } from "./link-harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { runtimeOf } from "../test-support/words.js";

const linked = useLinkTower();
let t: TestTower;
beforeAll(() => void (t = linked.tower()));
const linkNode = (hostname: string) => linked.linkNode(hostname);

const enroll = (nodeId: string, domainId: string, runtime = "shell", capabilities: string[] = []) =>
  t.client(AgentService).enrollAgent({ nodeId, domainId, runtime: runtimeOf(runtime), name: `${runtime}-${nodeId}`, capabilities }).then((r) => r.agent!);

describe("targeted wake-ups", () => {
  it("a task in domain A sends no wake-up to a node serving only domain B", async () => {
    const work = t.client(WorkService);
    const a = (await work.createDomain({ name: "wake-a" })).domain!.id;
    const b = (await work.createDomain({ name: "wake-b" })).domain!.id;
    const ma = (await work.createMission({ domainId: a, title: "ma" })).mission!.id;
    const mb = (await work.createMission({ domainId: b, title: "mb" })).mission!.id;
    // agents enrolled before the link opens (read when it opens) and after (from the event)
    const nA = await linkNode("node-a");
    const regB = await linkNode("node-b");
    await enroll(nA.nodeId, a);
    await enroll(regB.nodeId, b);
    const gpu = await linkNode("node-gpu");
    await enroll(gpu.nodeId, a, "shell", ["gpu"]);
    const codex = await linkNode("node-codex");
    await enroll(codex.nodeId, a, "vendorB");
    await waitFor(() => t.tower.services.fleet.wakeTargets(a).length === 3 && t.tower.services.fleet.wakeTargets(b).length === 1);

    const inA = (await work.createTask({ missionId: ma, title: "in A", runtime: Runtime.SHELL, input: { command: "true" } })).task!.id;
    const gpuTask = (await work.createTask({ missionId: ma, title: "needs gpu", runtime: Runtime.SHELL, capabilities: ["gpu"], input: { command: "true" } })).task!.id;
    const inB = (await work.createTask({ missionId: mb, title: "in B", runtime: Runtime.SHELL, input: { command: "true" } })).task!.id;
    await waitFor(() => nA.woken().includes(inA) && gpu.woken().includes(gpuTask) && regB.woken().includes(inB));
    // the barrier task of each node has arrived; links are ordered, so anything sent earlier has too
    const lastA = (await work.createTask({ missionId: ma, title: "barrier A" })).task!.id;
    await waitFor(() => nA.woken().includes(lastA) && gpu.woken().includes(lastA) && codex.woken().includes(lastA));

    expect(regB.woken()).toEqual([inB]);
    expect(nA.woken()).toEqual([inA, lastA]); // not the gpu task: no agent of node-a has gpu
    expect(gpu.woken()).toEqual([inA, gpuTask, lastA]);
    expect(codex.woken()).toEqual([lastA]); // runtime shell tasks are not for a vendorB agent
  });

  it("assigned work wakes only the assignee's node; a broadcast wakes only its agents' nodes", async () => {
    const work = t.client(WorkService);
    const d = (await work.createDomain({ name: "wake-assign" })).domain!.id;
    const m = (await work.createMission({ domainId: d, title: "m" })).mission!.id;
    const n1 = await linkNode("assign-1");
    const n2 = await linkNode("assign-2");
    const other = await linkNode("assign-other");
    const a1 = await enroll(n1.nodeId, d);
    const a2 = await enroll(n2.nodeId, d);
    const assigned = (await work.createTask({ missionId: m, title: "for a2", claimPolicy: ClaimPolicy.ASSIGNED, assigneeAgentId: a2.id, input: { command: "true" } })).task!.id;
    await waitFor(() => n2.woken().includes(assigned));
    const bc = await work.createTask({ missionId: m, title: "everyone", claimPolicy: ClaimPolicy.BROADCAST, input: { command: "true" } });
    const runs = Object.fromEntries(bc.runs.map((r) => [r.assigneeAgentId, r.id]));
    await waitFor(() => n1.woken().includes(runs[a1.id]) && n2.woken().includes(runs[a2.id]));
    expect(n1.woken()).toEqual([runs[a1.id]]);
    expect(n2.woken()).toEqual([assigned, runs[a2.id]]);
    expect(other.woken()).toEqual([]);
    expect(n1.woken()).not.toContain(bc.task!.id); // the broadcast parent itself wakes nobody
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
    const takes = () => true;
    for (const [id, nodeId] of [["a1", "n1"], ["a2", "n1"], ["a3", "n2"]]) ix.add({ id, domainId: "d1", nodeId, runtime: "shell", capabilities: [], state: "idle" });
    const pick = () => ix.claimable("d1", "shell", [], takes)?.id;
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

  it("coalesces the wake-ups of one committed batch into one message per node", () => {
    const ix = createWakeIndex();
    ix.add({ id: "a1", domainId: "d1", nodeId: "n1", runtime: "shell", capabilities: [] });
    ix.add({ id: "a2", domainId: "d2", nodeId: "n2", runtime: "shell", capabilities: [] });
    const queued = (id: string, domainId: string, extra: Record<string, unknown> = {}) =>
      ({ id: 1, type: "matrix", name: "task.created", domainId, missionId: "", agentId: "", taskId: id, status: "queued", payload: { task_id: id, runtime: "shell", capabilities: [], claim_policy: "first_claim", ...extra }, createdAt: "" }) as unknown as EventRow;
    const out = wakeUps([queued("t1", "d1"), queued("t2", "d1"), queued("t3", "d2"), queued("t4", "d1", { claim_policy: "broadcast" }), queued("t5", "d1", { runtime: "vendorB" })], ix);
    expect([...out.keys()].sort()).toEqual(["n1", "n2"]);
    const n1 = out.get("n1")!;
    expect(n1.taskId).toBe("t1");
    expect((n1.data.tasks as JsonObject[]).map((x) => x.task_id)).toEqual(["t1", "t2"]);
    expect(out.get("n2")).toEqual({ kind: "task_ready", taskId: "t3", data: { domain_id: "d2", runtime: "shell", capabilities: [] } });
  });
});
