// The one store suite, run against both dialects: SQLite on a temp file and
// PostgreSQL at EP_TEST_PG_URL (default postgres://127.0.0.1:5432/test), each test in
// a fresh database (a temp file, or a random schema dropped afterwards). Without a
// reachable PostgreSQL the PG half is skipped with the reason printed; under CI it fails.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EpError } from "../../common/errors.js";
import { PostgresStore, withDefaultUser } from "./postgres/postgres-store.js";
import { SqliteStore } from "./sqlite/sqlite-store.js";
import type { AgentRow, Claimant, EventRow, NewEvent, Store, TaskRow } from "./store.js";

const PG_URL = process.env.EP_TEST_PG_URL ?? "postgres://127.0.0.1:5432/test";
const pgAdmin = () => new pg.Client({ connectionString: withDefaultUser(PG_URL), connectionTimeoutMillis: 3000 });

async function probePostgres(): Promise<string | undefined> {
  const client = pgAdmin();
  client.on("error", () => {});
  try {
    await client.connect();
    await client.query("SELECT 1");
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message || err.name : String(err);
  } finally {
    await client.end().catch(() => {});
  }
}

const pgProblem = await probePostgres();
const skipPostgres = Boolean(pgProblem) && !process.env.CI;
if (skipPostgres) console.log(`store suite: skipping PostgreSQL (${PG_URL} unreachable: ${pgProblem}); set EP_TEST_PG_URL to run it`);

/** A fresh, migrated database, plus a way to open more stores on it (other replicas/processes). */
interface Fixture {
  store: Store;
  openAnother(opts?: { migrate?: boolean; max?: number }): Promise<Store>;
  cleanup(): Promise<void>;
}

