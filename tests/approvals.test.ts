// ApprovalService on a real tower: an agent's node asks for a tool permission, the request is on
// the event stream and in the list, the node's long poll returns with a person's decision; a
// rejection carries its reason; a request nobody decides expires (injectable clock); a node or
// agent token never decides; malformed requests are refused by field.
import { Role } from "../gen/ep/tower/v1/resources_pb.js";
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ApprovalService, ApprovalStatus, PermissionOptionKind } from "../gen/ep/tower/v1/approvals_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { FakeClock } from "../test-support/fake-clock.js";
import { WatchedClock } from "../test-support/watched-clock.js";
import { openSse } from "./events-helpers.js";
import { startTower, useCleanups, waitFor, type TestTower } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const cleanup = useCleanups();

const OPTIONS = [
  { optionId: "once", name: "Allow once", kind: PermissionOptionKind.ALLOW_ONCE },
  { optionId: "always", name: "Always allow Bash", kind: PermissionOptionKind.ALLOW_ALWAYS },
  { optionId: "no", name: "Reject", kind: PermissionOptionKind.REJECT_ONCE },
];

async function held(t: TestTower) {
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name: "ask" })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  const node = await t.client(NodeService).registerNode({ hostname: "asker", domainIds: [domainId] });
  const agentId = (
    await t.client(AgentService, node.token).enrollAgent({ domainId, runtime: Runtime.SHELL, name: "asker" })
  ).agent!.id;
  const nodeWork = t.client(WorkService, node.token);
  const next = async () => {
    await work.createTask({ missionId, title: "edit", runtime: Runtime.SHELL, input: { command: "true" } });
    return (await nodeWork.claimTask({ agentId })).task!;
  };
  const asks = t.client(ApprovalService, node.token);
  const ask = async (taskId: string, extra: Record<string, unknown> = {}) =>
    (
      await asks.requestPermission({
        taskId,
        agentId,
        tool: "Bash",
        title: "rm -rf build",
        arguments: { command: "rm -rf build" },
        paths: ["/repo/build"],
        options: OPTIONS,
        ...extra,
      })
    ).approval!;
  return { domainId, missionId, agentId, node, asks, ask, next, approvals: t.client(ApprovalService) };
}

const code = async (p: Promise<unknown>) => {
  try {
    await p;
    return "ok";
  } catch (err) {
    return `${(err as ConnectError).code}:${ConnectError.from(err).message}`;
  }
};

