// The store suite (events, meta values are set, read and overwritten, transactions), on both dialects: see
// test-support/store-suite.ts.
import { describe, expect } from "vitest";
import type { EventRow, NewEvent, Store } from "./store.js";
import { expectEpError, iso, storeSuite, T0 } from "../../test-support/store-suite.js";

storeSuite((s) => {
  const { test, domain, task } = s;

  describe("events", () => {
    const ev = (over: Partial<NewEvent> = {}): NewEvent => ({ type: "progress", name: "task.progress", ...over });

    test("appended events get strictly increasing ids and read back identically", async () => {
      expect(await s.store.lastEventId()).toBe(0);
      const first = await s.store.appendEvents(
        [ev({ taskId: "tsk_1", payload: { line: "a" } }), ev({ type: "inbox", name: "x", agentId: "agt_1" })],
        iso(T0),
      );
      const second = await s.store.appendEvents(
        [ev({ status: "running", sessionId: "ses_1", domainId: "dom_1", missionId: "msn_1" })],
        iso(T0 + 1),
      );
      const ids = [...first, ...second].map((e) => e.id);
      expect(ids.every((x, i) => i === 0 || x > ids[i - 1])).toBe(true);
      expect(first[0]).toEqual({
        id: ids[0],
        type: "progress",
        name: "task.progress",
        domainId: "",
        missionId: "",
        agentId: "",
        taskId: "tsk_1",
        sessionId: "",
        status: "",
        payload: { line: "a" },
        createdAt: iso(T0),
      });
      expect(await s.store.listEvents({})).toEqual([...first, ...second]);
      expect(await s.store.lastEventId()).toBe(ids[2]);
      expect(await s.store.appendEvents([], iso(T0))).toEqual([]);
    });

    test("concurrent appends never share or reorder ids", async () => {
      const other = await s.fx.openAnother({ max: 5 });
      const batches = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 ? other : s.store).appendEvents([ev({ taskId: `t${i}` }), ev({ taskId: `t${i}` })], iso(T0)),
        ),
      );
      for (const b of batches) expect(b[1].id).toBeGreaterThan(b[0].id);
      const all = batches.flat().map((e) => e.id);
      expect(new Set(all).size).toBe(40);
      const listed = await s.store.listEvents({ limit: 100 });
      expect(listed.map((e) => e.id)).toEqual([...all].sort((a, b) => a - b));
    });

    test("listEvents filters by type, domain, mission, agent, session, afterId and limit", async () => {
      const rows = await s.store.appendEvents(
        [
          ev({ type: "approval", name: "a", domainId: "d1", missionId: "m1" }),
          ev({ type: "inbox", name: "b", domainId: "d1", agentId: "agt_1" }),
          ev({ type: "matrix", name: "c", domainId: "d2", sessionId: "ses_1" }),
          ev({ type: "progress", name: "d", domainId: "d1", missionId: "m1", agentId: "agt_1", sessionId: "ses_1" }),
        ],
        iso(T0),
      );
      const names = async (q: Parameters<Store["listEvents"]>[0]) => (await s.store.listEvents(q)).map((e) => e.name);
      expect(await names({ types: ["approval", "matrix"] })).toEqual(["a", "c"]);
      expect(await names({ domainId: "d1" })).toEqual(["a", "b", "d"]);
      expect(await names({ missionId: "m1" })).toEqual(["a", "d"]);
      expect(await names({ agentId: "agt_1" })).toEqual(["b", "d"]);
      expect(await names({ sessionId: "ses_1" })).toEqual(["c", "d"]);
      expect(await names({ domainId: "d1", agentId: "agt_1", types: ["progress"] })).toEqual(["d"]);
      expect(await names({ afterId: rows[1].id })).toEqual(["c", "d"]);
      expect(await names({ afterId: rows[0].id, limit: 2 })).toEqual(["b", "c"]);
      expect(await names({ types: [] })).toEqual(["a", "b", "c", "d"]);
      expect(await names({ afterId: rows[3].id })).toEqual([]);
    });

    test("listEvents filters by task: its progress (through the partial index) or all its events", async () => {
      await s.store.appendEvents(
        [
          ev({ type: "matrix", name: "task.created", taskId: "tsk_1" }),
          ev({ type: "progress", name: "p1", taskId: "tsk_1" }),
          ev({ type: "progress", name: "other", taskId: "tsk_2" }),
          ev({ type: "progress", name: "p2", taskId: "tsk_1" }),
          ev({ type: "matrix", name: "task.succeeded", taskId: "tsk_1" }),
        ],
        iso(T0),
      );
      const names = async (q: Parameters<Store["listEvents"]>[0]) => (await s.store.listEvents(q)).map((e) => e.name);
      expect(await names({ taskId: "tsk_1", types: ["progress"] })).toEqual(["p1", "p2"]);
      expect(await names({ taskId: "tsk_1" })).toEqual(["task.created", "p1", "p2", "task.succeeded"]);
      expect(await names({ taskId: "tsk_1", types: ["matrix"] })).toEqual(["task.created", "task.succeeded"]);
      expect(await names({ taskId: "tsk_2", types: ["progress"], limit: 5 })).toEqual(["other"]);
    });

    test("pruneEvents deletes below an id and never lets ids restart", async () => {
      const rows = await s.store.appendEvents([ev(), ev(), ev(), ev()], iso(T0));
      expect(await s.store.pruneEvents(rows[2].id)).toBe(2);
      expect((await s.store.listEvents({})).map((e) => e.id)).toEqual([rows[2].id, rows[3].id]);
      expect(await s.store.pruneEvents(rows[3].id + 100)).toBe(1);
      expect((await s.store.listEvents({})).map((e) => e.id)).toEqual([rows[3].id]);
      const [next] = await s.store.appendEvents([ev()], iso(T0));
      expect(next.id).toBeGreaterThan(rows[3].id);
      expect(await s.store.lastEventId()).toBe(next.id);
    });
  });

  test("meta values are set, read and overwritten", async () => {
    expect(await s.store.getMeta("k")).toBeUndefined();
    await s.store.setMeta("k", "v1");
    expect(await s.store.getMeta("k")).toBe("v1");
    await s.store.setMeta("k", "v2");
    expect(await s.store.getMeta("k")).toBe("v2");
  });

  describe("transactions", () => {
    test("a failed transaction leaves nothing behind", async () => {
      const d = await domain();
      const before = await s.store.lastEventId();
      const boom = new Error("boom");
      await expect(
        s.store.transaction(async (tx) => {
          await tx.insertMission({
            id: "msn_tx",
            domainId: d,
            title: "x",
            description: "",
            status: "open",
            createdAt: iso(T0),
            updatedAt: iso(T0),
          });
          await tx.insertTask(task(d, "msn_tx", { id: "tsk_tx" }));
          await tx.appendEvents([{ type: "inbox", name: "x" }], iso(T0));
          await tx.setMeta("tx", "1");
          await tx.updateMission("msn_tx", { status: "closed" });
          expect((await tx.getTask("tsk_tx"))?.id).toBe("tsk_tx");
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await s.store.getMission("msn_tx")).toBeUndefined();
      expect(await s.store.getTask("tsk_tx")).toBeUndefined();
      expect(await s.store.getMeta("tx")).toBeUndefined();
      expect(await s.store.lastEventId()).toBe(before);
      expect(await s.store.listEvents({ afterId: before })).toEqual([]);
    });

    test("a committed transaction keeps everything and returns fn's value; nested calls join it", async () => {
      const d = await domain();
      const out = await s.store.transaction(async (tx) => {
        await tx.insertMission({
          id: "msn_tx",
          domainId: d,
          title: "x",
          description: "",
          status: "open",
          createdAt: iso(T0),
          updatedAt: iso(T0),
        });
        await tx.transaction(async (inner) => inner.setMeta("tx", "1"));
        return "ok";
      });
      expect(out).toBe("ok");
      expect((await s.store.getMission("msn_tx"))?.id).toBe("msn_tx");
      expect(await s.store.getMeta("tx")).toBe("1");
    });

    test("transactions started in the same turn commit or roll back each on its own", async () => {
      const boom = new Error("boom");
      const results = await Promise.allSettled([
        s.store.setMeta("plain", "1"),
        s.store.transaction(async (tx) => {
          await tx.setMeta("ok1", "1");
          return "one";
        }),
        s.store.transaction(async (tx) => {
          await tx.setMeta("bad", "1");
          throw boom;
        }),
        s.store.transaction(async (tx) => {
          await tx.setMeta("ok2", "1");
          return "two";
        }),
      ]);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
      expect((results[2] as PromiseRejectedResult).reason).toBe(boom);
      expect([
        await s.store.getMeta("plain"),
        await s.store.getMeta("ok1"),
        await s.store.getMeta("bad"),
        await s.store.getMeta("ok2"),
      ]).toEqual(["1", "1", undefined, "1"]);
    });

    test(
      "a statement error fails only its own transaction among " +
        "those started together; final events keep their order",
      async () => {
        const d = await domain();
        const mission = (id: string) => ({
          id,
          domainId: d,
          title: "x",
          description: "",
          status: "open",
          createdAt: iso(T0),
          updatedAt: iso(T0),
        });
        await s.store.insertMission(mission("msn_dup"));
        const before = await s.store.lastEventId();
        const final = (tx: Store, name: string) =>
          (tx.appendFinalEvents ?? tx.appendEvents).call(tx, [{ type: "matrix", name }], iso(T0));
        const results = await Promise.allSettled([
          s.store.transaction(async (tx) => tx.insertMission(mission("msn_dup"))),
          s.store.transaction(async (tx) => {
            await tx.setMeta("b2", "1");
            return final(tx, "e2");
          }),
          s.store.transaction(async (tx) => {
            await tx.setMeta("b3", "1");
            await tx.insertMission(mission("msn_dup"));
          }),
          s.store.transaction(async (tx) => {
            await tx.setMeta("b4", "1");
            return final(tx, "e4");
          }),
        ]);
        expect(results.map((r) => r.status)).toEqual(["rejected", "fulfilled", "rejected", "fulfilled"]);
        expect((results[0] as PromiseRejectedResult).reason).toSatisfy(expectEpError("already_exists"));
        expect((results[2] as PromiseRejectedResult).reason).toSatisfy(expectEpError("already_exists"));
        expect([await s.store.getMeta("b2"), await s.store.getMeta("b3"), await s.store.getMeta("b4")]).toEqual([
          "1",
          undefined,
          "1",
        ]);
        const [e2] = (results[1] as PromiseFulfilledResult<EventRow[]>).value;
        const [e4] = (results[3] as PromiseFulfilledResult<EventRow[]>).value;
        expect(e2.id).toBeLessThan(e4.id);
        expect((await s.store.listEvents({ afterId: before })).map((e) => [e.id, e.name])).toEqual([
          [e2.id, "e2"],
          [e4.id, "e4"],
        ]);
      },
    );

    test("work outside a transaction waits for it or sees its result whole", async () => {
      let release!: () => void;
      let opened!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const open = new Promise<void>((r) => (opened = r));
      const tx = s.store.transaction(async (t) => {
        await t.setMeta("a", "1");
        opened();
        await gate;
        await t.setMeta("b", "1");
      });
      await open;
      if (s.store.dialect === "postgres") {
        // PostgreSQL isolates: a read outside does not wait and sees nothing of the open transaction
        expect(await Promise.all([s.store.getMeta("a"), s.store.getMeta("b")])).toEqual([undefined, undefined]);
        release();
        await tx;
      } else {
        // SQLite serializes: the read waits for the transaction and sees all of it
        const read = Promise.all([s.store.getMeta("a"), s.store.getMeta("b")]);
        release();
        await tx;
        expect(await read).toEqual(["1", "1"]);
      }
      expect(await Promise.all([s.store.getMeta("a"), s.store.getMeta("b")])).toEqual(["1", "1"]);
    });
  });
});
