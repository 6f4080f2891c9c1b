// Event horizon stress on PostgreSQL: two stores on one fresh schema, 12 writers committing one
// event per transaction through the group commit, and a reader following the log with
// listEvents from its own cursor. Reports any committed id the reader went past without
// returning (a skipped event), with the xid of each row around it. Not a timing figure: a
// correctness probe for tower/store/postgres/event-horizon.ts (before its fix, 6 runs in 10
// skipped ids). Exit 1 when an id was skipped.
//   node scripts/run-ts.mjs bench/horizon.ts [--runs 10]
import { parseArgs } from "node:util";
import pg from "pg";
import { PostgresStore, withDefaultUser } from "../tower/store/postgres/postgres-store.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "10" } } });
const base = withDefaultUser(process.env.EP_TEST_PG_URL ?? "postgres://127.0.0.1:5432/test");

async function run(): Promise<number[]> {
  const schema = `ep_horizon_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const open = async () => {
    const s = await PostgresStore.connect(base, { schema });
    await s.migrate();
    return s;
  };
  const [a, b, reader] = [await open(), await open(), await open()];
  try {
    let stop = false;
    const seen = new Set<number>();
    let cursor = 0;
    const follow = (async () => {
      while (!stop) {
        for (const e of await reader.listEvents({ afterId: cursor, limit: 1000 })) seen.add(e.id), (cursor = e.id);
        await new Promise((r) => setImmediate(r));
      }
    })();
    const writer = (s: PostgresStore) => async () => {
      for (let i = 0; i < 300; i++)
        await s.transaction((tx) => tx.appendFinalEvents!([{ type: "matrix", name: "x" }], new Date().toISOString()));
    };
    await Promise.all(Array.from({ length: 6 }, () => [writer(a)(), writer(b)()]).flat());
    await new Promise((r) => setTimeout(r, 300));
    stop = true;
    await follow;
    const rows = (await admin.query(`SELECT id, xmin::text AS x FROM ${schema}.events ORDER BY id`)).rows as {
      id: string;
      x: string;
    }[];
    const skipped = rows.map((r) => Number(r.id)).filter((id) => id <= cursor && !seen.has(id));
    for (const id of skipped) {
      const near = rows.filter((r) => Math.abs(Number(r.id) - id) <= 3).map((r) => `${r.id}:${r.x}`);
      console.log(`  skipped ${id}; id:xid around it ${near.join(" ")}`);
    }
    return skipped;
  } finally {
    await Promise.all([a.close(), b.close(), reader.close()]);
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  }
}

let bad = 0;
for (let i = 1; i <= Number(values.runs); i++) {
  const t0 = performance.now();
  const skipped = await run();
  if (skipped.length) bad++;
  console.log(`run ${i}: 3600 events, ${skipped.length} skipped (${(performance.now() - t0).toFixed(0)} ms)`);
}
console.log(`${bad} of ${values.runs} runs skipped an id`);
process.exit(bad ? 1 : 0);
