// How work meets an idle agent of a node linked here, on both dialects, with the real work
// service, store, hub and link hub: an outcome that says its agent is idle takes the agent's
// next task in its own commit, and leaves the agent idle without a second claim when nothing is
// queued; a task queued while a claim for the agent is looking is not left behind by it; and a link
// that opens hands nothing over before the tower squared its view with the daemon's. A child
// queued by its parent's outcome goes to that agent in the same commit, its parents in the assignment.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { afterEach, describe, expect, vi } from "vitest";
import { iso } from "../../../common/clock.js";
import { silentLogger } from "../../../common/log.js";
import type { LinkResponse } from "../../../gen/ep/tower/v1/fleet_pb.js";
import * as fleetpb from "../../../gen/ep/tower/v1/fleet_pb.js";
import { Runtime, TaskStatus } from "../../../gen/ep/tower/v1/resources_pb.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import { FakeClock } from "../../../test-support/fake-clock.js";
import { waitFor } from "../../../test-support/wait.js";
import { storeSuite, T0 } from "../../../test-support/store-suite.js";
import type { Caller } from "../caller.js";
import { DEFAULT_LIMITS, type Deps } from "../deps.js";
import { commit, createEventHub } from "../event-hub.js";
import { createLinkHub } from "./links.js";
import type { FleetOptions } from "./options.js";
import { agentStateEvent } from "../work/context.js";
import { createWorkService } from "../work/work.js";

const admin: Caller = { subject: "tok_0", principal: "root", role: "admin", via: "token" };

