// PostgreSQL's LISTEN/NOTIFY between stores (replication's signalling).
import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitFor } from "../../test-support/wait.js";
import { PostgresStore } from "./postgres/postgres-store.js";
import {
  expectEpError,
  pgAdmin,
  PG_URL,
  postgresFixture,
  skipPostgres,
  type Fixture,
} from "../../test-support/store-suite.js";

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
    return {
      got,
      push: (p: string) => void got.push(p),
      async until(count: number, ms = 5000): Promise<void> {
        await waitFor(() => got.length >= count, ms, 10).catch(() => {
          throw new Error(`expected ${count} notifications, got ${JSON.stringify(got)}`);
        });
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
      const killed = await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        [`${app}-listen`],
      );
      await admin.end();
      expect(killed.rowCount).toBeGreaterThan(0);
      await waitFor(() => reconnects > 0, 5000);
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
