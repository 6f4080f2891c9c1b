// The raw references bench/claim.ts measures EP against, in the same run:
// - pgReference: the submit/claim/complete loop straight on PostgreSQL (INSERT; UPDATE … WHERE
//   id = (SELECT … FOR UPDATE SKIP LOCKED) RETURNING; UPDATE … succeeded) on the same migrated
//   tables in a fresh schema, no HTTP;
// - httpReference: a bare node:http server (child process, no auth, no events, an in-process
//   long-poll wake-up) serving the same three REST paths with those statements, on PostgreSQL
//   (a pool of 10) or on SQLite (better-sqlite3, the tower's pragmas, one autocommit statement
//   per request), driven by the same client loop as EP. Its CPU per task is the floor the
//   tower's is compared with (issue 21: tower ≤ 0.35 ms per task where this is ~0.14).
import { spawn } from "node:child_process";
import { join } from "node:path";
import pg from "pg";
import { freshSchema, PG_URL } from "../tests/replicas-harness.js";
import { tempHome } from "../tests/harness.js";
import { PostgresStore, withDefaultUser } from "../tower/store/postgres/postgres-store.js";
import { SqliteStore } from "../tower/store/sqlite/sqlite-store.js";
import { procCpuMs } from "./figures.js";

export interface Loop {
  tasks: number;
  workers: number;
  submitters: number;
}
type Post = (path: string, body: unknown, base: string) => Promise<any>;
export interface ReferenceFigures {
  seconds: number;
  tasks_per_s: number;
  cpu_ms_per_task?: number;
}

/** The raw reference: the same loop straight on PostgreSQL, on the same migrated tables. */
export async function pgReference({
  tasks: TASKS,
  workers: WORKERS,
  submitters: SUBMITTERS,
}: Loop): Promise<ReferenceFigures> {
  const refSchema = await freshSchema();
  try {
    const store = await PostgresStore.connect(PG_URL, { schema: refSchema.name, max: 2 });
    await store.migrate();
    await store.close();
    const clients = await Promise.all(
      Array.from({ length: WORKERS + SUBMITTERS }, async () => {
        const c = new pg.Client({
          connectionString: withDefaultUser(PG_URL),
          options: `-c search_path=${refSchema.name}`,
        });
        await c.connect();
        return c;
      }),
    );
    const now = new Date().toISOString();
    await clients[0].query("INSERT INTO domains (id, name, created_at) VALUES ('dom_ref', 'ref', $1)", [now]);
    await clients[0].query(
      "INSERT INTO missions (id, domain_id, title, description, status, created_at, " +
        "updated_at) VALUES ('mis_ref', 'dom_ref', 'ref', '', 'open', $1, $1)",
      [now],
    );
    const insert = {
      name: "ref_insert",
      text: `INSERT INTO tasks (id, domain_id, mission_id, kind, title, status, claim_policy, created_at, updated_at)
             VALUES ($1, 'dom_ref', 'mis_ref', 'claimable', 't', 'queued', 'first_claim', $2, $2)`,
    };
    const claim = {
      name: "ref_claim",
      text: `UPDATE tasks SET status = 'claimed', claimed_by = $1, attempts = attempts + 1,
                 lease_expires_ms = $2, updated_at = $3
             WHERE id = (SELECT id FROM tasks WHERE domain_id = 'dom_ref' AND status = 'queued' AND kind = 'claimable'
                         ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id`,
    };
    const complete = {
      name: "ref_complete",
      text:
        "UPDATE tasks SET status = 'succeeded', result = $2, lease_expires_ms " +
        "= NULL, updated_at = $3 WHERE id = $1 AND claimed_by = $4",
    };
    let submitted = 0;
    let done = 0;
    const t0 = performance.now();
    await Promise.all([
      ...clients.slice(0, SUBMITTERS).map(async (c) => {
        while (submitted < TASKS) {
          const n = submitted++;
          await c.query({ ...insert, values: [`tsk_ref_${n}`, new Date().toISOString()] });
        }
      }),
      ...clients.slice(SUBMITTERS).map(async (c, w) => {
        while (done < TASKS) {
          const r = await c.query({ ...claim, values: [`agt_${w}`, Date.now() + 60_000, new Date().toISOString()] });
          if (!r.rows.length) {
            await new Promise((res) => setTimeout(res, 1)); // the queue is empty for now
            continue;
          }
          await c.query({
            ...complete,
            values: [r.rows[0].id, '{"output":"ok"}', new Date().toISOString(), `agt_${w}`],
          });
          done++;
        }
      }),
    ]);
    const seconds = (performance.now() - t0) / 1000;
    await Promise.all(clients.map((c) => c.end()));
    return { seconds: Number(seconds.toFixed(2)), tasks_per_s: Math.round(TASKS / seconds) };
  } finally {
    await refSchema.drop();
  }
}

