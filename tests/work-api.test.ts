// The work API over real HTTP: REST shims and Connect routes on one tower.
import { runtimeOf, statusWord } from "../test-support/words.js";
import { ClaimPolicy, Role, Runtime, TaskKind, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { SqliteStore } from "../tower/store/sqlite/sqlite-store.js";
import { FakeClock } from "../test-support/fake-clock.js";
import { epErrorOfConnectJson } from "../test-support/rpc-errors.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { isoOf } from "../common/vocab.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService, FrameKind } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
const clock = new FakeClock("2026-03-01T12:00:00Z");

beforeAll(async () => {
  t = await startTower({ clock });
});
afterAll(async () => {
  await t?.close();
});

async function setup(name: string) {
  const d = await t.api("POST", "/domains", { name });
  expect(d.status).toBe(201);
  const m = await t.api("POST", `/domains/${d.body.domain.id}/m`, { title: `${name} mission` });
  expect(m.status).toBe(201);
  return { domainId: d.body.domain.id as string, missionId: m.body.mission.id as string };
}

async function enroll(domainId: string, capabilities: string[] = [], runtime = "shell") {
  const res = await t
    .client(AgentService)
    .enrollAgent({ domainId, runtime: runtimeOf(runtime), capabilities, name: "a" });
  return res.agent!.id;
}

