// The store suite (reports its dialect, domains and missions, tasks, claiming), on both dialects: see
// test-support/store-suite.ts.
import { describe, expect } from "vitest";
import type { TaskRow } from "./store.js";
import { expectEpError, iso, storeSuite, T0 } from "../../test-support/store-suite.js";

storeSuite((s) => {
  const { dialect, test, domain, mission, task, setup, claimant } = s;

  test("reports its dialect", () => {
    expect(s.store.dialect).toBe(dialect);
  });

  describe("domains and missions", () => {
    test("domains round-trip and list oldest first", async () => {
      await s.store.insertDomain({ id: "dom_b", name: "beta", createdAt: iso(T0 + 2) });
      await s.store.insertDomain({ id: "dom_a", name: "alpha", createdAt: iso(T0 + 1) });
      expect(await s.store.getDomain("dom_a")).toEqual({ id: "dom_a", name: "alpha", createdAt: iso(T0 + 1) });
      expect(await s.store.getDomainByName("beta")).toEqual({ id: "dom_b", name: "beta", createdAt: iso(T0 + 2) });
      expect(await s.store.getDomain("dom_missing")).toBeUndefined();
      expect(await s.store.getDomainByName("missing")).toBeUndefined();
      expect((await s.store.listDomains()).map((d) => d.id)).toEqual(["dom_a", "dom_b"]);
    });

    test("a duplicate domain id or name is already_exists", async () => {
      await s.store.insertDomain({ id: "dom_a", name: "alpha", createdAt: iso(T0) });
      await expect(s.store.insertDomain({ id: "dom_a", name: "other", createdAt: iso(T0) })).rejects.toSatisfy(
        expectEpError("already_exists"),
      );
      await expect(s.store.insertDomain({ id: "dom_b", name: "alpha", createdAt: iso(T0) })).rejects.toSatisfy(
        expectEpError("already_exists"),
      );
    });

    test("missions round-trip, list per domain and update", async () => {
      const d1 = await domain();
      const d2 = await domain();
      const row = {
        id: "msn_1",
        domainId: d1,
        title: "Ship",
        description: "the thing",
        status: "open",
        createdAt: iso(T0),
        updatedAt: iso(T0),
      };
      await s.store.insertMission(row);
      await s.store.insertMission({ ...row, id: "msn_2", domainId: d2, createdAt: iso(T0 + 1) });
      await s.store.insertMission({ ...row, id: "msn_0", createdAt: iso(T0 + 2) });
      expect(await s.store.getMission("msn_1")).toEqual(row);
      expect(await s.store.getMission("msn_x")).toBeUndefined();
      expect((await s.store.listMissions(d1)).map((m) => m.id)).toEqual(["msn_1", "msn_0"]);
      expect((await s.store.listMissions()).map((m) => m.id)).toEqual(["msn_1", "msn_2", "msn_0"]);
      const updated = await s.store.updateMission("msn_1", {
        status: "closed",
        title: "Shipped",
        updatedAt: iso(T0 + 9),
      });
      expect(updated).toEqual({ ...row, status: "closed", title: "Shipped", updatedAt: iso(T0 + 9) });
      expect(await s.store.updateMission("msn_1", {})).toEqual(updated);
      expect(await s.store.updateMission("msn_x", { status: "closed" })).toBeUndefined();
    });

    test("a mission in a missing domain is not_found", async () => {
      await expect(
        s.store.insertMission({
          id: "msn_1",
          domainId: "dom_missing",
          title: "x",
          description: "",
          status: "open",
          createdAt: iso(T0),
          updatedAt: iso(T0),
        }),
      ).rejects.toSatisfy(expectEpError("not_found"));
    });
  });

  describe("tasks", () => {
    test("a task round-trips every field", async () => {
      const { d, m } = await setup();
      const row = task(d, m, {
        kind: "assigned",
        title: "Write docs",
        description: "all of them",
        status: "running",
        claimPolicy: "assigned",
        priority: -3,
        capabilities: ["gpu", "linux"],
        assigneeAgentId: "agt_9",
        attempts: 2,
        maxAttempts: 5,
        runtime: "vendorB",
        input: { prompt: "hi", nested: { list: [1, "two", null] } },
        result: { output: "done", exitCode: 0, error: "" },
        claimedBy: "agt_9",
        leaseExpiresMs: T0 + 30_000_000_000,
        parentTaskId: "tsk_parent",
        createdAt: iso(T0 + 1),
        updatedAt: iso(T0 + 2),
      });
      await s.store.insertTask(row);
      expect(await s.store.getTask(row.id)).toEqual(row);
      expect(await s.store.getTask("tsk_missing")).toBeUndefined();
      await expect(s.store.insertTask(row)).rejects.toSatisfy(expectEpError("already_exists"));
      await expect(s.store.insertTask({ ...row, id: "tsk_orphan", missionId: "msn_missing" })).rejects.toSatisfy(
        expectEpError("not_found"),
      );
    });

    test("listTasks filters and keeps insertion order", async () => {
      const { d, m, add } = await setup();
      const m2 = await mission(d);
      const a = await add({ kind: "assigned", status: "todo" });
      const b = await add({ status: "queued" });
      const c = await add({ status: "succeeded", parentTaskId: b.id, claimedBy: "agt_1" });
      const held = await add({ status: "running", claimedBy: "agt_1" });
      const claimed = await add({ status: "claimed", claimedBy: "agt_1" });
      const other = task(d, m2);
      await s.store.insertTask(other);
      const ids = (rows: TaskRow[]) => rows.map((t) => t.id);
      expect(ids(await s.store.listTasks({ missionId: m }))).toEqual([a.id, b.id, c.id, held.id, claimed.id]);
      expect(ids(await s.store.listTasks({ domainId: d }))).toEqual([a.id, b.id, c.id, held.id, claimed.id, other.id]);
      expect(ids(await s.store.listTasks({ kind: "assigned" }))).toEqual([a.id]);
      expect(ids(await s.store.listTasks({ missionId: m, status: "queued" }))).toEqual([b.id]);
      expect(ids(await s.store.listTasks({ parentTaskId: b.id }))).toEqual([c.id]);
      expect(ids(await s.store.listTasks({ domainId: d, limit: 2 }))).toEqual([a.id, b.id]);
      expect(ids(await s.store.listTasks({ missionId: m, status: "" }))).toEqual([
        a.id,
        b.id,
        c.id,
        held.id,
        claimed.id,
      ]);
      // what an agent holds: its lease's states, by the agent it names
      expect(ids(await s.store.listTasks({ claimedBy: "agt_1", held: true }))).toEqual([held.id, claimed.id]);
      expect(ids(await s.store.listTasks({ claimedBy: "agt_1" }))).toEqual([c.id, held.id, claimed.id]);
      expect(ids(await s.store.listTasks({ claimedBy: "agt_2", held: true }))).toEqual([]);
      expect(ids(await s.store.listTasks({ missionId: m, held: true }))).toEqual([held.id, claimed.id]);
      expect(await s.store.listTasks({ missionId: "msn_missing" })).toEqual([]);
    });

    test("deleteTask says whether it deleted", async () => {
      const { add } = await setup();
      const t = await add();
      expect(await s.store.deleteTask(t.id)).toBe(true);
      expect(await s.store.deleteTask(t.id)).toBe(false);
      expect(await s.store.getTask(t.id)).toBeUndefined();
    });

    test("updateTask applies a patch, including JSON fields and clearing the lease", async () => {
      const { add } = await setup();
      const t = await add({ leaseExpiresMs: T0 + 5, claimedBy: "agt_1", status: "claimed" });
      const u = await s.store.updateTask(t.id, {
        status: "succeeded",
        result: { output: "ok", error: "" },
        capabilities: ["x"],
        input: { a: 1 },
        leaseExpiresMs: null,
        updatedAt: iso(T0 + 7),
      });
      expect(u).toEqual({
        ...t,
        status: "succeeded",
        result: { output: "ok", error: "" },
        capabilities: ["x"],
        input: { a: 1 },
        leaseExpiresMs: null,
        updatedAt: iso(T0 + 7),
      });
      expect(await s.store.getTask(t.id)).toEqual(u);
      expect(await s.store.updateTask(t.id, {})).toEqual(u);
      expect(await s.store.updateTask(t.id, { result: null, input: null })).toEqual({
        ...u,
        result: null,
        input: null,
      });
      expect(await s.store.updateTask("tsk_missing", { status: "queued" })).toBeUndefined();
    });

    test("a result's denials round-trip, text that needs escaping included", async () => {
      const { add } = await setup();
      const t = await add({ claimedBy: "agt_1", status: "running" });
      const denials = [
        {
          tool: "Bash",
          tried: "echo 'hi' > \"/root/x\"; printf '\\n\u00e9\u2603'",
          reason: "Output redirection to '/root/x' needs approval.",
          source: "policy",
          callId: "toolu_1",
        },
        {
          tool: "run_shell_command",
          tried: "",
          reason: 'Tool "run_shell_command" not found',
          source: "unknown_tool",
          callId: "",
        },
      ];
      const result = { output: "done", error: "", denials };
      expect(await s.store.updateTask(t.id, { status: "succeeded", result, updatedAt: iso(T0 + 3) })).toMatchObject({
        result,
      });
      expect((await s.store.getTask(t.id))!.result).toEqual(result);
    });

    test("updateTask with an expectation is compare-and-set", async () => {
      const { add } = await setup();
      const t = await add({ status: "claimed", claimedBy: "agt_1" });
      expect(await s.store.updateTask(t.id, { status: "running" }, { status: ["queued"] })).toBeUndefined();
      expect(
        await s.store.updateTask(t.id, { status: "running" }, { status: ["claimed"], claimedBy: "agt_2" }),
      ).toBeUndefined();
      expect((await s.store.getTask(t.id))?.status).toBe("claimed");
      expect(
        (await s.store.updateTask(t.id, { status: "running" }, { status: ["claimed", "running"], claimedBy: "agt_1" }))
          ?.status,
      ).toBe("running");
      expect((await s.store.updateTask(t.id, { claimedBy: "" }, { claimedBy: "agt_1" }))?.claimedBy).toBe("");
      expect(await s.store.updateTask(t.id, { status: "queued" }, { status: [] })).toBeUndefined();
      // the claim it is about: a newer claim (more attempts) is not touched
      expect(await s.store.updateTask(t.id, { status: "queued" }, { attempts: t.attempts + 1 })).toBeUndefined();
      expect((await s.store.updateTask(t.id, { priority: 3 }, { attempts: t.attempts }))?.priority).toBe(3);
      // a live lease: none at all, or one running past the given time
      expect((await s.store.updateTask(t.id, { priority: 4 }, { leaseAfterMs: T0 }))?.priority).toBe(4);
      await s.store.updateTask(t.id, { leaseExpiresMs: T0 + 10 });
      expect(await s.store.updateTask(t.id, { priority: 5 }, { leaseAfterMs: T0 + 10 })).toBeUndefined();
      expect((await s.store.updateTask(t.id, { priority: 5 }, { leaseAfterMs: T0 + 9 }))?.priority).toBe(5);
      // Concurrent compare-and-set: exactly one of many identical transitions wins.
      const wins = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          s.store.updateTask(t.id, { status: "succeeded", claimedBy: `agt_${i}` }, { status: ["running"] }),
        ),
      );
      expect(wins.filter(Boolean)).toHaveLength(1);
    });
  });

  describe("claiming", () => {
    test("claims by priority, then oldest first, and sets the claim fields", async () => {
      const { d, add } = await setup();
      const low = await add({ priority: 0 });
      const highOld = await add({ priority: 5 });
      const highNew = await add({ priority: 5 });
      const mid = await add({ priority: 1 });
      const order: string[] = [];
      for (let i = 0; i < 4; i++) {
        const c = await s.store.claimTask(claimant(d), T0 + 1000, 30_000);
        order.push(c!.id);
      }
      expect(order).toEqual([highOld.id, highNew.id, mid.id, low.id]);
      expect(await s.store.claimTask(claimant(d), T0 + 1000, 30_000)).toBeUndefined();
      const claimed = await s.store.getTask(highOld.id);
      expect(claimed).toEqual({
        ...highOld,
        status: "claimed",
        claimedBy: "agt_1",
        attempts: 1,
        leaseExpiresMs: T0 + 31_000,
        updatedAt: iso(T0 + 1000),
        leaseId: "ls_test",
      });
    });

    test("the task's capabilities must be a subset of the agent's", async () => {
      const { d, add } = await setup();
      const needsTwo = await add({ capabilities: ["gpu", "linux"] });
      const needsNone = await add({ capabilities: [] });
      const c = claimant(d, { capabilities: ["gpu"] });
      expect((await s.store.claimTask(c, T0, 1000))?.id).toBe(needsNone.id);
      expect(await s.store.claimTask(c, T0, 1000)).toBeUndefined();
      expect(await s.store.claimTask(claimant(d, { capabilities: [] }), T0, 1000)).toBeUndefined();
      expect((await s.store.claimTask(claimant(d, { capabilities: ["linux", "arm", "gpu"] }), T0, 1000))?.id).toBe(
        needsTwo.id,
      );
    });

    test("a runtime-bound task goes only to an agent of that runtime", async () => {
      const { d, add } = await setup();
      const bound = await add({ runtime: "vendorB", priority: 9 });
      const any = await add({ runtime: "" });
      expect((await s.store.claimTask(claimant(d, { runtime: "shell" }), T0, 1000))?.id).toBe(any.id);
      expect(await s.store.claimTask(claimant(d, { runtime: "shell" }), T0, 1000)).toBeUndefined();
      expect((await s.store.claimTask(claimant(d, { runtime: "vendorB" }), T0, 1000))?.id).toBe(bound.id);
    });

    test("an assigned-policy task goes only to its assignee", async () => {
      const { d, add } = await setup();
      const mine = await add({ claimPolicy: "assigned", assigneeAgentId: "agt_2", capabilities: ["ignored"] });
      expect(await s.store.claimTask(claimant(d, { agentId: "agt_1" }), T0, 1000)).toBeUndefined();
      expect((await s.store.claimTask(claimant(d, { agentId: "agt_2" }), T0, 1000))?.id).toBe(mine.id);
    });

    test("broadcast parents, Kanban tasks, other domains and non-queued tasks are never claimable", async () => {
      const { d, add } = await setup();
      await add({ claimPolicy: "broadcast", priority: 10 });
      await add({ kind: "assigned", claimPolicy: "", status: "queued" });
      await add({ status: "failed" });
      await add({ status: "claimed", claimedBy: "agt_x" });
      const other = await setup();
      await other.add();
      expect(await s.store.claimTask(claimant(d), T0, 1000)).toBeUndefined();
      expect(await s.store.claimTask(claimant(d, { agentId: "" }), T0, 1000)).toBeUndefined();
      expect((await s.store.claimTask(claimant(other.d), T0, 1000))?.domainId).toBe(other.d);
    });

    test("a requeued task is claimed again and counts the attempt", async () => {
      const { d, add } = await setup();
      const t = await add();
      await s.store.claimTask(claimant(d), T0, 1000);
      await s.store.updateTask(
        t.id,
        { status: "queued", claimedBy: "", leaseExpiresMs: null },
        { status: ["claimed"] },
      );
      const again = await s.store.claimTask(claimant(d, { agentId: "agt_2" }), T0 + 5, 1000);
      expect(again).toMatchObject({ id: t.id, attempts: 2, claimedBy: "agt_2", leaseExpiresMs: T0 + 1005 });
    });

    test("50 concurrent claimers on 500 tasks claim every task exactly once", async () => {
      const { d, m } = await setup();
      const ids = new Set<string>();
      await s.store.transaction(async (tx) => {
        for (let i = 0; i < 500; i++) {
          const t = task(d, m, { priority: i % 3 });
          await tx.insertTask(t);
          ids.add(t.id);
        }
      });
      // PostgreSQL: a second store with its own pool of real connections races the first.
      const stores = [s.store, await s.fx.openAnother({ max: 10 })];
      const claims = new Map<string, string>();
      await Promise.all(
        Array.from({ length: 50 }, async (_, w) => {
          const s = stores[w % stores.length];
          const agentId = `agt_${w}`;
          for (;;) {
            const t = await s.claimTask(claimant(d, { agentId }), T0, 60_000);
            if (!t) return;
            expect(claims.has(t.id)).toBe(false);
            claims.set(t.id, agentId);
            expect(
              await s.updateTask(t.id, { status: "succeeded" }, { status: ["claimed"], claimedBy: agentId }),
            ).toBeDefined();
          }
        }),
      );
      expect(claims.size).toBe(500);
      expect(new Set(claims.keys())).toEqual(ids);
      const done = await s.store.listTasks({ domainId: d });
      expect(done.every((t) => t.status === "succeeded" && t.attempts === 1 && t.claimedBy === claims.get(t.id))).toBe(
        true,
      );
    });

    test("listExpiredLeases lists held tasks whose lease is due, soonest first", async () => {
      const { add } = await setup();
      const late = await add({ status: "running", claimedBy: "a", leaseExpiresMs: T0 + 200 });
      const early = await add({ status: "claimed", claimedBy: "a", leaseExpiresMs: T0 + 100 });
      await add({ status: "claimed", claimedBy: "a", leaseExpiresMs: T0 + 301 });
      await add({ status: "succeeded", claimedBy: "a", leaseExpiresMs: T0 });
      await add({ status: "queued", leaseExpiresMs: null });
      expect((await s.store.listExpiredLeases(T0 + 300, 10)).map((t) => t.id)).toEqual([early.id, late.id]);
      expect((await s.store.listExpiredLeases(T0 + 300, 1)).map((t) => t.id)).toEqual([early.id]);
      expect((await s.store.listExpiredLeases(T0 + 100, 10)).map((t) => t.id)).toEqual([early.id]);
      expect(await s.store.listExpiredLeases(T0 + 99, 10)).toEqual([]);
    });
  });
});