/**
 * The server's three routes over a store: `insert(title)`, `claim(agent)` (the id or undefined),
 * `complete(id, agent, resultJson)`.
 */
const SERVER_LOOP = `
let seq = 0; const waiters = new Set();
http.createServer((req, res) => {
  const chunks = []; req.on("data", (c) => chunks.push(c)); req.on("end", async () => {
    const body = JSON.parse(Buffer.concat(chunks).toString() || "{}"); const parts = req.url.split("/"); let out;
    if (parts[3] === "missions") {
      const id = "tsk_" + process.pid + "_" + seq++;
      await insert(id, body.title, seq);
      for (const w of waiters) w(); waiters.clear(); out = { task: { id, status: "queued" } };
    } else if (parts[3] === "agents") {
      let t = await claim(parts[4]);
      if (!t && body.wait_ms) {
        await new Promise((r) => {
          const timer = setTimeout(r, body.wait_ms);
          waiters.add(() => (clearTimeout(timer), r()));
        });
        t = await claim(parts[4]);
      }
      out = { task: t ? { id: t, status: "claimed" } : null };
    } else {
      await complete(parts[4], body.agent_id, JSON.stringify(body.result));
      out = { task: { id: parts[4], status: "succeeded" } };
    }
    const json = JSON.stringify(out);
    res.writeHead(201, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
    res.end(json);
  });
}).listen(PORT, "127.0.0.1", () => console.log("ready"));
`;

const pgServer = (schema: string) => `
import http from "node:http"; import pg from "pg";
const pool = new pg.Pool({
  connectionString: ${JSON.stringify(withDefaultUser(PG_URL))},
  options: "-c search_path=${schema}",
  max: 10,
});
const now = () => new Date().toISOString();
await pool.query("INSERT INTO domains (id, name, created_at) VALUES ('dom_ref', 'ref', $1)", [now()]);
await pool.query(
  "INSERT INTO missions (id, domain_id, title, description, status, created_at, updated_at) " +
    "VALUES ('mis_ref', 'dom_ref', 'ref', '', 'open', $1, $1)",
  [now()],
);
const INSERT =
  "INSERT INTO tasks (id, domain_id, mission_id, kind, title, status, claim_policy, created_at, updated_at) " +
  "VALUES ($1, 'dom_ref', 'mis_ref', 'claimable', $2, 'queued', 'first_claim', $3, $3)";
const CLAIM =
  "UPDATE tasks SET status = 'claimed', claimed_by = $1, attempts = attempts + 1, lease_expires_ms = $2, " +
  "updated_at = $3 " +
  "WHERE id = (SELECT id FROM tasks WHERE domain_id = 'dom_ref' AND status = 'queued' AND kind = 'claimable' " +
  "ORDER BY priority DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id";
const COMPLETE =
  "UPDATE tasks SET status = 'succeeded', result = $2, lease_expires_ms = NULL, updated_at = $3 " +
  "WHERE id = $1 AND claimed_by = $4";
const insert = (id, title) => pool.query({ name: "i", text: INSERT, values: [id, title, now()] });
const claim = async (agent) =>
  (await pool.query({ name: "c", text: CLAIM, values: [agent, Date.now() + 60000, now()] })).rows[0]?.id;
const complete = (id, agent, result) => pool.query({ name: "u", text: COMPLETE, values: [id, result, now(), agent] });
`;

