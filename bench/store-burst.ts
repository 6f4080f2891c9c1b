// SQLite store transactions at rising concurrency: 20,000 one-event transactions from C callers
// at once (C = 1, 12, 100, 2,000), µs per transaction. A burst (a tower restart with a thousand
// claimers, a flood of submits) queues transactions at the store's gate; this shows whether the
// cost per transaction stays flat as the queue grows (docs/perf-history.md, "Pushed work").
//   node scripts/run-ts.mjs bench/store-burst.ts [--tasks 20000]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { SqliteStore } from "../tower/store/sqlite/sqlite-store.js";

const { values } = parseArgs({ options: { tasks: { type: "string", default: "20000" } } });
const N = Number(values.tasks);
const dir = mkdtempSync(join(tmpdir(), "ep-bench-burst-"));
const store = SqliteStore.open({ path: join(dir, "ep.db") });
await store.migrate();
const event = (i: number) => ({
  type: "matrix" as const,
  name: "task.claimed",
  domainId: "dom_1",
  missionId: "mis_1",
  agentId: "agt_1",
  taskId: `tsk_${i}`,
  status: "claimed",
  payload: { task_id: `tsk_${i}` },
});
const out: Record<string, number> = {};
let id = 0;
for (const callers of [1, 12, 100, 2000]) {
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (next < N) {
        next++;
        const i = id++;
        await store.transaction(async (tx) => void (await tx.appendEvents([event(i)], new Date().toISOString())));
      }
    }),
  );
  out[`us_per_tx_at_${callers}`] = Number((Number(process.hrtime.bigint() - t0) / N / 1000).toFixed(1));
}
await store.close();
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ transactions: N, ...out }));
