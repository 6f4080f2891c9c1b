// Store-level claim throughput: insert N claimable tasks, then 8 concurrent async
// workers claim + complete them through the Store interface until the queue is empty.
// SQLite runs on a temp file; PostgreSQL runs in a fresh schema beside a raw
// `FOR UPDATE SKIP LOCKED` reference written directly with pg on the same database
// (same table and indexes, same claim and complete statements minus the store).
//
// Run:
//   node scripts/run-ts.mjs bench/claim-store.ts [--tasks 50000] [--pg-tasks 10000] [--workers 8]
//     [--rounds 3] [--only sqlite|pg] [--pg-url postgres://127.0.0.1:5432/test]
//
// Targets (issues 2 and 11): SQLite >= 20,000 claims/s on the 2-core machine;
// PostgreSQL store >= 70% of the raw reference at 8 workers.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { PostgresStore, withDefaultUser } from "../tower/store/postgres/postgres-store.js";
import { SqliteStore } from "../tower/store/sqlite/sqlite-store.js";
import type { Store, TaskRow } from "../tower/store/store.js";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}

const SQLITE_TASKS = Number(arg("tasks", "50000"));
const PG_TASKS = Number(arg("pg-tasks", "10000"));
const WORKERS = Number(arg("workers", "8"));
const ROUNDS = Number(arg("rounds", "3"));
const ONLY = arg("only", "");
const PG_URL = arg("pg-url", process.env.EP_TEST_PG_URL ?? "postgres://127.0.0.1:5432/test");
const LEASE_MS = 30_000;

interface Result {
  name: string;
  tasks: number;
  seconds: number;
}

const rate = (r: Result) => r.tasks / r.seconds;

function taskRow(i: number, domainId: string, missionId: string): TaskRow {
  const now = new Date().toISOString();
  return {
    id: `tsk_${String(i).padStart(8, "0")}`,
    domainId,
    missionId,
    kind: "claimable",
    title: `task ${i}`,
    description: "",
    status: "queued",
    claimPolicy: "first_claim",
    priority: i % 3,
    capabilities: [],
    assigneeAgentId: "",
    attempts: 0,
    maxAttempts: 3,
    runtime: "",
    input: { n: i },
    result: null,
    claimedBy: "",
    leaseId: "",
    leaseExpiresMs: null,
    parentTaskId: "",
    dependsOn: [],
    step: "",
    createdAt: now,
    updatedAt: now,
  };
}

async function seed(store: Store, tasks: number): Promise<string> {
  const now = new Date().toISOString();
  await store.insertDomain({ id: "dom_bench", name: "bench", createdAt: now });
  await store.insertMission({
    id: "msn_bench",
    domainId: "dom_bench",
    title: "bench",
    description: "",
    status: "open",
    createdAt: now,
    updatedAt: now,
  });
  for (let start = 0; start < tasks; start += 1000) {
    await store.transaction(async (tx) => {
      for (let i = start; i < Math.min(tasks, start + 1000); i++)
        await tx.insertTask(taskRow(i, "dom_bench", "msn_bench"));
    });
  }
  return "dom_bench";
}