async function sqliteFixture(): Promise<Fixture> {
  const dir = mkdtempSync(join(tmpdir(), "ep-store-"));
  const path = join(dir, "tower.db");
  const opened: Store[] = [];
  const open = async (migrate = true) => {
    const s = SqliteStore.open({ path });
    opened.push(s);
    if (migrate) await s.migrate();
    return s;
  };
  const store = await open();
  return {
    store,
    openAnother: (o) => open(o?.migrate ?? true),
    async cleanup() {
      for (const s of opened) await s.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresFixture(): Promise<Fixture> {
  if (pgProblem) throw new Error(`PostgreSQL at ${PG_URL} is unreachable under CI: ${pgProblem}`);
  const schema = `ep_test_${randomBytes(6).toString("hex")}`;
  const opened: Store[] = [];
  const open = async (migrate = true, max = 20) => {
    const s = await PostgresStore.connect(PG_URL, { schema, max });
    opened.push(s);
    if (migrate) await s.migrate();
    return s;
  };
  const store = await open();
  return {
    store,
    openAnother: (o) => open(o?.migrate ?? true, o?.max),
    async cleanup() {
      for (const s of opened) await s.close();
      const admin = pgAdmin();
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    },
  };
}

const dialects = [
  { dialect: "sqlite", skip: false, fixture: sqliteFixture },
  { dialect: "postgres", skip: skipPostgres, fixture: postgresFixture },
] as const;

const T0 = Date.parse("2025-01-01T00:00:00.000Z");
const iso = (ms: number) => new Date(ms).toISOString();

function expectEpError(code: string) {
  return (err: unknown) => {
    expect(err).toBeInstanceOf(EpError);
    expect((err as EpError).code).toBe(code);
    return true;
  };
}

describe.each(dialects)("store ($dialect)", ({ dialect, skip, fixture }) => {
  const test = skip ? it.skip : it;
  let fx: Fixture;
  let store: Store;
  let n = 0;

  beforeEach(async () => {
    if (skip) return;
    fx = await fixture();
    store = fx.store;
  });

  afterEach(async () => {
    if (skip) return;
    await fx.cleanup();
  });

  const id = (prefix: string) => `${prefix}_${String(++n).padStart(6, "0")}`;

  async function domain(name = id("name")): Promise<string> {
    const d = id("dom");
    await store.insertDomain({ id: d, name, createdAt: iso(T0 + n) });
    return d;
  }

  async function mission(domainId: string): Promise<string> {
    const m = id("msn");
    await store.insertMission({ id: m, domainId, title: "m", description: "", status: "open", createdAt: iso(T0 + n), updatedAt: iso(T0 + n) });
    return m;
  }

  function task(domainId: string, missionId: string, over: Partial<TaskRow> = {}): TaskRow {
    return {
      id: id("tsk"),
      domainId,
      missionId,
      kind: "claimable",
      title: "t",
      description: "",
      status: "queued",
      claimPolicy: "first_claim",
      priority: 0,
      capabilities: [],
      assigneeAgentId: "",
      attempts: 0,
      maxAttempts: 3,
      runtime: "",
      input: null,
      result: null,
      claimedBy: "",
      leaseExpiresMs: null,
      parentTaskId: "",
      createdAt: iso(T0),
      updatedAt: iso(T0),
      ...over,
    };
  }

  async function setup(): Promise<{ d: string; m: string; add: (over?: Partial<TaskRow>) => Promise<TaskRow> }> {
    const d = await domain();
    const m = await mission(d);
    return {
      d,
      m,
      add: async (over = {}) => {
        const t = task(d, m, over);
        await store.insertTask(t);
        return t;
      },
    };
  }

  const claimant = (domainId: string, over: Partial<Claimant> = {}): Claimant => ({ agentId: "agt_1", domainId, runtime: "shell", capabilities: [], ...over });

  test("reports its dialect", () => {
    expect(store.dialect).toBe(dialect);
  });

  describe("domains and missions", () => {
    test("domains round-trip and list oldest first", async () => {
      await store.insertDomain({ id: "dom_b", name: "beta", createdAt: iso(T0 + 2) });
      await store.insertDomain({ id: "dom_a", name: "alpha", createdAt: iso(T0 + 1) });
      expect(await store.getDomain("dom_a")).toEqual({ id: "dom_a", name: "alpha", createdAt: iso(T0 + 1) });
      expect(await store.getDomainByName("beta")).toEqual({ id: "dom_b", name: "beta", createdAt: iso(T0 + 2) });
      expect(await store.getDomain("dom_missing")).toBeUndefined();
      expect(await store.getDomainByName("missing")).toBeUndefined();
      expect((await store.listDomains()).map((d) => d.id)).toEqual(["dom_a", "dom_b"]);
    });

    test("a duplicate domain id or name is already_exists", async () => {
      await store.insertDomain({ id: "dom_a", name: "alpha", createdAt: iso(T0) });
      await expect(store.insertDomain({ id: "dom_a", name: "other", createdAt: iso(T0) })).rejects.toSatisfy(expectEpError("already_exists"));
      await expect(store.insertDomain({ id: "dom_b", name: "alpha", createdAt: iso(T0) })).rejects.toSatisfy(expectEpError("already_exists"));
    });

    test("missions round-trip, list per domain and update", async () => {
      const d1 = await domain();
      const d2 = await domain();
      const row = { id: "msn_1", domainId: d1, title: "Ship", description: "the thing", status: "open", createdAt: iso(T0), updatedAt: iso(T0) };
      await store.insertMission(row);
      await store.insertMission({ ...row, id: "msn_2", domainId: d2, createdAt: iso(T0 + 1) });
      await store.insertMission({ ...row, id: "msn_0", createdAt: iso(T0 + 2) });
      expect(await store.getMission("msn_1")).toEqual(row);
      expect(await store.getMission("msn_x")).toBeUndefined();
      expect((await store.listMissions(d1)).map((m) => m.id)).toEqual(["msn_1", "msn_0"]);
      expect((await store.listMissions()).map((m) => m.id)).toEqual(["msn_1", "msn_2", "msn_0"]);
      const updated = await store.updateMission("msn_1", { status: "closed", title: "Shipped", updatedAt: iso(T0 + 9) });
      expect(updated).toEqual({ ...row, status: "closed", title: "Shipped", updatedAt: iso(T0 + 9) });
      expect(await store.updateMission("msn_1", {})).toEqual(updated);
      expect(await store.updateMission("msn_x", { status: "closed" })).toBeUndefined();
    });

    test("a mission in a missing domain is not_found", async () => {
      await expect(
        store.insertMission({ id: "msn_1", domainId: "dom_missing", title: "x", description: "", status: "open", createdAt: iso(T0), updatedAt: iso(T0) }),
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
      await store.insertTask(row);
      expect(await store.getTask(row.id)).toEqual(row);
      expect(await store.getTask("tsk_missing")).toBeUndefined();
      await expect(store.insertTask(row)).rejects.toSatisfy(expectEpError("already_exists"));
      await expect(store.insertTask({ ...row, id: "tsk_orphan", missionId: "msn_missing" })).rejects.toSatisfy(expectEpError("not_found"));
    });

    test("listTasks filters and keeps insertion order", async () => {
      const { d, m, add } = await setup();
      const m2 = await mission(d);
      const a = await add({ kind: "assigned", status: "todo" });
      const b = await add({ status: "queued" });
      const c = await add({ status: "succeeded", parentTaskId: b.id });
      const other = task(d, m2);
      await store.insertTask(other);
      const ids = (rows: TaskRow[]) => rows.map((t) => t.id);
      expect(ids(await store.listTasks({ missionId: m }))).toEqual([a.id, b.id, c.id]);
      expect(ids(await store.listTasks({ domainId: d }))).toEqual([a.id, b.id, c.id, other.id]);
      expect(ids(await store.listTasks({ kind: "assigned" }))).toEqual([a.id]);
      expect(ids(await store.listTasks({ missionId: m, status: "queued" }))).toEqual([b.id]);
      expect(ids(await store.listTasks({ parentTaskId: b.id }))).toEqual([c.id]);
      expect(ids(await store.listTasks({ domainId: d, limit: 2 }))).toEqual([a.id, b.id]);
      expect(ids(await store.listTasks({ missionId: m, status: "" }))).toEqual([a.id, b.id, c.id]);
      expect(await store.listTasks({ missionId: "msn_missing" })).toEqual([]);
    });

    test("deleteTask says whether it deleted", async () => {
      const { add } = await setup();
      const t = await add();
      expect(await store.deleteTask(t.id)).toBe(true);
      expect(await store.deleteTask(t.id)).toBe(false);
      expect(await store.getTask(t.id)).toBeUndefined();
    });

    test("updateTask applies a patch, including JSON fields and clearing the lease", async () => {
      const { add } = await setup();
      const t = await add({ leaseExpiresMs: T0 + 5, claimedBy: "agt_1", status: "claimed" });
      const u = await store.updateTask(t.id, {
        status: "succeeded",
        result: { output: "ok", error: "" },
        capabilities: ["x"],
        input: { a: 1 },
        leaseExpiresMs: null,
        updatedAt: iso(T0 + 7),
      });
      expect(u).toEqual({ ...t, status: "succeeded", result: { output: "ok", error: "" }, capabilities: ["x"], input: { a: 1 }, leaseExpiresMs: null, updatedAt: iso(T0 + 7) });
      expect(await store.getTask(t.id)).toEqual(u);
      expect(await store.updateTask(t.id, {})).toEqual(u);
      expect(await store.updateTask(t.id, { result: null, input: null })).toEqual({ ...u, result: null, input: null });
      expect(await store.updateTask("tsk_missing", { status: "queued" })).toBeUndefined();
    });

    test("updateTask with an expectation is compare-and-set", async () => {
      const { add } = await setup();
      const t = await add({ status: "claimed", claimedBy: "agt_1" });
      expect(await store.updateTask(t.id, { status: "running" }, { status: ["queued"] })).toBeUndefined();
      expect(await store.updateTask(t.id, { status: "running" }, { status: ["claimed"], claimedBy: "agt_2" })).toBeUndefined();
      expect((await store.getTask(t.id))?.status).toBe("claimed");
      expect((await store.updateTask(t.id, { status: "running" }, { status: ["claimed", "running"], claimedBy: "agt_1" }))?.status).toBe("running");
      expect((await store.updateTask(t.id, { claimedBy: "" }, { claimedBy: "agt_1" }))?.claimedBy).toBe("");
      expect(await store.updateTask(t.id, { status: "queued" }, { status: [] })).toBeUndefined();
      // the claim it is about: a newer claim (more attempts) is not touched
      expect(await store.updateTask(t.id, { status: "queued" }, { attempts: t.attempts + 1 })).toBeUndefined();
      expect((await store.updateTask(t.id, { priority: 3 }, { attempts: t.attempts }))?.priority).toBe(3);
      // a live lease: none at all, or one running past the given time
      expect((await store.updateTask(t.id, { priority: 4 }, { leaseAfterMs: T0 }))?.priority).toBe(4);
      await store.updateTask(t.id, { leaseExpiresMs: T0 + 10 });
      expect(await store.updateTask(t.id, { priority: 5 }, { leaseAfterMs: T0 + 10 })).toBeUndefined();
      expect((await store.updateTask(t.id, { priority: 5 }, { leaseAfterMs: T0 + 9 }))?.priority).toBe(5);
      // Concurrent compare-and-set: exactly one of many identical transitions wins.
      const wins = await Promise.all(Array.from({ length: 20 }, (_, i) => store.updateTask(t.id, { status: "succeeded", claimedBy: `agt_${i}` }, { status: ["running"] })));
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
        const c = await store.claimTask(claimant(d), T0 + 1000, 30_000);
        order.push(c!.id);
      }
      expect(order).toEqual([highOld.id, highNew.id, mid.id, low.id]);
      expect(await store.claimTask(claimant(d), T0 + 1000, 30_000)).toBeUndefined();
      const claimed = await store.getTask(highOld.id);
      expect(claimed).toEqual({ ...highOld, status: "claimed", claimedBy: "agt_1", attempts: 1, leaseExpiresMs: T0 + 31_000, updatedAt: iso(T0 + 1000) });
    });

    test("the task's capabilities must be a subset of the agent's", async () => {
      const { d, add } = await setup();
      const needsTwo = await add({ capabilities: ["gpu", "linux"] });
      const needsNone = await add({ capabilities: [] });
      const c = claimant(d, { capabilities: ["gpu"] });
      expect((await store.claimTask(c, T0, 1000))?.id).toBe(needsNone.id);
      expect(await store.claimTask(c, T0, 1000)).toBeUndefined();
      expect(await store.claimTask(claimant(d, { capabilities: [] }), T0, 1000)).toBeUndefined();
      expect((await store.claimTask(claimant(d, { capabilities: ["linux", "arm", "gpu"] }), T0, 1000))?.id).toBe(needsTwo.id);
    });

    test("a runtime-bound task goes only to an agent of that runtime", async () => {
      const { d, add } = await setup();
      const bound = await add({ runtime: "vendorB", priority: 9 });
      const any = await add({ runtime: "" });
      expect((await store.claimTask(claimant(d, { runtime: "shell" }), T0, 1000))?.id).toBe(any.id);
      expect(await store.claimTask(claimant(d, { runtime: "shell" }), T0, 1000)).toBeUndefined();
      expect((await store.claimTask(claimant(d, { runtime: "vendorB" }), T0, 1000))?.id).toBe(bound.id);
    });

    test("an assigned-policy task goes only to its assignee", async () => {
      const { d, add } = await setup();
      const mine = await add({ claimPolicy: "assigned", assigneeAgentId: "agt_2", capabilities: ["ignored"] });
      expect(await store.claimTask(claimant(d, { agentId: "agt_1" }), T0, 1000)).toBeUndefined();
      expect((await store.claimTask(claimant(d, { agentId: "agt_2" }), T0, 1000))?.id).toBe(mine.id);
    });

    test("broadcast parents, Kanban tasks, other domains and non-queued tasks are never claimable", async () => {
      const { d, add } = await setup();
      await add({ claimPolicy: "broadcast", priority: 10 });
      await add({ kind: "assigned", claimPolicy: "", status: "queued" });
      await add({ status: "failed" });
      await add({ status: "claimed", claimedBy: "agt_x" });
      const other = await setup();
      await other.add();
      expect(await store.claimTask(claimant(d), T0, 1000)).toBeUndefined();
      expect(await store.claimTask(claimant(d, { agentId: "" }), T0, 1000)).toBeUndefined();
      expect((await store.claimTask(claimant(other.d), T0, 1000))?.domainId).toBe(other.d);
    });

    test("a requeued task is claimed again and counts the attempt", async () => {
      const { d, add } = await setup();
      const t = await add();
      await store.claimTask(claimant(d), T0, 1000);
      await store.updateTask(t.id, { status: "queued", claimedBy: "", leaseExpiresMs: null }, { status: ["claimed"] });
      const again = await store.claimTask(claimant(d, { agentId: "agt_2" }), T0 + 5, 1000);
      expect(again).toMatchObject({ id: t.id, attempts: 2, claimedBy: "agt_2", leaseExpiresMs: T0 + 1005 });
    });

    test("50 concurrent claimers on 500 tasks claim every task exactly once", async () => {
      const { d, m } = await setup();
      const ids = new Set<string>();
      await store.transaction(async (tx) => {
        for (let i = 0; i < 500; i++) {
          const t = task(d, m, { priority: i % 3 });
          await tx.insertTask(t);
          ids.add(t.id);
        }
      });
      // PostgreSQL: a second store with its own pool of real connections races the first.
      const stores = [store, await fx.openAnother({ max: 10 })];
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
            expect(await s.updateTask(t.id, { status: "succeeded" }, { status: ["claimed"], claimedBy: agentId })).toBeDefined();
          }
        }),
      );
      expect(claims.size).toBe(500);
      expect(new Set(claims.keys())).toEqual(ids);
      const done = await store.listTasks({ domainId: d });
      expect(done.every((t) => t.status === "succeeded" && t.attempts === 1 && t.claimedBy === claims.get(t.id))).toBe(true);
    });

    test("listExpiredLeases lists held tasks whose lease is due, soonest first", async () => {
      const { add } = await setup();
      const late = await add({ status: "running", claimedBy: "a", leaseExpiresMs: T0 + 200 });
      const early = await add({ status: "claimed", claimedBy: "a", leaseExpiresMs: T0 + 100 });
      await add({ status: "claimed", claimedBy: "a", leaseExpiresMs: T0 + 301 });
      await add({ status: "succeeded", claimedBy: "a", leaseExpiresMs: T0 });
      await add({ status: "queued", leaseExpiresMs: null });
      expect((await store.listExpiredLeases(T0 + 300, 10)).map((t) => t.id)).toEqual([early.id, late.id]);
      expect((await store.listExpiredLeases(T0 + 300, 1)).map((t) => t.id)).toEqual([early.id]);
      expect((await store.listExpiredLeases(T0 + 100, 10)).map((t) => t.id)).toEqual([early.id]);
      expect(await store.listExpiredLeases(T0 + 99, 10)).toEqual([]);
    });
  });

  describe("nodes and agents", () => {
    test("nodes round-trip, list and update", async () => {
      const node = { id: "nod_1", hostname: "h1", status: "online", lastSeenAt: "", createdAt: iso(T0), domains: ["*"] };
      await store.insertNode(node);
      await store.insertNode({ ...node, id: "nod_0", createdAt: iso(T0 + 1) });
      expect(await store.getNode("nod_1")).toEqual(node);
      expect(await store.getNode("nod_x")).toBeUndefined();
      expect((await store.listNodes()).map((x) => x.id)).toEqual(["nod_1", "nod_0"]);
      expect(await store.updateNode("nod_1", { status: "offline", lastSeenAt: iso(T0 + 5) })).toEqual({ ...node, status: "offline", lastSeenAt: iso(T0 + 5) });
      expect(await store.updateNode("nod_x", { status: "offline" })).toBeUndefined();
      // the domains a node serves: "*" or a list, both ways
      expect((await store.updateNode("nod_1", { domains: ["dom_a", "dom_b"] }))!.domains).toEqual(["dom_a", "dom_b"]);
      expect((await store.getNode("nod_1"))!.domains).toEqual(["dom_a", "dom_b"]);
      expect((await store.updateNode("nod_1", { domains: ["*"] }))!.domains).toEqual(["*"]);
      await expect(store.insertNode(node)).rejects.toSatisfy(expectEpError("already_exists"));
    });

    test("agents round-trip, filter by domain and node, and update", async () => {
      const d1 = await domain();
      const d2 = await domain();
      const agent: AgentRow = {
        id: "agt_1",
        domainId: d1,
        nodeId: "nod_1",
        name: "a",
        runtime: "shell",
        capabilities: ["gpu"],
        state: "idle",
        lastSeenAt: "",
        createdAt: iso(T0),
        supervised: true,
      };
      await store.insertAgent(agent);
      await store.insertAgent({ ...agent, id: "agt_2", nodeId: "nod_2", createdAt: iso(T0 + 1) });
      await store.insertAgent({ ...agent, id: "agt_3", domainId: d2, createdAt: iso(T0 + 2) });
      expect(await store.getAgent("agt_1")).toEqual(agent);
      expect(await store.getAgent("agt_x")).toBeUndefined();
      expect((await store.listAgents({})).map((a) => a.id)).toEqual(["agt_1", "agt_2", "agt_3"]);
      expect((await store.listAgents({ domainId: d1 })).map((a) => a.id)).toEqual(["agt_1", "agt_2"]);
      expect((await store.listAgents({ nodeId: "nod_1" })).map((a) => a.id)).toEqual(["agt_1", "agt_3"]);
      expect((await store.listAgents({ domainId: d1, nodeId: "nod_1" })).map((a) => a.id)).toEqual(["agt_1"]);
      const u = await store.updateAgent("agt_1", { state: "busy", capabilities: ["gpu", "arm"], runtime: "vendorB", name: "b", lastSeenAt: iso(T0 + 3) });
      expect(u).toEqual({ ...agent, state: "busy", capabilities: ["gpu", "arm"], runtime: "vendorB", name: "b", lastSeenAt: iso(T0 + 3) });
      expect(await store.updateAgent("agt_x", { state: "busy" })).toBeUndefined();
      expect((await store.updateAgent("agt_1", { supervised: false }))!.supervised).toBe(false);
      expect((await store.getAgent("agt_2"))!.supervised).toBe(true);
      await expect(store.insertAgent({ ...agent, id: "agt_9", domainId: "dom_missing" })).rejects.toSatisfy(expectEpError("not_found"));
    });
  });

  describe("node state reports", () => {
    test("the latest report per node replaces the previous one, lists by node id, and needs the node", async () => {
      await store.insertNode({ id: "nod_b", hostname: "hb", status: "online", lastSeenAt: "", createdAt: iso(T0), domains: ["dom_a", "dom_b"] });
      await store.insertNode({ id: "nod_a", hostname: "ha", status: "online", lastSeenAt: "", createdAt: iso(T0), domains: ["dom_a", "dom_b"] });
      expect(await store.listNodeStates()).toEqual([]);
      const first = {
        nodeId: "nod_b",
        cronJobs: [{ name: "standup", schedule: "0 9 * * 1-5", next_fire_at: iso(T0 + 60_000), last_fire: { status: "ok" } }],
        supervised: [],
        configErrors: [],
        reportedAt: iso(T0),
      };
      await store.putNodeState(first);
      const second = { ...first, cronJobs: [], supervised: [{ profile: "pm", restarts: 2, paused: true }], configErrors: [{ file: "cron.toml", line: 3, message: "bad" }], reportedAt: iso(T0 + 5) };
      await store.putNodeState(second);
      await store.putNodeState({ ...first, nodeId: "nod_a" });
      expect(await store.listNodeStates()).toEqual([{ ...first, nodeId: "nod_a" }, second]);
      expect(await store.listNodeStates("nod_b")).toEqual([second]);
      expect(await store.listNodeStates("nod_x")).toEqual([]);
      await expect(store.putNodeState({ ...first, nodeId: "nod_missing" })).rejects.toSatisfy(expectEpError("not_found"));
      // inside a transaction too (the tower writes it in one)
      await store.transaction(async (tx) => tx.putNodeState({ ...second, reportedAt: iso(T0 + 9) }));
      expect((await store.listNodeStates("nod_b"))[0]?.reportedAt).toBe(iso(T0 + 9));
    });
  });

  describe("auth material", () => {
    test("tokens round-trip, are found by hash, and are revoked or touched", async () => {
      const tok = { id: "tok_1", name: "ci", role: "operator", domainId: "", hash: "h1", expiresAt: "", createdAt: iso(T0), revokedAt: "", lastUsedAt: "" };
      await store.insertToken(tok);
      await store.insertToken({ ...tok, id: "tok_0", hash: "h0", createdAt: iso(T0 + 1) });
      expect(await store.getToken("tok_1")).toEqual(tok);
      expect(await store.getTokenByHash("h0")).toMatchObject({ id: "tok_0" });
      expect(await store.getTokenByHash("nope")).toBeUndefined();
      expect((await store.listTokens()).map((t) => t.id)).toEqual(["tok_1", "tok_0"]);
      expect(await store.updateToken("tok_1", { lastUsedAt: iso(T0 + 5) })).toEqual({ ...tok, lastUsedAt: iso(T0 + 5) });
      expect(await store.updateToken("tok_1", { revokedAt: iso(T0 + 6) })).toEqual({ ...tok, lastUsedAt: iso(T0 + 5), revokedAt: iso(T0 + 6) });
      expect(await store.updateToken("tok_x", { revokedAt: iso(T0) })).toBeUndefined();
      await expect(store.insertToken({ ...tok, id: "tok_2" })).rejects.toSatisfy(expectEpError("already_exists"));
    });

    test("signing keys are listed oldest first and retired", async () => {
      const key = { kid: "k1", alg: "EdDSA", privateJwk: '{"d":"x"}', publicJwk: '{"x":"y"}', createdAt: iso(T0), retiredAt: "" };
      await store.insertSigningKey(key);
      await store.insertSigningKey({ ...key, kid: "k0", createdAt: iso(T0 + 1) });
      await store.retireSigningKey("k1", iso(T0 + 2));
      await store.retireSigningKey("k_missing", iso(T0 + 2));
      expect(await store.listSigningKeys()).toEqual([
        { ...key, retiredAt: iso(T0 + 2) },
        { ...key, kid: "k0", createdAt: iso(T0 + 1) },
      ]);
    });

    test("a ticket is consumed once, and never after it expires", async () => {
      const ticket = { hash: "t1", purpose: "console", subject: "tok_1", role: "admin", agentId: "", expiresMs: T0 + 60_000, scope: '{"via":"token","tokenId":"tok_1"}' };
      await store.insertTicket(ticket);
      await store.insertTicket({ ...ticket, hash: "t2" });
      // found without being consumed (console sessions), until it is consumed or expires
      expect(await store.findTicket("t1", T0)).toEqual(ticket);
      expect(await store.findTicket("t1", T0 + 60_000)).toBeUndefined();
      expect(await store.consumeTicket("t1", T0)).toEqual(ticket);
      expect(await store.findTicket("t1", T0)).toBeUndefined();
      expect(await store.consumeTicket("t1", T0)).toBeUndefined();
      expect(await store.consumeTicket("t2", T0 + 60_000)).toBeUndefined();
      expect(await store.consumeTicket("missing", T0)).toBeUndefined();
      await expect(store.insertTicket(ticket)).rejects.toSatisfy(expectEpError("already_exists"));
    });

    test("concurrent consumers of one ticket: exactly one gets it", async () => {
      await store.insertTicket({ hash: "t1", purpose: "attach", subject: "s", role: "operator", agentId: "agt_1", expiresMs: T0 + 60_000, scope: "{}" });
      const other = await fx.openAnother({ max: 5 });
      const got = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? other : store).consumeTicket("t1", T0)));
      expect(got.filter(Boolean)).toHaveLength(1);
    });
  });

  describe("events", () => {
    const ev = (over: Partial<NewEvent> = {}): NewEvent => ({ type: "progress", name: "task.progress", ...over });

    test("appended events get strictly increasing ids and read back identically", async () => {
      expect(await store.lastEventId()).toBe(0);
      const first = await store.appendEvents([ev({ taskId: "tsk_1", payload: { line: "a" } }), ev({ type: "inbox", name: "x", agentId: "agt_1" })], iso(T0));
      const second = await store.appendEvents([ev({ status: "running", sessionId: "ses_1", domainId: "dom_1", missionId: "msn_1" })], iso(T0 + 1));
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
      expect(await store.listEvents({})).toEqual([...first, ...second]);
      expect(await store.lastEventId()).toBe(ids[2]);
      expect(await store.appendEvents([], iso(T0))).toEqual([]);
    });

    test("concurrent appends never share or reorder ids", async () => {
      const other = await fx.openAnother({ max: 5 });
      const batches = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 ? other : store).appendEvents([ev({ taskId: `t${i}` }), ev({ taskId: `t${i}` })], iso(T0))),
      );
      for (const b of batches) expect(b[1].id).toBeGreaterThan(b[0].id);
      const all = batches.flat().map((e) => e.id);
      expect(new Set(all).size).toBe(40);
      const listed = await store.listEvents({ limit: 100 });
      expect(listed.map((e) => e.id)).toEqual([...all].sort((a, b) => a - b));
    });

    test("listEvents filters by type, domain, mission, agent, session, afterId and limit", async () => {
      const rows = await store.appendEvents(
        [
          ev({ type: "approval", name: "a", domainId: "d1", missionId: "m1" }),
          ev({ type: "inbox", name: "b", domainId: "d1", agentId: "agt_1" }),
          ev({ type: "matrix", name: "c", domainId: "d2", sessionId: "ses_1" }),
          ev({ type: "progress", name: "d", domainId: "d1", missionId: "m1", agentId: "agt_1", sessionId: "ses_1" }),
        ],
        iso(T0),
      );
      const names = async (q: Parameters<Store["listEvents"]>[0]) => (await store.listEvents(q)).map((e) => e.name);
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
      await store.appendEvents(
        [
          ev({ type: "matrix", name: "task.created", taskId: "tsk_1" }),
          ev({ type: "progress", name: "p1", taskId: "tsk_1" }),
          ev({ type: "progress", name: "other", taskId: "tsk_2" }),
          ev({ type: "progress", name: "p2", taskId: "tsk_1" }),
          ev({ type: "matrix", name: "task.succeeded", taskId: "tsk_1" }),
        ],
        iso(T0),
      );
      const names = async (q: Parameters<Store["listEvents"]>[0]) => (await store.listEvents(q)).map((e) => e.name);
      expect(await names({ taskId: "tsk_1", types: ["progress"] })).toEqual(["p1", "p2"]);
      expect(await names({ taskId: "tsk_1" })).toEqual(["task.created", "p1", "p2", "task.succeeded"]);
      expect(await names({ taskId: "tsk_1", types: ["matrix"] })).toEqual(["task.created", "task.succeeded"]);
      expect(await names({ taskId: "tsk_2", types: ["progress"], limit: 5 })).toEqual(["other"]);
    });

    test("pruneEvents deletes below an id and never lets ids restart", async () => {
      const rows = await store.appendEvents([ev(), ev(), ev(), ev()], iso(T0));
      expect(await store.pruneEvents(rows[2].id)).toBe(2);
      expect((await store.listEvents({})).map((e) => e.id)).toEqual([rows[2].id, rows[3].id]);
      expect(await store.pruneEvents(rows[3].id + 100)).toBe(1);
      expect((await store.listEvents({})).map((e) => e.id)).toEqual([rows[3].id]);
      const [next] = await store.appendEvents([ev()], iso(T0));
      expect(next.id).toBeGreaterThan(rows[3].id);
      expect(await store.lastEventId()).toBe(next.id);
    });
  });

  test("meta values are set, read and overwritten", async () => {
    expect(await store.getMeta("k")).toBeUndefined();
    await store.setMeta("k", "v1");
    expect(await store.getMeta("k")).toBe("v1");
    await store.setMeta("k", "v2");
    expect(await store.getMeta("k")).toBe("v2");
  });

  describe("transactions", () => {
    test("a failed transaction leaves nothing behind", async () => {
      const d = await domain();
      const before = await store.lastEventId();
      const boom = new Error("boom");
      await expect(
        store.transaction(async (tx) => {
          await tx.insertMission({ id: "msn_tx", domainId: d, title: "x", description: "", status: "open", createdAt: iso(T0), updatedAt: iso(T0) });
          await tx.insertTask(task(d, "msn_tx", { id: "tsk_tx" }));
          await tx.appendEvents([{ type: "inbox", name: "x" }], iso(T0));
          await tx.setMeta("tx", "1");
          await tx.updateMission("msn_tx", { status: "closed" });
          expect((await tx.getTask("tsk_tx"))?.id).toBe("tsk_tx");
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await store.getMission("msn_tx")).toBeUndefined();
      expect(await store.getTask("tsk_tx")).toBeUndefined();
      expect(await store.getMeta("tx")).toBeUndefined();
      expect(await store.lastEventId()).toBe(before);
      expect(await store.listEvents({ afterId: before })).toEqual([]);
    });

    test("a committed transaction keeps everything and returns fn's value; nested calls join it", async () => {
      const d = await domain();
      const out = await store.transaction(async (tx) => {
        await tx.insertMission({ id: "msn_tx", domainId: d, title: "x", description: "", status: "open", createdAt: iso(T0), updatedAt: iso(T0) });
        await tx.transaction(async (inner) => inner.setMeta("tx", "1"));
        return "ok";
      });
      expect(out).toBe("ok");
      expect((await store.getMission("msn_tx"))?.id).toBe("msn_tx");
      expect(await store.getMeta("tx")).toBe("1");
    });

    test("transactions started in the same turn commit or roll back each on its own", async () => {
      const boom = new Error("boom");
      const results = await Promise.allSettled([
        store.setMeta("plain", "1"),
        store.transaction(async (tx) => {
          await tx.setMeta("ok1", "1");
          return "one";
        }),
        store.transaction(async (tx) => {
          await tx.setMeta("bad", "1");
          throw boom;
        }),
        store.transaction(async (tx) => {
          await tx.setMeta("ok2", "1");
          return "two";
        }),
      ]);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
      expect((results[2] as PromiseRejectedResult).reason).toBe(boom);
      expect([await store.getMeta("plain"), await store.getMeta("ok1"), await store.getMeta("bad"), await store.getMeta("ok2")]).toEqual(["1", "1", undefined, "1"]);
    });

    test("a statement error fails only its own transaction among those started together; final events keep their order", async () => {
      const d = await domain();
      const mission = (id: string) => ({ id, domainId: d, title: "x", description: "", status: "open", createdAt: iso(T0), updatedAt: iso(T0) });
      await store.insertMission(mission("msn_dup"));
      const before = await store.lastEventId();
      const final = (tx: Store, name: string) => (tx.appendFinalEvents ?? tx.appendEvents).call(tx, [{ type: "matrix", name }], iso(T0));
      const results = await Promise.allSettled([
        store.transaction(async (tx) => tx.insertMission(mission("msn_dup"))),
        store.transaction(async (tx) => {
          await tx.setMeta("b2", "1");
          return final(tx, "e2");
        }),
        store.transaction(async (tx) => {
          await tx.setMeta("b3", "1");
          await tx.insertMission(mission("msn_dup"));
        }),
        store.transaction(async (tx) => {
          await tx.setMeta("b4", "1");
          return final(tx, "e4");
        }),
      ]);
      expect(results.map((r) => r.status)).toEqual(["rejected", "fulfilled", "rejected", "fulfilled"]);
      expect((results[0] as PromiseRejectedResult).reason).toSatisfy(expectEpError("already_exists"));
      expect((results[2] as PromiseRejectedResult).reason).toSatisfy(expectEpError("already_exists"));
      expect([await store.getMeta("b2"), await store.getMeta("b3"), await store.getMeta("b4")]).toEqual(["1", undefined, "1"]);
      const [e2] = (results[1] as PromiseFulfilledResult<EventRow[]>).value;
      const [e4] = (results[3] as PromiseFulfilledResult<EventRow[]>).value;
      expect(e2.id).toBeLessThan(e4.id);
      expect((await store.listEvents({ afterId: before })).map((e) => [e.id, e.name])).toEqual([
        [e2.id, "e2"],
        [e4.id, "e4"],
      ]);
    });

    test("work outside a transaction waits for it or sees its result whole", async () => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const tx = store.transaction(async (t) => {
        await t.setMeta("a", "1");
        await gate;
        await t.setMeta("b", "1");
      });
      await new Promise((r) => setTimeout(r, 20));
      if (store.dialect === "postgres") {
        // PostgreSQL isolates: a read outside does not wait and sees nothing of the open transaction
        expect(await Promise.all([store.getMeta("a"), store.getMeta("b")])).toEqual([undefined, undefined]);
        release();
        await tx;
      } else {
        // SQLite serializes: the read waits for the transaction and sees all of it
        const read = Promise.all([store.getMeta("a"), store.getMeta("b")]);
        release();
        await tx;
        expect(await read).toEqual(["1", "1"]);
      }
      expect(await Promise.all([store.getMeta("a"), store.getMeta("b")])).toEqual(["1", "1"]);
    });
  });

  describe("AI sessions, actions, docs and artifacts", () => {
    test("sessions and turns round-trip; sessions list newest first per owner", async () => {
      const session = { id: "ses_1", owner: "tok_a", title: "t", status: "active", createdAt: iso(T0), updatedAt: iso(T0) };
      await store.insertAiSession(session);
      await store.insertAiSession({ ...session, id: "ses_2", createdAt: iso(T0 + 1) });
      await store.insertAiSession({ ...session, id: "ses_3", owner: "tok_b" });
      expect(await store.getAiSession("ses_1")).toEqual(session);
      expect(await store.getAiSession("ses_x")).toBeUndefined();
      expect((await store.listAiSessions("tok_a")).map((x) => x.id)).toEqual(["ses_2", "ses_1"]);
      expect(await store.updateAiSession("ses_1", { status: "closed", updatedAt: iso(T0 + 5) })).toEqual({ ...session, status: "closed", updatedAt: iso(T0 + 5) });
      expect(await store.updateAiSession("ses_x", { status: "closed" })).toBeUndefined();
      await expect(store.insertAiSession(session)).rejects.toSatisfy(expectEpError("already_exists"));
      const turn = { id: "trn_1", sessionId: "ses_1", seq: 1, role: "user" as const, content: "hi", toolCalls: [{ name: "x" }], viewSpecs: [], error: "", createdAt: iso(T0) };
      await store.insertAiTurn({ ...turn, id: "trn_2", seq: 2, role: "assistant" });
      await store.insertAiTurn(turn);
      expect(await store.listAiTurns("ses_1")).toEqual([turn, { ...turn, id: "trn_2", seq: 2, role: "assistant" }]);
    });

    test("a pending action is decided once and its outcome recorded once", async () => {
      await store.insertAiSession({ id: "ses_1", owner: "tok_a", title: "", status: "active", createdAt: iso(T0), updatedAt: iso(T0) });
      const action = {
        id: "act_1",
        sessionId: "ses_1",
        turnId: "trn_1",
        tool: "submit_mesh_task",
        arguments: { title: "x" },
        summary: "submit",
        status: "pending" as const,
        result: null,
        error: "",
        decidedBy: "",
        decidedAt: "",
        executedAt: "",
        createdAt: iso(T0),
      };
      await store.insertAiAction(action);
      await store.insertAiAction({ ...action, id: "act_2", createdAt: iso(T0 + 1) });
      expect(await store.getAiAction("act_1")).toEqual(action);
      expect((await store.listAiActions({ owner: "tok_a", status: "pending" })).map((a) => a.id)).toEqual(["act_1", "act_2"]);
      expect(await store.listAiActions({ owner: "tok_b" })).toEqual([]);
      const decisions = await Promise.all(
        (["approved", "rejected", "approved"] as const).map((status, i) => store.decideAiAction("act_1", { status, decidedBy: `u${i}`, decidedAt: iso(T0 + 2) })),
      );
      expect(decisions.filter(Boolean)).toHaveLength(1);
      const decided = decisions.find(Boolean)!;
      if (decided.status === "approved") {
        expect(await store.recordAiActionOutcome("act_1", { result: { ok: true }, error: "", executedAt: iso(T0 + 3) })).toMatchObject({ result: { ok: true } });
      }
      expect(await store.recordAiActionOutcome("act_1", { result: { ok: false }, error: "", executedAt: iso(T0 + 4) })).toBeUndefined();
      expect((await store.listAiActions({ sessionId: "ses_1", status: "pending" })).map((a) => a.id)).toEqual(["act_2"]);
      // approved with no outcome, decided before a time: what the interrupted-action sweep takes
      expect(await store.listAiActions({ unexecutedBefore: iso(T0 + 10) })).toEqual([]); // act_1 has its outcome (or was rejected)
      await store.decideAiAction("act_2", { status: "approved", decidedBy: "u", decidedAt: iso(T0 + 5) });
      expect((await store.listAiActions({ unexecutedBefore: iso(T0 + 10) })).map((a) => a.id)).toEqual(["act_2"]);
      expect(await store.listAiActions({ unexecutedBefore: iso(T0 + 5) })).toEqual([]);
    });

    test("docs and artifacts are upserted with a version and listed by name", async () => {
      const { d, m, add } = await setup();
      const t = await add();
      const doc = { id: "doc_1", domainId: d, missionId: m, name: "plan.md", content: "v1", contentType: "text/markdown", version: 1, createdAt: iso(T0), updatedAt: iso(T0) };
      expect(await store.putDoc(doc)).toEqual(doc);
      expect(await store.putDoc({ ...doc, id: "doc_ignored", content: "v2", updatedAt: iso(T0 + 1) })).toEqual({ ...doc, content: "v2", version: 2, updatedAt: iso(T0 + 1) });
      await store.putDoc({ ...doc, id: "doc_2", name: "a.md" });
      expect((await store.listDocs(m)).map((x) => x.name)).toEqual(["a.md", "plan.md"]);
      expect((await store.getDoc(m, "plan.md"))?.content).toBe("v2");
      expect(await store.getDoc(m, "none.md")).toBeUndefined();
      const art = { ...doc, id: "art_1", taskId: t.id, name: "out.txt", contentType: "text/plain" };
      expect(await store.putArtifact(art)).toEqual(art);
      expect((await store.putArtifact({ ...art, id: "art_x", content: "v2" })).version).toBe(2);
      expect((await store.listArtifacts(t.id)).map((x) => [x.id, x.version])).toEqual([["art_1", 2]]);
    });
  });

  describe("secrets", () => {
    const secret = { name: "GH_TOKEN", domainId: "", ciphertext: "c1", iv: "i1", tag: "t1", keyId: "k1", version: 1, createdAt: iso(T0), updatedAt: iso(T0) };

    test("secrets are upserted with a version, listed by name and deleted with their grants", async () => {
      expect(await store.putSecret(secret)).toEqual(secret);
      expect(await store.putSecret({ ...secret, ciphertext: "c2", updatedAt: iso(T0 + 1), createdAt: iso(T0 + 1) })).toEqual({
        ...secret,
        ciphertext: "c2",
        version: 2,
        updatedAt: iso(T0 + 1),
      });
      await store.putSecret({ ...secret, name: "AWS_KEY" });
      expect((await store.listSecrets()).map((x) => x.name)).toEqual(["AWS_KEY", "GH_TOKEN"]);
      await store.insertSecretGrant({ secretName: "GH_TOKEN", agentId: "agt_1", domainId: "", createdAt: iso(T0) });
      await store.insertSecretGrant({ secretName: "GH_TOKEN", agentId: "agt_1", domainId: "", createdAt: iso(T0) });
      await store.insertSecretGrant({ secretName: "GH_TOKEN", agentId: "", domainId: "dom_1", createdAt: iso(T0) });
      await store.insertSecretGrant({ secretName: "AWS_KEY", agentId: "agt_2", domainId: "", createdAt: iso(T0) });
      expect((await store.listSecretGrants("GH_TOKEN")).map((g) => [g.agentId, g.domainId])).toEqual([
        ["", "dom_1"],
        ["agt_1", ""],
      ]);
      expect((await store.listSecretGrants()).map((g) => g.secretName)).toEqual(["AWS_KEY", "GH_TOKEN", "GH_TOKEN"]);
      expect(await store.deleteSecretGrant("GH_TOKEN", { agentId: "", domainId: "dom_1" })).toBe(true);
      expect(await store.deleteSecretGrant("GH_TOKEN", { agentId: "", domainId: "dom_1" })).toBe(false);
      expect(await store.deleteSecret("GH_TOKEN")).toBe(true);
      expect(await store.deleteSecret("GH_TOKEN")).toBe(false);
      expect(await store.getSecret("GH_TOKEN")).toBeUndefined();
      expect((await store.listSecretGrants()).map((g) => g.secretName)).toEqual(["AWS_KEY"]);
    });

    test("re-encryption applies only to the expected key and version", async () => {
      await store.putSecret(secret);
      const cipher = { ciphertext: "c9", iv: "i9", tag: "t9", keyId: "k2" };
      expect(await store.updateSecretCipher("GH_TOKEN", { keyId: "k1", version: 2 }, cipher)).toBe(false);
      expect(await store.updateSecretCipher("GH_TOKEN", { keyId: "k1", version: 1 }, cipher)).toBe(true);
      expect(await store.updateSecretCipher("GH_TOKEN", { keyId: "k1", version: 1 }, cipher)).toBe(false);
      expect(await store.getSecret("GH_TOKEN")).toEqual({ ...secret, ...cipher });
    });
  });

  describe("migrations", () => {
    test("migrate() is idempotent and keeps data", async () => {
      const d = await domain("keep");
      await store.migrate();
      await store.migrate();
      expect((await store.getDomain(d))?.name).toBe("keep");
      const again = await fx.openAnother();
      expect((await again.getDomainByName("keep"))?.id).toBe(d);
    });

    test("several instances migrating one fresh database at once all succeed", async () => {
      const fresh = await fixture();
      try {
        const more = await Promise.all([fresh.openAnother({ migrate: false }), fresh.openAnother({ migrate: false }), fresh.openAnother({ migrate: false })]);
        await Promise.all(more.map((s) => s.migrate()));
        await more[0].insertDomain({ id: "dom_1", name: "n", createdAt: iso(T0) });
        expect((await more[2].listDomains()).map((x) => x.id)).toEqual(["dom_1"]);
      } finally {
        await fresh.cleanup();
      }
    });
  });
});