const sqliteServer = (path: string) => `
import http from "node:http"; import Database from "better-sqlite3";
const db = new Database(${JSON.stringify(path)});
db.pragma("journal_mode = WAL");
db.pragma("synchronous = NORMAL");
db.pragma("foreign_keys = ON");
db.pragma("cache_size = -32768");
const now = () => new Date().toISOString();
db.prepare("INSERT INTO domains (id, name, created_at) VALUES ('dom_ref', 'ref', ?)").run(now());
db.prepare(
  "INSERT INTO missions (id, domain_id, title, description, status, created_at, updated_at) " +
    "VALUES ('mis_ref', 'dom_ref', 'ref', '', 'open', ?, ?)",
).run(now(), now());
const ins = db.prepare(
  "INSERT INTO tasks (id, domain_id, mission_id, kind, title, status, claim_policy, seq, created_at, updated_at) " +
    "VALUES (?, 'dom_ref', 'mis_ref', 'claimable', ?, 'queued', 'first_claim', ?, ?, ?)",
);
const cl = db.prepare(
  "UPDATE tasks SET status = 'claimed', claimed_by = ?, attempts = attempts + 1, lease_expires_ms = ?, " +
    "updated_at = ? " +
    "WHERE rowid = (SELECT rowid FROM tasks WHERE domain_id = 'dom_ref' AND status = 'queued' AND kind = 'claimable' " +
    "ORDER BY priority DESC, seq LIMIT 1) RETURNING id",
);
const up = db.prepare(
  "UPDATE tasks SET status = 'succeeded', result = ?, lease_expires_ms = NULL, updated_at = ? " +
    "WHERE id = ? AND claimed_by = ?",
);
const insert = (id, title, seq) => { const t = now(); ins.run(id, title, seq, t, t); };
const claim = (agent) => cl.get(agent, Date.now() + 60000, now())?.id;
const complete = (id, agent, result) => up.run(result, now(), id, agent);
`;

/** The same client loop as EP's against a bare HTTP server over `store`; its process's CPU per task too. */
export async function httpReference(store: "pg" | "sqlite", loop: Loop, post: Post): Promise<ReferenceFigures> {
  const { tasks: TASKS, workers: WORKERS, submitters: SUBMITTERS } = loop;
  const refSchema = store === "pg" ? await freshSchema() : undefined;
  const home = store === "sqlite" ? tempHome("ep-bench-ref-") : undefined;
  let server: string;
  if (refSchema) {
    const s = await PostgresStore.connect(PG_URL, { schema: refSchema.name, max: 2 });
    await s.migrate();
    await s.close();
    server = pgServer(refSchema.name);
  } else {
    const path = join(home!.dir, "ref.db");
    const s = SqliteStore.open({ path });
    await s.migrate();
    await s.close();
    server = sqliteServer(path);
  }
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const child = spawn(
    process.execPath,
    ["--input-type=module", "-e", server + SERVER_LOOP.replace("PORT", String(port))],
    { cwd: process.cwd(), stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve());
    child.once("exit", (code) => reject(new Error(`reference server exited ${code}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  let sent = 0;
  let done = 0;
  const cpu0 = procCpuMs(child.pid!);
  const t0 = performance.now();
  await Promise.all([
    ...Array.from({ length: SUBMITTERS }, async () => {
      while (sent < TASKS) {
        sent++;
        await post("/work/missions/mis_ref/tasks", { title: "t" }, base);
      }
    }),
    ...Array.from({ length: WORKERS }, async (_, w) => {
      while (done < TASKS) {
        const { task } = await post(`/work/agents/agt_${w}/claim`, { wait_ms: 200 }, base);
        if (!task) continue;
        await post(`/work/tasks/${task.id}/complete`, { agent_id: `agt_${w}`, result: { output: "ok" } }, base);
        done++;
      }
    }),
  ]);
  const secs = (performance.now() - t0) / 1000;
  const cpu = procCpuMs(child.pid!) - cpu0;
  child.kill("SIGTERM");
  await refSchema?.drop();
  home?.cleanup();
  return {
    seconds: Number(secs.toFixed(2)),
    tasks_per_s: Math.round(TASKS / secs),
    cpu_ms_per_task: Number((cpu / TASKS).toFixed(3)),
  };
}