describe("approvals", () => {
  it("a request is on the stream and in the list; the node's wait returns with the person's decision", async () => {
    const clock = new WatchedClock();
    const t = await startTower({ clock });
    cleanup(() => t.close());
    const f = await held(t);
    const sse = await openSse(`${t.url}/events/stream?type=approval`, { authorization: `Bearer ${t.adminToken}` });
    cleanup(() => sse.close());
    const task = await f.next();
    const a = await f.ask(task.id);
    expect(a).toMatchObject({
      kind: "permission",
      status: ApprovalStatus.PENDING,
      tool: "Bash",
      taskId: task.id,
      agentId: f.agentId,
      domainId: f.domainId,
      paths: ["/repo/build"],
    });
    expect(a.nodeId).toBe(f.node.node!.id);
    expect(a.arguments).toEqual({ command: "rm -rf build" });
    const listed = (await f.approvals.listApprovals({ status: ApprovalStatus.PENDING })).approvals;
    expect(listed.map((x) => x.id)).toEqual([a.id]);

    // the node holds its wait open (its 30 s timer is set); a person approves with "always"
    const held30s = clock.pendingFor(30_000);
    const waiting = f.asks.waitApproval({ approvalId: a.id, wait: { seconds: 30n } });
    await waitFor(() => clock.pendingFor(30_000) > held30s);
    const approved = (await f.approvals.approve({ approvalId: a.id, optionId: "always" })).approval!;
    expect(approved).toMatchObject({ status: ApprovalStatus.APPROVED, optionId: "always" });
    expect(approved.decidedBy).not.toBe("");
    const seen = (await waiting).approval!;
    expect(seen.status).toBe(ApprovalStatus.APPROVED);
    expect(seen.optionId).toBe("always");
    expect(seen.decideTime).toBeDefined();

    await waitFor(() => sse.messages.filter((m) => m.data.includes(a.id)).length >= 2);
    const names = sse.messages.filter((m) => m.data.includes(a.id)).map((m) => JSON.parse(m.data).name);
    expect(names).toEqual(["permission.requested", "permission.decided"]);
    expect((await f.approvals.listApprovals({ status: ApprovalStatus.PENDING })).approvals).toEqual([]);
    // decided once: a second decision is a conflict that names the state
    expect(await code(f.approvals.reject({ approvalId: a.id }))).toMatch(/^10:.*already approved/);
  });

  it("a rejection carries its reason and the agent's reject option; approve defaults to allow_once", async () => {
    const t = await startTower();
    cleanup(() => t.close());
    const f = await held(t);
    const one = await f.ask((await f.next()).id);
    const rejected = (await f.approvals.reject({ approvalId: one.id, reason: "not on main" })).approval!;
    expect(rejected).toMatchObject({ status: ApprovalStatus.REJECTED, optionId: "no", reason: "not on main" });
    const two = await f.ask((await f.next()).id);
    expect((await f.approvals.approve({ approvalId: two.id })).approval!.optionId).toBe("once");
    const three = await f.ask((await f.next()).id);
    expect(await code(f.approvals.approve({ approvalId: three.id, optionId: "no" }))).toMatch(
      /^3:.*option_id.*allow options \(once, always\)/,
    );
  });

  it("a request nobody decides expires at its timeout, and the waiting node hears it", async () => {
    const clock = new FakeClock(Date.now());
    // a lease longer than the two minutes the clock moves: the run that asked still holds its task
    const t = await startTower({ clock, env: { EP_LEASE_MS: "600000" } });
    cleanup(() => t.close());
    const f = await held(t);
    const a = await f.ask((await f.next()).id, { timeout: { seconds: 120n } });
    const minuteTimers = () => clock.pendingDelays().filter((d) => d === 60_000).length;
    const before = minuteTimers();
    const waiting = f.asks.waitApproval({ approvalId: a.id, wait: { seconds: 60n } });
    await waitFor(() => minuteTimers() > before); // the wait is held: its one-minute timer is set
    clock.advance(60_000);
    expect((await waiting).approval!.status).toBe(ApprovalStatus.PENDING); // the wait ran out first
    clock.advance(60_000);
    const after = (await f.asks.waitApproval({ approvalId: a.id, wait: { seconds: 1n } })).approval!;
    expect(after).toMatchObject({ status: ApprovalStatus.EXPIRED, reason: "nobody decided before the timeout" });
    expect(await code(f.approvals.approve({ approvalId: a.id }))).toMatch(/^10:.*already expired/);
  });

  it("a request whose run is over (the task finished) expires, saying why, and cannot be decided", async () => {
    const t = await startTower();
    cleanup(() => t.close());
    const f = await held(t);
    const task = await f.next();
    const a = await f.ask(task.id);
    await t
      .client(WorkService, f.node.token)
      .completeTask({ taskId: task.id, agentId: f.agentId, result: { output: "done without it" } });
    const listed = (await f.approvals.listApprovals({})).approvals.find((x) => x.id === a.id)!;
    expect(listed).toMatchObject({
      status: ApprovalStatus.EXPIRED,
      reason: "the run that asked is over: the task is succeeded",
    });
    expect(await code(f.approvals.approve({ approvalId: a.id }))).toMatch(/^10:.*already expired/);
    // still pending while its run holds the task
    const other = await f.ask((await f.next()).id);
    expect((await f.approvals.getApproval({ approvalId: other.id })).approval!.status).toBe(ApprovalStatus.PENDING);
  });

  it("a node or agent token never decides; other domains do not see the request", async () => {
    const t = await startTower();
    cleanup(() => t.close());
    const f = await held(t);
    const a = await f.ask((await f.next()).id);
    expect(await code(f.asks.approve({ approvalId: a.id }))).toMatch(
      /^7:.*role node may not call ApprovalService\/Approve \(admin, operator may\)/,
    );
    const agentToken = (
      await t
        .client((await import("../gen/ep/tower/v1/auth_pb.js")).AuthService)
        .createToken({ name: "a", role: Role.AGENT, domainId: f.domainId })
    ).secret;
    expect(await code(t.client(ApprovalService, agentToken).approve({ approvalId: a.id }))).toMatch(
      /^7:.*role agent may not call ApprovalService\/Approve/,
    );
    const otherDomain = (await t.client(WorkService).createDomain({ name: "other" })).domain!.id;
    const foreign = (
      await t
        .client((await import("../gen/ep/tower/v1/auth_pb.js")).AuthService)
        .createToken({ name: "b", role: Role.AGENT, domainId: otherDomain })
    ).secret;
    expect((await t.client(ApprovalService, foreign).listApprovals({})).approvals).toEqual([]);
    expect(await code(t.client(ApprovalService, foreign).getApproval({ approvalId: a.id }))).toMatch(
      /^5:.*does not exist/,
    );
  });

  it("refuses malformed requests by field, and a task that is not held", async () => {
    const t = await startTower();
    cleanup(() => t.close());
    const f = await held(t);
    const task = await f.next();
    expect(await code(f.ask(task.id, { tool: " " }))).toMatch(/^3:.*tool: is required/);
    expect(await code(f.ask(task.id, { options: [{ optionId: "x", name: "X", kind: 42 }] }))).toMatch(
      /^3:.*options\[0\]\.kind: is not a PermissionOptionKind \(got 42\)/,
    );
    expect(await code(f.ask(task.id, { options: [{ optionId: "x", name: "X" }] }))).toMatch(
      /^3:.*options\[0\]\.kind: is required: allow_once, allow_always/,
    );
    expect(await code(f.ask(task.id, { options: [OPTIONS[0], OPTIONS[0]] }))).toMatch(
      /^3:.*options\[1\]\.option_id: repeats "once"/,
    );
    expect(await code(f.ask(task.id, { timeout: { seconds: 0n } }))).toMatch(/^3:.*timeout: must be positive/);
    expect(await code(f.ask(task.id, { timeout: { seconds: 90_000n } }))).toMatch(
      /^3:.*timeout: must be at most 86400 s/,
    );
    expect(await code(f.ask(task.id, { paths: Array.from({ length: 65 }, (_, i) => `/p${i}`) }))).toMatch(
      /^3:.*paths: has more than 64/,
    );
    expect(await code(f.ask("tsk_missing"))).toMatch(/^5:.*task tsk_missing does not exist/);
    await t.client(WorkService).cancelTask({ taskId: task.id });
    expect(await code(f.ask(task.id))).toMatch(/^10:.*is cancelled: only a claimed or running task/);
    expect(await code(f.asks.waitApproval({ approvalId: "apr_missing" }))).toMatch(
      /^5:.*approval apr_missing does not exist/,
    );
    expect(await code(f.approvals.listApprovals({ pageToken: "nope" }))).toMatch(/^3:.*page_token/);
    expect(await code(f.approvals.listApprovals({ status: 9 as ApprovalStatus }))).toMatch(
      /^3:.*status: is not an ApprovalStatus \(got 9\)/,
    );
    // nothing stored by the refusals
    expect((await f.approvals.listApprovals({})).approvals).toEqual([]);
  });
});
