// EP set up for one scenario, end to end as in production: the tower as its own process (the
// freshly bundled ep-tower of tests/epd-harness.ts, on a SQLite file or on a fresh PostgreSQL
// schema as bench/claim.ts --pg runs it), one real epd linked to it with 16 enrolled shell agents,
// and the submitter process calling the tower's API. epd runs nothing (bench/wakeup.ts's
// `--runs none`): its shell runtime's executable is missing, so a claimed task's run fails at
// once without a process and its outcome (failed, runtime_missing) is committed like any other.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, registerNode, spawnEpd, type EpdProcess } from "../../tests/epd-harness.js";
import { spawnTowerChild, tempHome, waitFor, type TowerChild } from "../../tests/harness.js";
import { freshSchema, spawnReplica, type Schema } from "../../tests/replicas-harness.js";
import { startChild, type Child } from "./child.js";
import { withAppName, type SetupOptions, type StartTimes, type SystemRun } from "./system.js";

const TERMINAL = "('succeeded', 'failed', 'cancelled')";

/** What epd's `--runs none` is: the shell runtime's executable does not exist (bench/wakeup.ts). */
function runNothing(home: string): void {
  mkdirSync(join(home, "epd"), { recursive: true, mode: 0o700 });
  writeFileSync(join(home, "epd", "runtimes.toml"), '[shell]\ncommand = "/nonexistent/ep-bench-no-process"\n');
}

export async function setupEp(store: "sqlite" | "pg", o: SetupOptions): Promise<SystemRun> {
  const home = tempHome("ep-bench-peers-");
  const appPrefix = `ep-bench-peers-${o.runId}-ep`;
  let schema: Schema | undefined;
  let tower: TowerChild | undefined;
  let epd: EpdProcess | undefined;
  let submitter: Child | undefined;
  let db: { count(sql: string): Promise<Record<string, unknown>[]>; close(): Promise<void> } | undefined;
  const killOnExit = () => {
    for (const c of [tower?.child, epd?.child]) if (c && c.exitCode === null && !c.signalCode) c.kill("SIGKILL");
  };
  const close = async () => {
    process.off("exit", killOnExit);
    await submitter?.stop();
    await epd?.stop();
    await db?.close();
    await tower?.stop();
    await schema?.drop();
    home.cleanup();
  };
  try {
    if (store === "pg") {
      schema = await freshSchema();
      tower = await spawnReplica({ ...schema, url: withAppName(schema.url, appPrefix) }, home.dir, {
        EP_LOG_LEVEL: "error",
      });
    } else {
      const { tower: entry } = await buildBinaries();
      tower = await spawnTowerChild({ entry, home: home.dir, env: { EP_SECRET_KEY: "test", EP_LOG_LEVEL: "error" } });
    }
    const adminToken = readFileSync(join(home.dir, "tower", "admin.token"), "utf8").trim();
    const work = createClient(
      WorkService,
      createConnectTransport({
        baseUrl: tower.url,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${adminToken}`), next(req))],
      }),
    );
    const domainId = (await work.createDomain({ name: "bench" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "peers" })).mission!.id;

    const nodeFile = join(home.dir, "node.json");
    await registerNode(tower.url, adminToken, nodeFile);
    runNothing(home.dir);
    // the poll is a minute: every claim comes from the link, as in production; in the latency
    // scenario epd logs each run's end at info, the observable of its start (see startTimes)
    epd = await spawnEpd({
      home: home.dir,
      nodeFile,
      backendUrl: tower.url,
      env: {
        EP_LOG_LEVEL: o.latency ? "info" : "warn",
        EP_POLL_MS: "60000",
        ...(o.epLink ? { EP_LINK: o.epLink } : {}),
      },
    });
    for (let i = 0; i < o.concurrency; i++)
      await epd.call("agent.enroll", { domainId, runtime: "shell", name: `bench-${i}` });

    // a bench stopped on the way (an error, Ctrl-C) must not leave a tower or an epd behind
    process.on("exit", killOnExit);
    db = store === "pg" ? await pgReader(o.pgUrl, schema!.name) : sqliteReader(join(home.dir, "tower", "ep.db"));
    submitter = await startChild("submitter.ts", { system: "ep", url: tower.url, token: adminToken, missionId });
  } catch (err) {
    await close();
    throw err;
  }
  const reader = db!;
  const e = epd;
  return {
    system: store === "pg" ? "ep-pg" : "ep-sqlite",
    submitter,
    cpu: {
      server: [tower.child.pid!],
      worker: [epd.child.pid!],
      database: store === "pg" ? "postgres" : "none",
      pgAppPrefix: appPrefix,
      pgUrl: o.pgUrl,
    },
    committed: async () =>
      Number((await reader.count(`SELECT count(*) AS n FROM tasks WHERE status IN ${TERMINAL}`))[0].n),
    async startTimes(label, count, started): Promise<StartTimes> {
      const ids = new Map(started);
      // epd logs "run finished" right after the runtime's start returned, here at once (no
      // process): the moment the run started, to the log's millisecond
      const runs = new Map<string, number>();
      // the outcome is committed after the line is written; its pipe may still be on the way
      await waitFor(() => {
        for (const l of e.logs)
          if (l.msg === "run finished" && typeof l.task_id === "string" && ids.has(l.task_id))
            runs.set(l.task_id, Date.parse(l.ts as string));
        return runs.size === ids.size;
      }, 10_000).catch(() => undefined);
      const rows = await reader.count("SELECT task_id, created_at FROM events WHERE name = 'task.running'");
      const running = new Map(rows.map((r) => [r.task_id as string, Date.parse(r.created_at as string)]));
      const missing = [...ids.keys()].filter((id) => !runs.has(id) || !running.has(id));
      if (missing.length)
        throw new Error(
          `${label}: ${missing.length} of ${count} tasks have no run ` +
            `start (epd log) or no task.running event, e.g. ${missing[0]}`,
        );
      return {
        start: [...ids].map(([id, t0]) => runs.get(id)! - t0),
        alt: {
          what: "the tower's commit of task.running (its event's created_at)",
          values: [...ids].map(([id, t0]) => running.get(id)! - t0),
        },
      };
    },
    async outcomes() {
      const rows = await reader.count("SELECT status, count(*) AS n FROM tasks GROUP BY status");
      const counts: Record<string, number> = Object.fromEntries(
        rows.map((r) => [`tasks ${r.status as string}`, Number(r.n)]),
      );
      // what epd complained of (a warning per task would be a cost of its own)
      for (const l of e.logs)
        if (l.level === "warn" || l.level === "error" || l.raw)
          counts[`epd ${l.level ?? "raw"}: ${String(l.msg ?? l.raw).slice(0, 80)}`] =
            (counts[`epd ${l.level ?? "raw"}: ${String(l.msg ?? l.raw).slice(0, 80)}`] ?? 0) + 1;
      return counts;
    },
    close,
  };
}

/** Reads the tower's SQLite file beside it (WAL: a reader never blocks its writer). */
function sqliteReader(file: string) {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  return {
    count: async (sql: string) => db.prepare(sql).all() as Record<string, unknown>[],
    close: async () => void db.close(),
  };
}

async function pgReader(url: string, schema: string) {
  const c = new pg.Client({
    connectionString: url,
    application_name: "ep-bench-peers-monitor",
    options: `-c search_path=${schema}`,
  });
  await c.connect();
  return {
    count: async (sql: string) => (await c.query(sql)).rows as Record<string, unknown>[],
    close: () => c.end(),
  };
}
