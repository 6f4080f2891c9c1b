// The store suite's shared setup: a fresh migrated database per test on each dialect (SQLite
// always; PostgreSQL at EP_TEST_PG_URL, skipped outside CI when unreachable, failing under CI),
// and the row builders the store-*.test.ts files use.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EpError } from "../common/errors.js";
import { PostgresStore, withDefaultUser } from "../tower/store/postgres/postgres-store.js";
import { SqliteStore } from "../tower/store/sqlite/sqlite-store.js";
import type { Claimant, Store, TaskRow } from "../tower/store/store.js";

export const PG_URL = process.env.EP_TEST_PG_URL ?? "postgres://127.0.0.1:5432/test";
export const pgAdmin = () =>
  new pg.Client({ connectionString: withDefaultUser(PG_URL), connectionTimeoutMillis: 3000 });

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

export const pgProblem = await probePostgres();
export const skipPostgres = Boolean(pgProblem) && !process.env.CI;
if (skipPostgres)
  console.log(`store suite: skipping PostgreSQL (${PG_URL} unreachable: ${pgProblem}); set EP_TEST_PG_URL to run it`);

/** A fresh, migrated database, plus a way to open more stores on it (other replicas/processes). */
export interface Fixture {
  store: Store;
  openAnother(opts?: { migrate?: boolean; max?: number }): Promise<Store>;
  cleanup(): Promise<void>;
}

export async function sqliteFixture(): Promise<Fixture> {
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

export async function postgresFixture(): Promise<Fixture> {
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

export const dialects = [
  { dialect: "sqlite", skip: false, fixture: sqliteFixture },
  { dialect: "postgres", skip: skipPostgres, fixture: postgresFixture },
] as const;

export const T0 = Date.parse("2025-01-01T00:00:00.000Z");
export const iso = (ms: number) => new Date(ms).toISOString();

export function expectEpError(code: string) {
  return (err: unknown) => {
    expect(err).toBeInstanceOf(EpError);
    expect((err as EpError).code).toBe(code);
    return true;
  };
}

/** What a store-*.test.ts body gets: the dialect, the test function, and row builders on a fresh store per test. */
export interface StoreSuite {
  dialect: "sqlite" | "postgres";
  skip: boolean;
  test: typeof it | typeof it.skip;
  /** a fresh database of this dialect, besides the test's own */
  fixture(): Promise<Fixture>;
  readonly store: Store;
  readonly fx: Fixture;
  id(prefix: string): string;
  domain(name?: string): Promise<string>;
  mission(domainId: string): Promise<string>;
  task(domainId: string, missionId: string, over?: Partial<TaskRow>): TaskRow;
  setup(): Promise<{ d: string; m: string; add: (over?: Partial<TaskRow>) => Promise<TaskRow> }>;
  claimant(domainId: string, over?: Partial<Claimant>): Claimant;
}

/** Runs `body` once per dialect, each test on a fresh migrated database. */
export function storeSuite(body: (s: StoreSuite) => void): void {
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
      await store.insertMission({
        id: m,
        domainId,
        title: "m",
        description: "",
        status: "open",
        createdAt: iso(T0 + n),
        updatedAt: iso(T0 + n),
      });
      return m;
    }

    function task(domainId: string, missionId: string, over: Partial<TaskRow> = {}): TaskRow {
      return {
        leaseId: "",
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
        dependsOn: [],
        step: "",
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

    const claimant = (domainId: string, over: Partial<Claimant> = {}): Claimant => ({
      agentId: "agt_1",
      domainId,
      runtime: "shell",
      capabilities: [],
      leaseId: "ls_test",
      ...over,
    });
    body({
      dialect,
      skip,
      test,
      fixture,
      get store() {
        return store;
      },
      get fx() {
        return fx;
      },
      id,
      domain,
      mission,
      task,
      setup,
      claimant,
    });
  });
}
