// The store suite's task dependencies (dependency-store.ts), on both dialects: the edges, the one
// statement that queues a parent's ready children, a child's parents and their states, and the
// mark a parent carries (has_dependents, migration 0015).
import { describe, expect } from "vitest";
import { iso, storeSuite, T0 } from "../../test-support/store-suite.js";

storeSuite((s) => {
  const { test, setup } = s;

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
  });
});