describe("REST work paths", () => {
  it("creates, reads and retries claimable tasks at the seed's paths", async () => {
    const { domainId, missionId } = await setup("rest-basic");
    const created = await t.api("POST", `/work/missions/${missionId}/tasks`, {
      title: "build",
      description: "make it",
      claim_policy: "first_claim",
      priority: 5,
    });
    expect(created.status).toBe(201);
    const task = created.body.task;
    expect(task).toMatchObject({
      kind: "claimable",
      status: "queued",
      claim_policy: "first_claim",
      priority: 5,
      domain_id: domainId,
      mission_id: missionId,
    });
    expect(task.id).toMatch(/^tsk_/);

    const got = await t.api("GET", `/work/tasks/${task.id}`);
    expect(got.body.task.title).toBe("build");
    const list = await t.api("GET", `/work/missions/${missionId}/tasks`);
    expect(list.body.tasks.map((x: { id: string }) => x.id)).toEqual([task.id]);

    const retry = await t.api("POST", `/work/tasks/${task.id}/retry`);
    expect(retry.status).toBe(409);
    expect(retry.body.error).toMatchObject({ code: "task_not_retryable" });
    expect(retry.body.error.message).toContain("queued");
  });

  it("serves the Kanban task API under /domains/{domain_id}/m/{mission_id}/t", async () => {
    const { domainId, missionId } = await setup("kanban");
    const base = `/domains/${domainId}/m/${missionId}/t`;
    const c = await t.api("POST", base, { title: "write docs" });
    expect(c.status).toBe(201);
    expect(c.body.task).toMatchObject({ kind: "assigned", status: "todo" });
    const id = c.body.task.id;
    const u = await t.api("PATCH", `${base}/${id}`, { status: "in_progress", title: "write the docs" });
    expect(u.status).toBe(200);
    expect(u.body.task).toMatchObject({ status: "in_progress", title: "write the docs" });
    const bad = await t.api("PATCH", `${base}/${id}`, { status: "queued" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.field).toBe("status");
    expect((await t.api("GET", base)).body.tasks).toHaveLength(1);
    expect((await t.api("GET", `${base}/${id}`)).body.task.id).toBe(id);
    expect((await t.api("DELETE", `${base}/${id}`)).status).toBe(200);
    expect((await t.api("GET", `${base}/${id}`)).status).toBe(404);

    // a claimable task is not reachable through the Kanban API
    const claimable = await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x" });
    expect((await t.api("DELETE", `${base}/${claimable.body.task.id}`)).status).toBe(404);
    // a mission of another domain is not found under this one
    const other = await setup("kanban-other");
    expect((await t.api("GET", `/domains/${other.domainId}/m/${missionId}/t`)).status).toBe(404);
  });

  it("answers each error class with the catalog's JSON body", async () => {
    const { missionId } = await setup("errors");
    const unknown = await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x", colour: "red" });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: "unknown_field", details: { field: "colour" } });

    const wrongType = await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x", priority: "high" });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error.message).toContain("priority");

    const missing = await t.api("POST", `/work/missions/${missionId}/tasks`, { description: "no title" });
    expect(missing.status).toBe(400);
    expect(missing.body.error.details.field).toBe("title");

    const policy = await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x", claim_policy: "assigned" });
    expect(policy.status).toBe(400);
    expect(policy.body.error.details.field).toBe("assignee_agent_id");

    const badPolicy = await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x", claim_policy: "lottery" });
    expect(badPolicy.body.error.message).toContain("first_claim, assigned, broadcast");

    expect((await t.api("POST", `/work/missions/msn_nope/tasks`, { title: "x" })).body.error.code).toBe(
      "mission_not_found",
    );
    expect((await t.api("POST", `/work/tasks/tsk_nope/retry`)).status).toBe(404);
    expect((await t.api("GET", `/nowhere`)).status).toBe(404);

    const notJson = await t.api("POST", `/work/missions/${missionId}/tasks`, "{not json");
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBe("invalid_json");

    const array = await t.api("POST", `/work/missions/${missionId}/tasks`, [1, 2]);
    expect(array.status).toBe(400);

    const huge = await t.api("POST", `/work/missions/${missionId}/tasks`, {
      title: "x",
      description: "y".repeat(1024 * 1024 + 10),
    });
    expect(huge.status).toBe(413);
    expect(huge.body.error.code).toBe("payload_too_large");

    const none = await t.api("GET", "/domains", undefined, null);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("unauthenticated");
    const garbage = await t.api("GET", "/domains", undefined, "ept_not-a-real-token");
    expect(garbage.status).toBe(401);

    const dup = await t.api("POST", "/domains", { name: "errors" });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe("already_exists");

    // nothing half-written: the mission still has no tasks after all those refusals
    expect((await t.api("GET", `/work/missions/${missionId}/tasks`)).body.tasks).toEqual([]);
  });

  it("keeps health and readiness public", async () => {
    expect((await t.api("GET", "/healthz", undefined, null)).body).toEqual({ status: "ok" });
    expect((await t.api("GET", "/readyz", undefined, null)).status).toBe(200);
  });
});

describe("roles", () => {
  it("lets a viewer read but not write, and an agent token only into its domain", async () => {
    const { domainId, missionId } = await setup("roles");
    const other = await setup("roles-other");
    const auth = t.client(AuthService);
    const viewer = (await auth.createToken({ name: "v", role: Role.VIEWER })).secret;
    expect((await t.api("GET", "/domains", undefined, viewer)).status).toBe(200);
    const denied = await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x" }, viewer);
    expect(denied.status).toBe(403);
    expect(denied.body.error.code).toBe("forbidden");
    await expect(t.client(AuthService, viewer).createToken({ name: "x", role: Role.ADMIN })).rejects.toMatchObject({
      code: Code.PermissionDenied,
    });

    const agent = (await auth.createToken({ name: "ag", role: Role.AGENT, domainId })).secret;
    expect((await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "mine" }, agent)).status).toBe(201);
    expect((await t.api("POST", `/work/missions/${other.missionId}/tasks`, { title: "theirs" }, agent)).status).toBe(
      403,
    );
    const domains = await t.api("GET", "/domains", undefined, agent);
    expect(domains.body.domains.map((d: { id: string }) => d.id)).toEqual([domainId]);
  });

  it("rejects a rotated-out token and an expired one, while the new token works", async () => {
    const auth = t.client(AuthService);
    const old = await auth.createToken({ name: "ci", role: Role.OPERATOR });
    const fresh = await auth.createToken({ name: "ci", role: Role.OPERATOR });
    expect((await t.api("GET", "/domains", undefined, old.secret)).status).toBe(200);
    await auth.revokeToken({ tokenId: old.token!.id });
    const revoked = await t.api("GET", "/domains", undefined, old.secret);
    expect(revoked.status).toBe(401);
    expect(revoked.body.error.code).toBe("token_revoked");
    expect((await t.api("GET", "/domains", undefined, fresh.secret)).status).toBe(200);

    const short = await auth.createToken({ name: "short", role: Role.VIEWER, ttlSeconds: 60n });
    expect((await t.api("GET", "/domains", undefined, short.secret)).status).toBe(200);
    clock.advance(61_000);
    const expired = await t.api("GET", "/domains", undefined, short.secret);
    expect(expired.status).toBe(401);
    expect(expired.body.error.code).toBe("token_expired");
    const listed = await auth.listTokens({});
    expect(isoOf(listed.tokens.find((x) => x.id === old.token!.id)?.revokedAt)).toMatch(/^\d{4}-/);
    expect(JSON.stringify(listed, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(fresh.secret);
  });
});

describe("Connect routes", () => {
  it("serves every WorkService method with the same rules as REST", async () => {
    const work = t.client(WorkService);
    const { domain } = await work.createDomain({ name: "connect" });
    await expect(work.createDomain({ name: "" })).rejects.toMatchObject({ code: Code.InvalidArgument });
    expect((await work.getDomain({ domainId: domain!.id })).domain!.name).toBe("connect");
    expect((await work.listDomains({})).domains.some((d) => d.id === domain!.id)).toBe(true);
    const { mission } = await work.createMission({ domainId: domain!.id, title: "m" });
    expect((await work.listMissions({ domainId: domain!.id })).missions).toHaveLength(1);
    expect((await work.getMission({ missionId: mission!.id })).mission!.title).toBe("m");
    await expect(work.getMission({ missionId: "msn_x" })).rejects.toMatchObject({ code: Code.NotFound });

    const agentId = await enroll(domain!.id, ["gpu"]);
    const { task } = await work.createTask({
      missionId: mission!.id,
      title: "t",
      capabilities: ["gpu"],
      input: { command: "echo hi" },
    });
    expect(task!.input).toEqual({ command: "echo hi" });
    const claimed = await work.claimTask({ agentId });
    expect(claimed.task!.id).toBe(task!.id);
    expect(statusWord(claimed.task!.status)).toBe("claimed");
    expect(statusWord((await work.startTask({ taskId: task!.id, agentId })).task!.status)).toBe("running");
    await work.heartbeatTask({ taskId: task!.id, agentId });
    await work.reportProgress({ taskId: task!.id, agentId, frames: [{ kind: FrameKind.TEXT, text: "working" }] });
    const done = await work.completeTask({ taskId: task!.id, agentId, result: { output: "hi\n", exitCode: 0 } });
    expect(statusWord(done.task!.status)).toBe("succeeded");
    expect(done.task!.result).toMatchObject({ output: "hi\n", exitCode: 0 });
    await expect(work.completeTask({ taskId: task!.id, agentId })).rejects.toMatchObject({ code: Code.Aborted });
    expect((await work.listTasks({ missionId: mission!.id })).tasks).toHaveLength(1);

    const k = await work.createTask({ missionId: mission!.id, kind: TaskKind.ASSIGNED, title: "kanban" });
    expect(statusWord((await work.updateTask({ taskId: k.task!.id, status: TaskStatus.REVIEW })).task!.status)).toBe(
      "review",
    );
    await work.deleteTask({ taskId: k.task!.id });
    await expect(work.getTask({ taskId: k.task!.id })).rejects.toMatchObject({ code: Code.NotFound });

    const c = await work.createTask({ missionId: mission!.id, title: "to cancel" });
    expect(statusWord((await work.cancelTask({ taskId: c.task!.id })).task!.status)).toBe("cancelled");
    expect(statusWord((await work.retryTask({ taskId: c.task!.id })).task!.status)).toBe("queued");
    await expect(work.retryTask({ taskId: c.task!.id })).rejects.toMatchObject({ code: Code.Aborted });
  });

  it("answers a state conflict with Connect's 409 code, as REST does", async () => {
    const work = t.client(WorkService);
    const { domain } = await work.createDomain({ name: "connect-409" });
    const { mission } = await work.createMission({ domainId: domain!.id, title: "m" });
    const { task } = await work.createTask({ missionId: mission!.id, title: "queued" });
    const res = await fetch(`${t.url}/ep.tower.v1.WorkService/RetryTask`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${t.adminToken}` },
      body: JSON.stringify({ taskId: task!.id }),
    });
    expect(res.status).toBe(409);
    const json = (await res.json()) as { code: string };
    expect(json.code).toBe("aborted");
    expect(epErrorOfConnectJson(json)?.code).toBe("task_not_retryable");
  });

  it("refuses unknown JSON fields and missing tokens with Connect codes", async () => {
    const res = await fetch(`${t.url}/ep.tower.v1.WorkService/ListDomains`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${t.adminToken}` },
      body: JSON.stringify({ bogus: 1 }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { code: string }).code).toBe("invalid_argument");
    const err = await t
      .client(WorkService, "")
      .listDomains({})
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
  });
});