storeSuite((s) => {
  const closers: (() => void)[] = [];
  afterEach(() => {
    for (const c of closers.splice(0)) c();
    vi.restoreAllMocks();
  });

  /** A tower's work and link hub over the suite's store; `work` may be wrapped (a pause) before the fleet sees it. */
  async function tower(wrap: (w: ReturnType<typeof createWorkService>) => FleetOptions["work"] = (w) => w) {
    const deps: Deps = {
      store: s.store,
      clock: new FakeClock(T0),
      hub: createEventHub(),
      log: silentLogger,
      limits: DEFAULT_LIMITS,
    };
    const work = createWorkService(deps);
    const links = createLinkHub(deps, { towerUrl: "http://tower", work: wrap(work) });
    closers.push(
      () => links.close(),
      () => work.close(),
    );
    const domainId = (await work.createDomain(admin, create(pb.CreateDomainRequestSchema, { name: s.id("d") }))).domain!
      .id;
    const missionId = (await work.createMission(admin, create(pb.CreateMissionRequestSchema, { domainId, title: "m" })))
      .mission!.id;
    const nodeId = s.id("nod");
    await s.store.insertNode({
      id: nodeId,
      hostname: "n",
      status: "offline",
      lastSeenAt: iso(T0),
      createdAt: iso(T0),
      domains: [domainId],
    });
    const agentId = s.id("agt");
    await s.store.insertAgent({
      id: agentId,
      domainId,
      nodeId,
      name: "a",
      runtime: "shell",
      capabilities: [],
      state: "idle",
      lastSeenAt: iso(T0),
      createdAt: iso(T0),
      supervised: false,
    });
    const node: Caller = {
      subject: nodeId,
      principal: nodeId,
      role: "node",
      via: "node",
      nodeId,
      nodeDomains: [domainId],
    };
    // the node's link, held open; what it is sent is collected (a later link replaces it)
    let got: LinkResponse[] = [];
    let failed: unknown;
    const openLink = (agents: MessageInitShape<typeof fleetpb.LinkAgentSchema>[] = []) => {
      const mine: LinkResponse[] = (got = []);
      const ac = new AbortController();
      closers.push(() => ac.abort());
      void (async () => {
        for await (const m of links.link(
          node,
          create(fleetpb.LinkRequestSchema, { attachSecret: "s".repeat(32), version: "test", agents }),
          ac.signal,
        ))
          mine.push(m);
      })().catch((err: unknown) => (failed = err));
      return () => failed !== undefined || mine.some((m) => m.command.case === "hello");
    };
    await waitFor(openLink());
    if (failed) throw failed;
    const assignments = () => got.flatMap((m) => (m.command.case === "assign" ? [m.command.value] : []));
    const assigned = () => assignments().map((a) => a.task!);
    const submit = async (title: string, dependsOn: string[] = []) =>
      (
        await work.createTask(
          admin,
          create(pb.CreateTaskRequestSchema, {
            missionId,
            title,
            runtime: Runtime.SHELL,
            input: { command: "true" },
            dependsOn,
          }),
        )
      ).task!.id;
    const agentState = async () => (await s.store.getAgent(agentId))!.state;
    return { deps, work, node, agentId, domainId, assigned, assignments, submit, agentState, openLink };
  }

  describe("handing work to a linked node's idle agent", () => {
    s.test(
      "an outcome that says its agent is idle takes the agent's next task in its " +
        "own commit; with nothing queued the agent is idle and nothing claims again",
      async () => {
        const { work, node, agentId, assigned, submit, agentState } = await tower();
        const first = await submit("first");
        await waitFor(() => assigned().length === 1);
        const second = await submit("second"); // the agent is busy: it waits
        expect((await s.store.getTask(second))!.status).toBe("queued");

        const lease1 = assigned()[0].leaseId;
        await work.completeTask(
          node,
          create(pb.CompleteTaskRequestSchema, {
            taskId: first,
            agentId,
            leaseId: lease1,
            agentIdle: true,
            result: { output: "ok" },
          }),
        );
        // the next task went out on the link, claimed and started in the outcome's commit: the
        // agent was never idle in between
        await waitFor(() => assigned().length === 2);
        expect(assigned()[1]).toMatchObject({
          id: second,
          status: TaskStatus.RUNNING,
          claimedBy: agentId,
          attempts: 1,
        });
        const events = (await s.store.listEvents({ afterId: 0, limit: 1000 })).filter((e) => e.agentId === agentId);
        const afterFirst = events.slice(events.findIndex((e) => e.taskId === first && e.name === "task.succeeded"));
        expect(
          afterFirst.map((e) => [e.name, e.taskId === second ? "second" : e.taskId === first ? "first" : e.status]),
        ).toEqual([
          ["task.succeeded", "first"],
          ["task.claimed", "second"],
          ["task.running", "second"],
        ]);
        expect(await agentState()).toBe("busy");

        // nothing queued now: the outcome's own claim finds nothing, the agent goes idle, and no
        // second claim follows its idle event
        const claims = vi.spyOn(Object.getPrototypeOf(s.store), "claimTask");
        await work.completeTask(
          node,
          create(pb.CompleteTaskRequestSchema, {
            taskId: second,
            agentId,
            leaseId: assigned()[1].leaseId,
            agentIdle: true,
            result: { output: "ok" },
          }),
        );
        expect(await agentState()).toBe("idle");
        await new Promise((r) => setImmediate(r)); // the idle event has been routed
        expect(claims).toHaveBeenCalledTimes(1);
        // and it is idle where it counts: the next task goes straight to it
        const third = await submit("third");
        await waitFor(() => assigned().length === 3);
        expect(assigned()[2].id).toBe(third);
      },
    );

    s.test(
      "the agent that finished a parent takes the child in the outcome's " +
        "commit; an assignment carries the task's parents as the tower has them",
      async () => {
        const { work, node, agentId, assignments, submit, agentState } = await tower();
        const parent = await submit("parent");
        await waitFor(() => assignments().length === 1);
        expect(assignments()[0].parents).toEqual([]);
        const child = await submit("child", [parent]); // waits for its parent
        expect((await s.store.getTask(child))!.status).toBe("waiting");

        await work.completeTask(
          node,
          create(pb.CompleteTaskRequestSchema, {
            taskId: parent,
            agentId,
            leaseId: assignments()[0].task!.leaseId,
            agentIdle: true,
            result: { output: "built" },
          }),
        );
        await waitFor(() => assignments().length === 2);
        const next = assignments()[1];
        expect(next.task).toMatchObject({ id: child, status: TaskStatus.RUNNING, claimedBy: agentId });
        expect(next.parents.map((p) => [p.id, p.status, p.result?.output])).toEqual([
          [parent, TaskStatus.SUCCEEDED, "built"],
        ]);
        // one commit: the parent's success queued the child and the same outcome claimed it
        const events = (await s.store.listEvents({ afterId: 0, limit: 1000 })).filter(
          (e) => e.taskId === parent || e.taskId === child || e.agentId === agentId,
        );
        const from = events.findIndex((e) => e.name === "task.succeeded");
        expect(
          events.slice(from).map((e) => [e.name, e.taskId === child ? "child" : "parent", e.id - events[from].id]),
        ).toEqual([
          ["task.succeeded", "parent", 0],
          ["task.queued", "child", 1],
          ["task.claimed", "child", 2],
          ["task.running", "child", 3],
        ]);
        // the queued event shows the child as queued (no attempt yet, no claimant), before its claim
        const queued = events[from + 1];
        expect([queued.status, queued.payload]).toMatchObject(["queued", { status: "queued", attempts: 0 }]);
        expect(queued.payload).toMatchObject({ claimed_by: "", runtime: "shell", after: parent });
        expect(await agentState()).toBe("busy");

        // the child done, nothing queued: the agent is idle; a task whose parents both succeeded is
        // queued at once and offered to it (a claim of the fleet's own), its parents in depends_on order
        await work.completeTask(
          node,
          create(pb.CompleteTaskRequestSchema, {
            taskId: child,
            agentId,
            leaseId: next.task!.leaseId,
            agentIdle: true,
            result: { output: "tested" },
          }),
        );
        expect(await agentState()).toBe("idle");
        const join = await submit("join", [child, parent]);
        await waitFor(() => assignments().length === 3);
        expect(assignments()[2].task!.id).toBe(join);
        expect(assignments()[2].parents.map((p) => [p.id, p.result?.output])).toEqual([
          [child, "tested"],
          [parent, "built"],
        ]);
      },
    );

    s.test("an outcome sent without agent_idle claims nothing for the agent", async () => {
      const { work, node, agentId, assigned, submit, agentState } = await tower();
      const first = await submit("first");
      await waitFor(() => assigned().length === 1);
      await submit("second");
      await work.completeTask(
        node,
        create(pb.CompleteTaskRequestSchema, {
          taskId: first,
          agentId,
          leaseId: assigned()[0].leaseId,
          result: { output: "ok" },
        }),
      );
      await new Promise((r) => setImmediate(r));
      expect(assigned()).toHaveLength(1);
      expect(await agentState()).toBe("busy");
    });

    s.test(
      "a task queued while a claim for the idle agent is looking is handed to it once that claim comes back empty",
      async () => {
        // the fleet's next empty claim, once armed, waits after it looked until released
        let armed = false;
        let looked!: () => void;
        const lookedOnce = new Promise<void>((r) => (looked = r));
        let release!: () => void;
        const released = new Promise<void>((r) => (release = r));
        const { deps, submit, assigned, agentId } = await tower((w) => ({
          ...w,
          claimStarted: async (a) => {
            const t = await w.claimStarted(a);
            if (armed && !t) {
              armed = false;
              looked();
              await released;
            }
            return t;
          },
        }));
        // the idle agent is offered work (its state said again, as UpdateAgentState does) while
        // nothing is queued: that claim looks, finds nothing, and waits
        armed = true;
        await commit(deps, async (tx, emit) => {
          await tx.moveAgentState(agentId, "idle", "busy", iso(T0));
          await tx.moveAgentState(agentId, "busy", "idle", iso(T0));
          agentStateEvent(emit, (await tx.getAgent(agentId))!.domainId, agentId, "busy", "idle");
        });
        await lookedOnce;
        // a task queued now: its own offer finds the agent claiming, and the claim has already looked
        const late = await submit("late");
        release();
        await waitFor(() => assigned().length === 1);
        expect(assigned()[0]).toMatchObject({ id: late, claimedBy: agentId, attempts: 1 });
      },
    );

    s.test(
      "an outcome committed while a new link is being squared claims nothing " +
        "for it: every task sent on the link is still held under its lease",
      async () => {
        // the next link's reconcile, once armed, waits until released
        let armed = false;
        let reconciling!: () => void;
        const inReconcile = new Promise<void>((r) => (reconciling = r));
        let release!: () => void;
        const released = new Promise<void>((r) => (release = r));
        const { work, node, agentId, assigned, submit, openLink } = await tower((w) => ({
          ...w,
          reconcile: async (nodeId, agents) => {
            if (armed) {
              reconciling();
              await released;
            }
            return w.reconcile(nodeId, agents);
          },
        }));
        const first = await submit("first");
        await waitFor(() => assigned().length === 1);
        const lease = assigned()[0].leaseId;
        const second = await submit("second"); // the agent is busy: it waits
        // the link drops and comes back; its open says the agent holds the first task's lease
        // (its outcome not yet acknowledged) and is idle
        armed = true;
        const hello = openLink([{ agentId, leaseIds: [lease], idle: true }]);
        await inReconcile;
        // the outcome arrives (retried as a unary call) while the tower squares its view
        await work.completeTask(
          node,
          create(pb.CompleteTaskRequestSchema, {
            taskId: first,
            agentId,
            leaseId: lease,
            agentIdle: true,
            result: { output: "ok" },
          }),
        );
        release();
        await waitFor(hello);
        await waitFor(() => assigned().length >= 1);
        // the second task went out once, on this link, and is held under the lease it was sent with
        // (before the fix the outcome claimed it for the link at once and the reconcile, not
        // finding that lease in the open, gave it back while the daemon ran it)
        const sent = assigned()[0];
        expect(sent).toMatchObject({ id: second, claimedBy: agentId });
        const row = (await s.store.getTask(second))!;
        expect({ status: row.status, claimedBy: row.claimedBy, leaseId: row.leaseId, attempts: row.attempts }).toEqual({
          status: "running",
          claimedBy: agentId,
          leaseId: sent.leaseId,
          attempts: 1,
        });
      },
    );

    s.test(
      "a task created while an agent that can take it is idle on a node linked here is claimed and " +
        "started in the create's commit; the answer is the task as created",
      async () => {
        const { work, agentId, domainId, assignments, agentState } = await tower();
        const claims = vi.spyOn(Object.getPrototypeOf(s.store), "claimTask");
        const missionId = (
          await work.createMission(admin, create(pb.CreateMissionRequestSchema, { domainId, title: "m2" }))
        ).mission!.id;
        const answer = await work.createTask(
          admin,
          create(pb.CreateTaskRequestSchema, {
            missionId,
            title: "now",
            runtime: Runtime.SHELL,
            input: { command: "true" },
          }),
        );
        expect(answer.task).toMatchObject({ status: TaskStatus.QUEUED, attempts: 0, claimedBy: "" });
        const id = answer.task!.id;
        await waitFor(() => assignments().length === 1);
        expect(assignments()[0].task).toMatchObject({
          id,
          status: TaskStatus.RUNNING,
          claimedBy: agentId,
          attempts: 1,
        });
        expect(claims).toHaveBeenCalledTimes(1);
        // one commit, in the order the two would have said it
        const events = (await s.store.listEvents({ afterId: 0, limit: 1000 })).filter(
          (e) => e.taskId === id || e.agentId === agentId,
        );
        const from = events.findIndex((e) => e.name === "task.created");
        expect(events.slice(from).map((e) => [e.name, e.status, e.id - events[from].id])).toEqual([
          ["task.created", "queued", 0],
          ["task.claimed", "claimed", 1],
          ["task.running", "running", 2],
          ["agent.state", "busy", 3],
        ]);
        expect(await agentState()).toBe("busy");
      },
    );

    s.test("a create whose commit fails leaves the agent it picked free for the next task", async () => {
      const { assigned, submit, agentId } = await tower();
      vi.spyOn(Object.getPrototypeOf(s.store), "claimTask").mockRejectedValueOnce(new Error("disk I/O error"));
      await expect(submit("lost")).rejects.toThrow(/disk I\/O error/);
      expect((await s.store.getAgent(agentId))!.state).toBe("idle");
      const next = await submit("next");
      await waitFor(() => assigned().length === 1);
      expect(assigned()[0]).toMatchObject({ id: next, claimedBy: agentId });
    });

    s.test(
      "a create whose picked agent is busy in the store claims nothing; the task waits for the agent's idle",
      async () => {
        const { deps, assigned, submit, agentId } = await tower();
        await s.store.moveAgentState(agentId, "idle", "busy", iso(T0)); // busy where it counts, its event not out yet
        const id = await submit("later");
        await new Promise((r) => setImmediate(r));
        expect(assigned()).toHaveLength(0);
        expect((await s.store.getTask(id))!).toMatchObject({ status: "queued", attempts: 0, claimedBy: "" });
        expect((await s.store.getAgent(agentId))!.state).toBe("busy");
        // idle again, as UpdateAgentState says it: the task goes to it
        await commit(deps, async (tx, emit) => {
          await tx.moveAgentState(agentId, "busy", "idle", iso(T0));
          agentStateEvent(emit, (await tx.getAgent(agentId))!.domainId, agentId, "busy", "idle");
        });
        await waitFor(() => assigned().length === 1);
        expect(assigned()[0]).toMatchObject({ id, claimedBy: agentId, attempts: 1 });
      },
    );
  });
});
