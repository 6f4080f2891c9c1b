// BullMQ, pg-boss and graphile-worker set up for one scenario: a fresh PostgreSQL schema (dropped
// after) or a fresh Redis key prefix in the bench's db index (its keys deleted after), a worker
// process and a submitter process.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { startChild, type Child } from "./child.js";
import type { PeerConfig, PeerSystem } from "./peer-config.js";
import { withAppName, type SetupOptions, type StartTimes, type SystemRun } from "./system.js";

const QUEUE = "ep_bench_noop";

export async function setupPeer(system: PeerSystem, o: SetupOptions): Promise<SystemRun> {
  const tag = `${o.runId}_${randomBytes(3).toString("hex")}`;
  const appPrefix = `ep-bench-peers-${tag}`;
  const config: PeerConfig = {
    system,
    concurrency: o.concurrency,
    // graphile-worker's jobs are named by task: its task list has `noop`
    queue: system === "graphile-worker" ? "noop" : QUEUE,
    pgUrl: withAppName(o.pgUrl, appPrefix),
    schema: `ep_peers_${tag}`,
    redisUrl: o.redisUrl,
    redisPrefix: `ep-bench-peers-${tag}`,
    pgBossBatch: o.pgBossBatch,
  };
  const store = system === "bullmq" ? await redisStore(config) : await pgStore(config, o.pgUrl);
  let worker: Child | undefined;
  let submitter: Child | undefined;
  try {
    worker = await startChild("peer-worker.ts", config);
    submitter = await startChild("submitter.ts", config);
  } catch (err) {
    await worker?.stop();
    await store.drop();
    throw err;
  }
  const w = worker;
  return {
    system,
    submitter,
    cpu: {
      worker: [w.pid],
      database: system === "bullmq" ? "redis" : "postgres",
      pgAppPrefix: appPrefix,
      pgUrl: o.pgUrl,
    },
    committed: store.committed,
    async startTimes(label, count): Promise<StartTimes> {
      const { latencies } = await w.request<{ latencies: number[] }>({ cmd: "latencies", label, count });
      return { start: latencies };
    },
    async close() {
      await submitter!.stop();
      await w.stop();
      await store.drop();
    },
  };
}

interface Store {
  committed(submitted: number): Promise<number>;
  drop(): Promise<void>;
}

/** BullMQ keeps completed jobs (removeOnComplete is off by default) in a sorted set. */
async function redisStore(c: PeerConfig): Promise<Store> {
  const { Redis } = await import("ioredis");
  const redis = new Redis(c.redisUrl, { maxRetriesPerRequest: 1 });
  return {
    committed: async () => redis.zcard(`${c.redisPrefix}:${c.queue}:completed`),
    async drop() {
      let cursor = "0";
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", `${c.redisPrefix}:*`, "COUNT", 1000);
        if (keys.length) await redis.unlink(...keys);
        cursor = next;
      } while (cursor !== "0");
      redis.disconnect();
    },
  };
}

/**
 * pg-boss keeps completed jobs (state 'completed') until its archive runs, hours later;
 * graphile-worker deletes a job once it succeeded, so what is left is what is not done.
 */
async function pgStore(c: PeerConfig, adminUrl: string): Promise<Store> {
  const db = new pg.Client({ connectionString: adminUrl, application_name: "ep-bench-peers-monitor" });
  await db.connect();
  const count = async (sql: string, params: unknown[] = []) => {
    try {
      return (await db.query<{ n: number }>(sql, params)).rows[0].n;
    } catch (err) {
      // the tables appear when the worker has migrated: nothing committed before
      if ((err as { code?: string }).code === "42P01") return undefined;
      throw err;
    }
  };
  return {
    committed: async (submitted) =>
      c.system === "pg-boss"
        ? ((await count(`SELECT count(*)::int AS n FROM ${c.schema}.job WHERE name = $1 AND state = 'completed'`, [
            c.queue,
          ])) ?? 0)
        : submitted - ((await count(`SELECT count(*)::int AS n FROM ${c.schema}._private_jobs`)) ?? submitted),
    async drop() {
      await db.query(`DROP SCHEMA IF EXISTS ${c.schema} CASCADE`);
      await db.end();
    },
  };
}