describe.skipIf(skipPostgres)("PostgresStore LISTEN/NOTIFY", () => {
  const test = it;
  let fx: Fixture;
  let store: PostgresStore;

  beforeEach(async () => {
    fx = await postgresFixture();
    store = fx.store as PostgresStore;
  });

  afterEach(async () => {
    await fx.cleanup();
  });

  const channel = () => `ep_test_${randomBytes(4).toString("hex")}`;

  function collector() {
    const got: string[] = [];
    const waiters: (() => void)[] = [];
    return {
      got,
      push: (p: string) => {
        got.push(p);
        waiters.splice(0).forEach((w) => w());
      },
      async until(count: number, ms = 5000): Promise<void> {
        const deadline = Date.now() + ms;
        while (got.length < count) {
          if (Date.now() > deadline) throw new Error(`expected ${count} notifications, got ${JSON.stringify(got)}`);
          await new Promise<void>((r) => {
            waiters.push(r);
            setTimeout(r, 50);
          });
        }
      },
    };
  }

  test("a notify reaches listeners on another store (another replica)", async () => {
    const ch = channel();
    const replica = (await fx.openAnother()) as PostgresStore;
    const a = collector();
    const b = collector();
    await replica.listen(ch, a.push);
    const unsubscribe = await replica.listen(ch, b.push);
    await store.notify(ch, "hello");
    await a.until(1);
    await b.until(1);
    await unsubscribe();
    await store.notify(ch, "again");
    await a.until(2);
    expect(a.got).toEqual(["hello", "again"]);
    expect(b.got).toEqual(["hello"]);
  });

  test("a notify inside a transaction is delivered on commit only", async () => {
    const ch = channel();
    const c = collector();
    await store.listen(ch, c.push);
    await expect(
      store.transaction(async (tx) => {
        await (tx as PostgresStore).notify(ch, "rolled-back");
        throw new Error("no");
      }),
    ).rejects.toThrow("no");
    await store.transaction(async (tx) => (tx as PostgresStore).notify(ch, "committed"));
    await c.until(1);
    await store.notify(ch, "after");
    await c.until(2);
    expect(c.got).toEqual(["committed", "after"]);
  });

  test("the listener reconnects after its connection is killed and says so", async () => {
    const app = `ep-test-${randomBytes(4).toString("hex")}`;
    const replica = await PostgresStore.connect(PG_URL, { reconnectMs: 20, applicationName: app });
    try {
      const ch = channel();
      const c = collector();
      let reconnects = 0;
      await replica.listen(ch, c.push, { onReconnect: () => reconnects++ });
      const admin = pgAdmin();
      await admin.connect();
      const killed = await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [`${app}-listen`]);
      await admin.end();
      expect(killed.rowCount).toBeGreaterThan(0);
      const deadline = Date.now() + 5000;
      while (reconnects === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(reconnects).toBe(1);
      await store.notify(ch, "back");
      await c.until(1);
      expect(c.got).toEqual(["back"]);
    } finally {
      await replica.close();
    }
  });

  test("bad channels and oversized payloads are clear errors", async () => {
    await expect(store.listen("bad channel", () => {})).rejects.toSatisfy(expectEpError("invalid_argument"));
    await expect(store.notify("ok", "x".repeat(8000))).rejects.toSatisfy(expectEpError("invalid_argument"));
    await expect(PostgresStore.connect(PG_URL, { schema: "a-b" })).rejects.toSatisfy(expectEpError("invalid_argument"));
    await expect(PostgresStore.connect("postgres://127.0.0.1:1/none")).rejects.toSatisfy(expectEpError("unavailable"));
  });
});
