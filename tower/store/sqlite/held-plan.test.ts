// What a task an agent holds is looked up by (ClaimTask resume, on every claim a daemon with pushed
// work makes) must be read through the partial index of held tasks, not by scanning every task ever
// made: the query's SQL and SQLite's plan for it.
import { afterEach, describe, expect, it } from "vitest";
import { SqliteStore } from "./sqlite-store.js";

let store: SqliteStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

describe("held tasks of an agent", () => {
  it("are found through the tasks_leases index", async () => {
    store = SqliteStore.open({ path: ":memory:" });
    await store.migrate();
    const { sql, args } = (
      store as unknown as { taskListSql(q: object): { sql: string; args: unknown[] } }
    ).taskListSql({ claimedBy: "agt_1", domainId: "dom_1", held: true, kind: "claimable" });
    const plan = store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as { detail: string }[];
    expect(plan.map((p) => p.detail).join("; ")).toMatch(/USING INDEX tasks_leases/);
  });
});