/** WORKERS async loops of claim + complete through the store until nothing is left. */
async function drain(name: string, store: Store, domainId: string, tasks: number): Promise<Result> {
  let claimed = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      const agentId = `agt_${w}`;
      for (let n = 0; ; n++) {
        const now = Date.now();
        const t = await store.claimTask(
          { agentId, domainId, runtime: "shell", capabilities: ["linux"], leaseId: `ls_${w}_${n}` },
          now,
          LEASE_MS,
        );
        if (!t) return;
        claimed++;
        const done = await store.updateTask(
          t.id,
          {
            status: "succeeded",
            result: { output: "ok", error: "" },
            leaseExpiresMs: null,
            updatedAt: new Date(now).toISOString(),
          },
          { status: ["claimed", "running"], claimedBy: agentId, leaseId: t.leaseId },
        );
        if (!done) throw new Error(`completing ${t.id} failed`);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (claimed !== tasks) throw new Error(`${name}: claimed ${claimed} of ${tasks}`);
  return { name, tasks, seconds };
}

async function benchSqlite(synchronous: "NORMAL" | "FULL", tasks: number): Promise<Result> {
  const dir = mkdtempSync(join(tmpdir(), "ep-bench-"));
  const store = SqliteStore.open({ path: join(dir, "tower.db"), synchronous });
  try {
    await store.migrate();
    const domainId = await seed(store, tasks);
    return await drain(`SQLite store (WAL, synchronous=${synchronous})`, store, domainId, tasks);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function withSchema<T>(fn: (schema: string) => Promise<T>): Promise<T> {
  const schema = `ep_bench_${randomBytes(5).toString("hex")}`;
  try {
    return await fn(schema);
  } finally {
    const admin = new pg.Client({ connectionString: withDefaultUser(PG_URL) });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  }
}

async function benchPgStore(): Promise<Result> {
  return withSchema(async (schema) => {
    const store = await PostgresStore.connect(PG_URL, { schema, max: WORKERS });
    try {
      await store.migrate();
      const domainId = await seed(store, PG_TASKS);
      await store.pool.query("VACUUM ANALYZE tasks");
      return await drain("PostgreSQL store", store, domainId, PG_TASKS);
    } finally {
      await store.close();
    }
  });
}

/** The reference: the same table (migrated the same way), claimed with hand-written pg calls. */
async function benchPgRaw(): Promise<Result> {
  return withSchema(async (schema) => {
    const setup = await PostgresStore.connect(PG_URL, { schema, max: 2 });
    try {
      await setup.migrate();
      await seed(setup, PG_TASKS);
      await setup.pool.query("VACUUM ANALYZE tasks");
    } finally {
      await setup.close();
    }
    const clients = await Promise.all(
      Array.from({ length: WORKERS }, async () => {
        const c = new pg.Client({ connectionString: withDefaultUser(PG_URL), options: `-c search_path=${schema}` });
        await c.connect();
        return c;
      }),
    );
    try {
      let claimed = 0;
      const started = process.hrtime.bigint();
      await Promise.all(
        clients.map(async (c, w) => {
          const agentId = `agt_${w}`;
          for (let n = 0; ; n++) {
            const now = Date.now();
            const leaseId = `ls_${w}_${n}`;
            const res = await c.query({
              name: "claim",
              text: `UPDATE tasks SET status = 'claimed', claimed_by = $1, attempts = attempts + 1,
                         lease_expires_ms = $2, updated_at = $3, lease_id = $5
                     WHERE id = (SELECT id FROM tasks WHERE domain_id = $4 AND status = 'queued' AND kind = 'claimable'
                                 ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
                     RETURNING id`,
              values: [agentId, now + LEASE_MS, new Date(now).toISOString(), "dom_bench", leaseId],
            });
            if (!res.rowCount) return;
            claimed++;
            const done = await c.query({
              name: "complete",
              text:
                "UPDATE tasks SET status = 'succeeded', result = $3, lease_expires_ms = " +
                "NULL, updated_at = $4 WHERE id = $1 AND claimed_by = $2 AND lease_id = $5",
              values: [res.rows[0].id, agentId, '{"output":"ok","error":""}', new Date(now).toISOString(), leaseId],
            });
            if (!done.rowCount) throw new Error("raw complete failed");
          }
        }),
      );
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (claimed !== PG_TASKS) throw new Error(`raw: claimed ${claimed} of ${PG_TASKS}`);
      return { name: "PostgreSQL raw SKIP LOCKED reference", tasks: PG_TASKS, seconds };
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });
}

/** Best of ROUNDS runs (the machine is shared; the best run is the least disturbed). */
async function best(run: () => Promise<Result>): Promise<Result> {
  let top: Result | undefined;
  for (let i = 0; i < ROUNDS; i++) {
    const r = await run();
    if (!top || rate(r) > rate(top)) top = r;
  }
  return top!;
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const rows: string[] = [];
const line = (r: Result, note: string) =>
  rows.push(`| ${r.name} | ${fmt(r.tasks)} | ${WORKERS} | ${r.seconds.toFixed(2)} s | **${fmt(rate(r))}** | ${note} |`);

if (ONLY !== "pg") {
  const s = await best(() => benchSqlite("NORMAL", SQLITE_TASKS));
  line(s, rate(s) >= 20_000 ? "target ≥ 20,000/s: met" : "target ≥ 20,000/s: MISSED");
  const full = await best(() => benchSqlite("FULL", Math.min(SQLITE_TASKS, 10_000)));
  line(full, "EP_SQLITE_SYNCHRONOUS=FULL: one fsync per group commit");
}
if (ONLY !== "sqlite") {
  // Interleave the two so load from other jobs hits both alike.
  let raw: Result | undefined;
  let store: Result | undefined;
  for (let i = 0; i < ROUNDS; i++) {
    const r = await benchPgRaw();
    if (!raw || rate(r) > rate(raw)) raw = r;
    const s = await benchPgStore();
    if (!store || rate(s) > rate(store)) store = s;
  }
  const ratio = rate(store!) / rate(raw!);
  line(raw!, "reference");
  line(store!, `${(ratio * 100).toFixed(0)}% of reference (target ≥ 70%): ${ratio >= 0.7 ? "met" : "MISSED"}`);
}

console.log(
  `claim + complete, best of ${ROUNDS} rounds, Node ${process.version}, ${process.platform}/${process.arch}\n`,
);
console.log("| Store | tasks | workers | time | claims/s | note |");
console.log("|---|---|---|---|---|---|");
for (const r of rows) console.log(r);