describe("the claimable task state machine", () => {
  it("requeues an expired lease with the attempt counted, then fails after max_attempts", async () => {
    const { domainId, missionId } = await setup("leases");
    const agentId = await enroll(domainId);
    const work = t.client(WorkService);
    const { task } = await work.createTask({ missionId, title: "flaky", maxAttempts: 2 });
    const id = task!.id;

    await work.claimTask({ agentId });
    clock.advance(30_000);
    await work.heartbeatTask({ taskId: id, agentId }); // renews to now + 60 s
    clock.advance(59_000);
    await t.tower.services.work.sweepExpiredLeases();
    expect(statusWord((await work.getTask({ taskId: id })).task!.status)).toBe("claimed");

    clock.advance(2_000);
    expect(await t.tower.services.work.sweepExpiredLeases()).toBe(1);
    let now = (await work.getTask({ taskId: id })).task!;
    expect(now).toMatchObject({ status: TaskStatus.QUEUED, attempts: 1, claimedBy: "" });
    // the old holder has lost it
    await expect(work.heartbeatTask({ taskId: id, agentId })).rejects.toMatchObject({ code: Code.Aborted });

    await work.claimTask({ agentId });
    clock.advance(61_000);
    await t.tower.services.work.sweepExpiredLeases();
    now = (await work.getTask({ taskId: id })).task!;
    expect(statusWord(now.status)).toBe("failed");
    expect(now.attempts).toBe(2);
    expect(now.result!.error).toContain("lease expired");

    // retry takes it back to queued with a fresh attempt budget
    const retried = await t.api("POST", `/work/tasks/${id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body.task).toMatchObject({ status: "queued", attempts: 0 });
  });

  it("complete says why it cannot: lease expired, held by another agent, finished, Kanban, missing", async () => {
    const { domainId, missionId } = await setup("complete-errors");
    const [a, b] = [await enroll(domainId), await enroll(domainId)];
    const complete = (id: string, agentId: string) =>
      t.api("POST", `/work/tasks/${id}/complete`, { agent_id: agentId, result: { output: "ok" } });
    const { task } = (await t.api("POST", `/work/missions/${missionId}/tasks`, { title: "x" })).body;
    expect((await t.api("POST", `/work/agents/${a}/claim`, {})).body.task.id).toBe(task.id);

    expect((await complete(task.id, b)).body.error.code).toBe("lease_not_held");
    clock.advance(61_000);
    expect((await complete(task.id, a)).body.error.code).toBe("lease_expired");
    expect((await t.api("GET", `/work/tasks/${task.id}`)).body.task.status).toBe("claimed");
    await t.tower.services.work.sweepExpiredLeases();
    expect((await t.api("POST", `/work/agents/${a}/claim`, {})).body.task.id).toBe(task.id);
    const done = await complete(task.id, a);
    expect(done.status).toBe(200);
    expect(done.body.task).toMatchObject({ status: "succeeded", attempts: 2 });
    expect((await complete(task.id, a)).body.error.code).toBe("task_finished");

    const kanban = (await t.api("POST", `/domains/${domainId}/m/${missionId}/t`, { title: "k" })).body.task;
    expect((await complete(kanban.id, a)).body.error.code).toBe("task_wrong_kind");
    expect((await complete("tsk_missing", a)).body.error.code).toBe("task_not_found");
  });

  it("hands out by priority, then oldest first, across any 32-bit priority", async () => {
    const { domainId, missionId } = await setup("priority");
    const agentId = await enroll(domainId);
    const work = t.client(WorkService);
    const low = await work.createTask({ missionId, title: "low", priority: -2147483648 });
    const first = await work.createTask({ missionId, title: "first", priority: 2147483647 });
    const second = await work.createTask({ missionId, title: "second", priority: 2147483647 });
    const order = [];
    for (let i = 0; i < 3; i++) order.push((await work.claimTask({ agentId })).task!.id);
    expect(order).toEqual([first.task!.id, second.task!.id, low.task!.id]);
    expect((await work.claimTask({ agentId })).task).toBeUndefined();
  });

  it("matches capabilities, runtimes and the assigned policy", async () => {
    const { domainId, missionId } = await setup("matching");
    const gpu = await enroll(domainId, ["gpu", "linux"]);
    const plain = await enroll(domainId, []);
    const acp = await enroll(domainId, ["gpu", "linux"], "vendorA_agent_acp");
    const work = t.client(WorkService);
    const needsGpu = await work.createTask({
      missionId,
      title: "gpu job",
      capabilities: ["gpu"],
      runtime: Runtime.SHELL,
      input: { command: "true" },
    });
    const forPlain = await work.createTask({
      missionId,
      title: "for plain",
      claimPolicy: ClaimPolicy.ASSIGNED,
      assigneeAgentId: plain,
    });
    expect((await work.claimTask({ agentId: acp })).task).toBeUndefined(); // wrong runtime, not assigned
    expect((await work.claimTask({ agentId: plain })).task!.id).toBe(forPlain.task!.id);
    expect((await work.claimTask({ agentId: plain })).task).toBeUndefined(); // lacks gpu
    expect((await work.claimTask({ agentId: gpu })).task!.id).toBe(needsGpu.task!.id);
  });

  it("runs a broadcast once per matching agent and settles on the runs", async () => {
    const { domainId, missionId } = await setup("broadcast");
    const a = await enroll(domainId, ["x"]);
    const b = await enroll(domainId, ["x", "y"]);
    await enroll(domainId, []); // does not match
    const created = await t.api("POST", `/work/missions/${missionId}/tasks`, {
      title: "everyone",
      claim_policy: "broadcast",
      capabilities: ["x"],
    });
    expect(created.status).toBe(201);
    expect(created.body.runs.map((r: { assignee_agent_id: string }) => r.assignee_agent_id).sort()).toEqual(
      [a, b].sort(),
    );
    const parent = created.body.task.id;
    const work = t.client(WorkService);
    const ra = (await work.claimTask({ agentId: a })).task!;
    const rb = (await work.claimTask({ agentId: b })).task!;
    expect(ra.parentTaskId).toBe(parent);
    expect(statusWord((await work.getTask({ taskId: parent })).task!.status)).toBe("running");
    await work.completeTask({ taskId: ra.id, agentId: a });
    expect(statusWord((await work.getTask({ taskId: parent })).task!.status)).toBe("running");
    await work.failTask({ taskId: rb.id, agentId: b, result: { error: "boom" } });
    expect(statusWord((await work.getTask({ taskId: parent })).task!.status)).toBe("failed");
    // retrying the broadcast requeues only the failed run
    await work.retryTask({ taskId: parent });
    const again = (await work.claimTask({ agentId: b })).task!;
    expect(again.id).toBe(rb.id);
    await work.completeTask({ taskId: rb.id, agentId: b });
    expect(statusWord((await work.getTask({ taskId: parent })).task!.status)).toBe("succeeded");

    // each run is an assignment: a message in that agent's inbox
    const inbox = await t.tower.deps.store.listEvents({ types: ["inbox"], domainId, limit: 100 });
    expect(
      inbox
        .filter((e) => e.name === "task.assigned")
        .map((e) => e.agentId)
        .sort(),
    ).toEqual([a, b].sort());

    const none = await t.api("POST", `/work/missions/${missionId}/tasks`, {
      title: "nobody",
      claim_policy: "broadcast",
      capabilities: ["z"],
    });
    expect(none.status).toBe(409);
    expect(none.body.error.code).toBe("no_matching_agents");
  });

  it("gives each of 500 tasks to exactly one of 50 concurrent claimers", async () => {
    const { domainId, missionId } = await setup("concurrency");
    const agents = await Promise.all(Array.from({ length: 50 }, () => enroll(domainId)));
    for (let i = 0; i < 500; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, j) =>
          t.api("POST", `/work/missions/${missionId}/tasks`, { title: `t${i + j}` }),
        ),
      );
    }
    const claims = new Map<string, string>();
    let duplicates = 0;
    await Promise.all(
      agents.map(async (agentId) => {
        for (;;) {
          const res = await t.api("POST", `/work/agents/${agentId}/claim`, {});
          expect(res.status).toBe(200);
          const task = res.body.task;
          if (!task) return;
          if (claims.has(task.id)) duplicates++;
          claims.set(task.id, agentId);
        }
      }),
    );
    expect(duplicates).toBe(0);
    expect(claims.size).toBe(500);
    const listed = (await t.api("GET", `/work/missions/${missionId}/tasks?limit=1000`)).body.tasks;
    expect(listed.every((x: { status: string; attempts: number }) => x.status === "claimed" && x.attempts === 1)).toBe(
      true,
    );
  });

  it("wakes a long-polling claimer as soon as work arrives", async () => {
    const { domainId, missionId } = await setup("longpoll");
    const agentId = await enroll(domainId);
    const work = t.client(WorkService);
    const claims = vi.spyOn(SqliteStore.prototype, "claimTask");
    try {
      const pending = work.claimTask({ agentId, wait: { seconds: 20n } });
      await vi.waitFor(() => expect(claims).toHaveBeenCalledTimes(1)); // it looked, found nothing, waits
      const { task } = await work.createTask({ missionId, title: "wake" });
      const claimed = await pending;
      expect(claimed.task!.id).toBe(task!.id);
      expect(claims).toHaveBeenCalledTimes(2); // woken by the new task, not by the wait running out
    } finally {
      claims.mockRestore();
    }
  });

  it("wakes one of many long-polling claimers per new task, not all of them", async () => {
    const { domainId, missionId } = await setup("longpoll-herd");
    const agentIds = await Promise.all(Array.from({ length: 6 }, () => enroll(domainId)));
    const work = t.client(WorkService);
    const claims = vi.spyOn(SqliteStore.prototype, "claimTask");
    try {
      const pending = agentIds.map((agentId) => work.claimTask({ agentId, wait: { seconds: 20n } }));
      await vi.waitFor(() => expect(claims).toHaveBeenCalledTimes(6)); // each looked once, found nothing, waits
      const { task } = await work.createTask({ missionId, title: "one for one" });
      const first = await Promise.race(pending.map((p, i) => p.then((r) => ({ i, r }))));
      expect(first.r.task!.id).toBe(task!.id);
      // one claim for the one task: the other five were not woken to find nothing
      expect(claims).toHaveBeenCalledTimes(7);
      const more = await Promise.all([1, 2].map((n) => work.createTask({ missionId, title: `more ${n}` })));
      const got = await Promise.all(pending.filter((_, i) => i !== first.i).slice(0, 2));
      expect(new Set(got.map((r) => r.task?.id))).toEqual(new Set(more.map((m) => m.task!.id)));
      expect(claims).toHaveBeenCalledTimes(9);
      // the last three waiters (a waiter woken for nothing above would claim again at once, long
      // before these round trips end, and show in the final count) get one task each
      await Promise.all([1, 2, 3].map((n) => work.createTask({ missionId, title: `last ${n}` })));
      expect((await Promise.all(pending)).every((r) => r.task?.id)).toBe(true);
      expect(claims).toHaveBeenCalledTimes(12);
    } finally {
      claims.mockRestore();
    }
  });
});

describe("nodes", () => {
  it("registers a node whose JWT the tower verifies, also after a key rotation", async () => {
    const reg = await t.client(NodeService).registerNode({ hostname: "worker-1" });
    expect(reg.node!.id).toMatch(/^nod_/);
    expect(reg.token.split(".")).toHaveLength(3);
    const asNode = t.client(AgentService, reg.token);
    const { domainId } = await setup("nodes");
    const enrolled = await asNode.enrollAgent({ domainId, runtime: Runtime.SHELL });
    expect(enrolled.agent!.nodeId).toBe(reg.node!.id);

    await t.tower.services.auth.rotateSigningKey();
    expect((await asNode.listAgents({ domainId })).agents).toHaveLength(1);
    const reg2 = await t.client(NodeService).registerNode({ hostname: "worker-2" });
    expect(JSON.parse(Buffer.from(reg2.token.split(".")[0], "base64url").toString()).kid).not.toBe(
      JSON.parse(Buffer.from(reg.token.split(".")[0], "base64url").toString()).kid,
    );

    // a node cannot act for another node's agent, nor do admin things
    const other = t.client(WorkService, reg2.token);
    await expect(other.claimTask({ agentId: enrolled.agent!.id })).rejects.toMatchObject({
      code: Code.PermissionDenied,
    });
    await expect(t.client(NodeService, reg.token).registerNode({ hostname: "evil" })).rejects.toMatchObject({
      code: Code.PermissionDenied,
    });

    // a node operates only where its agents are enrolled
    const mine = await t.api("POST", `/domains/${domainId}/m`, { title: "from node" }, reg.token);
    expect(mine.status).toBe(201);
    const foreign = await setup("nodes-foreign");
    expect((await t.api("POST", `/work/missions/${foreign.missionId}/tasks`, { title: "x" }, reg.token)).status).toBe(
      403,
    );
    expect((await t.api("POST", "/domains", { name: "node-made" }, reg.token)).status).toBe(403);

    // a forged token (right shape, wrong signature) is refused
    const [h, p] = reg.token.split(".");
    const forged = `${h}.${p}.${Buffer.from("nope").toString("base64url")}`;
    expect((await t.api("GET", "/domains", undefined, forged)).status).toBe(401);
    await expect(t.client(NodeService).registerNode({ hostname: "bad host!" })).rejects.toMatchObject({
      code: Code.InvalidArgument,
    });
  });
});
