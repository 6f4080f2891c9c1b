// The store suite's task dependencies (dependency-store.ts), on both dialects: the edges, the one
// statement that queues a parent's ready children, a child's parents and their states, and the
// mark a parent carries (has_dependents, migration 0015).
import { describe, expect } from "vitest";
import { iso, storeSuite, T0 } from "../../test-support/store-suite.js";
import type { TaskRow } from "./store.js";

storeSuite((s) => {
  const { test, setup, claimant } = s;

  describe("task dependencies", () => {
    test(
      "queueReadyChildren queues the waiting children whose " + "parents all succeeded, only those, and returns them",
      async () => {
        const { add } = await setup();
        const a = await add({ status: "running" });
        const b = await add({ status: "succeeded" });
        const onlyA = await add({ status: "waiting", dependsOn: [a.id] });
        const both = await add({ status: "waiting", dependsOn: [a.id, b.id] });
        const other = await add({ status: "waiting", dependsOn: [b.id, onlyA.id] });
        const cancelled = await add({ status: "cancelled", dependsOn: [a.id] });
        for (const c of [onlyA, both, other, cancelled]) await s.store.insertTaskDeps(c.id, c.dependsOn);
        expect(await s.store.queueReadyChildren(a.id, iso(T0 + 5))).toEqual([]);
        await s.store.updateTask(a.id, { status: "succeeded" });
        const queued = await s.store.queueReadyChildren(a.id, iso(T0 + 9));
        expect(queued.map((t) => [t.id, t.status, t.updatedAt])).toEqual([
          [onlyA.id, "queued", iso(T0 + 9)],
          [both.id, "queued", iso(T0 + 9)],
        ]);
        expect(queued[1]!.dependsOn).toEqual([a.id, b.id]);
        expect((await s.store.getTask(other.id))!.status).toBe("waiting");
        expect((await s.store.getTask(cancelled.id))!.status).toBe("cancelled");
        // asked again, nothing more
        expect(await s.store.queueReadyChildren(a.id, iso(T0 + 10))).toEqual([]);
      },
    );

    test("listChildren and listParentStates read the edges both ways; a parent named twice is one edge", async () => {
      const { add } = await setup();
      const a = await add({ status: "failed" });
      const b = await add({ status: "succeeded" });
      const c = await add({ status: "waiting", dependsOn: [a.id, b.id] });
      const d = await add({ status: "waiting", dependsOn: [a.id] });
      await s.store.insertTaskDeps(c.id, [a.id, b.id, a.id]);
      await s.store.insertTaskDeps(d.id, [a.id]);
      expect((await s.store.listChildren(a.id)).map((t) => t.id)).toEqual([c.id, d.id]);
      expect((await s.store.listChildren(c.id)).map((t) => t.id)).toEqual([]);
      const states = await s.store.listParentStates([c.id, d.id]);
      expect(states.sort((x, y) => (x.childId + x.parentId).localeCompare(y.childId + y.parentId))).toEqual(
        [
          { childId: c.id, parentId: a.id, status: "failed" },
          { childId: c.id, parentId: b.id, status: "succeeded" },
          { childId: d.id, parentId: a.id, status: "failed" },
        ].sort((x, y) => (x.childId + x.parentId).localeCompare(y.childId + y.parentId)),
      );
      expect(await s.store.listParentStates([])).toEqual([]);
    });

    test("depends_on and step round-trip on the task row", async () => {
      const { add } = await setup();
      const a = await add();
      const c = await add({ status: "waiting", dependsOn: [a.id], step: "review" });
      expect(await s.store.getTask(c.id)).toMatchObject({ dependsOn: [a.id], step: "review" });
      expect(await s.store.getTask(a.id)).toMatchObject({ dependsOn: [], step: "" });
    });

    test("two parents of one child succeeding at once on two connections: the child is queued (30 joins)", async () => {
      const { add } = await setup();
      const other = await s.fx.openAnother();
      for (let i = 0; i < 30; i++) {
        const a = await add({ status: "running" });
        const b = await add({ status: "running" });
        const c = await add({ status: "waiting", dependsOn: [a.id, b.id] });
        await s.store.insertTaskDeps(c.id, [a.id, b.id]);
        const succeed = (store: typeof s.store, id: string) =>
          store.transaction(async (tx) => {
            await tx.updateTask(id, { status: "succeeded" });
            return tx.queueReadyChildren(id, iso(T0 + 9));
          });
        const [byA, byB] = await Promise.all([succeed(s.store, a.id), succeed(other, b.id)]);
        // exactly one of the two commits queued it, and it is queued
        expect({ join: i, queued: byA.length + byB.length }).toEqual({ join: i, queued: 1 });
        expect((await s.store.getTask(c.id))!.status).toBe("queued");
      }
    });

    test("markParent reads the task and marks it as having dependents; the mark is on every read after", async () => {
      const { add } = await setup();
      const a = await add({ status: "running" });
      expect((await s.store.getTask(a.id))!.hasDependents).toBeUndefined();
      expect(await s.store.markParent(a.id)).toMatchObject({ id: a.id, status: "running", hasDependents: true });
      expect((await s.store.getTask(a.id))!.hasDependents).toBe(true);
      const done = await s.store.updateTask(a.id, { status: "succeeded" });
      expect(done!.hasDependents).toBe(true);
      expect(await s.store.markParent("tsk_none")).toBeUndefined();
    });

    test("migration 0015 marks the parents of the edges a database had before it", async () => {
      const { add } = await setup();
      const a = await add({ status: "running" });
      const b = await add({ status: "waiting", dependsOn: [a.id] });
      const lone = await add();
      await s.store.insertTaskDeps(b.id, [a.id]);
      // the database as it was before 0015: no column, the migration not applied
      const query = (sql: string) => (s.store as unknown as { query(sql: string): Promise<unknown> }).query(sql);
      await query("ALTER TABLE tasks DROP COLUMN has_dependents");
      await query("DELETE FROM schema_migrations WHERE version = 15");
      const again = await s.fx.openAnother();
      expect((await again.getTask(a.id))!.hasDependents).toBe(true);
      expect((await again.getTask(b.id))!.hasDependents).toBeUndefined();
      expect((await again.getTask(lone.id))!.hasDependents).toBeUndefined();
    });

    describe("queueChildrenAndClaim (a parent's success, its agent taking its next task)", () => {
      /** A parent that succeeded, a ready child of it, one that waits for another parent too, and edges. */
      async function family(over: { child?: Partial<TaskRow>; queuedBefore?: boolean } = {}) {
        const { d, add } = await setup();
        // queued before the children were made: the claim's order (priority, then oldest) puts it first
        const older = over.queuedBefore ? await add({ status: "queued", runtime: "shell" }) : undefined;
        const other = await add({ status: "running", runtime: "shell" });
        const parent = await add({ status: "succeeded", runtime: "shell", hasDependents: true });
        const child = await add({ status: "waiting", runtime: "shell", dependsOn: [parent.id], ...over.child });
        const second = await add({ status: "waiting", runtime: "shell", dependsOn: [parent.id] });
        const blocked = await add({ status: "waiting", runtime: "shell", dependsOn: [parent.id, other.id] });
        for (const c of [child, second, blocked]) await s.store.insertTaskDeps(c.id, c.dependsOn);
        return { d, add, parent, child, second, blocked, older };
      }
      /** Rows written so far on SQLite (total_changes), to tell one write of a row from two. */
      const writes = () =>
        s.dialect === "sqlite"
          ? Number(
              (s.store as unknown as { db: { prepare(q: string): { pluck(): { get(): unknown } } } }).db
                .prepare("SELECT total_changes()")
                .pluck()
                .get(),
            )
          : 0;

      test("with nothing queued the agent takes the oldest ready child; the other ready one is queued", async () => {
        const { d, parent, child, second, blocked } = await family();
        const before = writes();
        const { queued, claimed } = await s.store.queueChildrenAndClaim(
          parent.id,
          iso(T0 + 9),
          claimant(d, { start: true }),
          T0 + 10,
          30_000,
        );
        expect(claimed).toMatchObject({ id: child.id, status: "running", claimedBy: "agt_1", attempts: 1 });
        expect(claimed).toMatchObject({ leaseId: "ls_test", leaseExpiresMs: T0 + 30_010 });
        // both ready children, as queued (the claimed one before its claim), in creation order
        expect(queued.map((t) => [t.id, t.status, t.attempts, t.claimedBy, t.updatedAt])).toEqual([
          [child.id, "queued", 0, "", iso(T0 + 9)],
          [second.id, "queued", 0, "", iso(T0 + 9)],
        ]);
        expect((await s.store.getTask(child.id))!).toEqual(claimed);
        expect((await s.store.getTask(second.id))!.status).toBe("queued");
        expect((await s.store.getTask(blocked.id))!.status).toBe("waiting");
        // SQLite writes the claimed child once (not queued, then claimed): two rows in all
        if (s.dialect === "sqlite") expect(writes() - before).toBe(2);
      });

      test("an older queued task goes first; the ready children are only queued", async () => {
        const { d, parent, child, second, older } = await family({ queuedBefore: true });
        const { queued, claimed } = await s.store.queueChildrenAndClaim(
          parent.id,
          iso(T0 + 9),
          claimant(d, { start: true }),
          T0 + 10,
          30_000,
        );
        expect(claimed?.id).toBe(older!.id);
        expect(queued.map((t) => [t.id, t.status])).toEqual([
          [child.id, "queued"],
          [second.id, "queued"],
        ]);
        expect((await s.store.getTask(child.id))!.status).toBe("queued");
      });

      test(
        "a ready child of higher priority goes before the " + "queue; one the agent may not run is only queued",
        async () => {
          const { d, add, parent, child, second } = await family({ child: { runtime: "claude" } });
          await s.store.updateTask(second.id, { priority: 5 });
          const low = await add({ status: "queued", runtime: "shell", priority: 1 });
          const { queued, claimed } = await s.store.queueChildrenAndClaim(
            parent.id,
            iso(T0 + 9),
            claimant(d),
            T0 + 10,
            30_000,
          );
          expect(claimed).toMatchObject({ id: second.id, status: "claimed", attempts: 1 });
          expect(queued.map((t) => [t.id, t.status])).toEqual([
            [child.id, "queued"],
            [second.id, "queued"],
          ]);
          expect((await s.store.getTask(child.id))!.status).toBe("queued"); // a claude task: not this agent's
          expect((await s.store.getTask(low.id))!.status).toBe("queued");
        },
      );

      test("nothing the agent may run: the ready children are queued, nothing is claimed", async () => {
        const { d, parent, child, second } = await family();
        const { queued, claimed } = await s.store.queueChildrenAndClaim(
          parent.id,
          iso(T0 + 9),
          claimant(d, { runtime: "codex" }),
          T0 + 10,
          30_000,
        );
        expect(claimed).toBeUndefined();
        expect(queued.map((t) => t.id)).toEqual([child.id, second.id]);
        expect((await s.store.getTask(child.id))!.status).toBe("queued");
      });
    });
  });
});
