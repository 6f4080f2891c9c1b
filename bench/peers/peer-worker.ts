// One peer's worker process (a child of run.ts): BullMQ, pg-boss or graphile-worker running a
// no-op handler with 16-way concurrency (EP_PEER_CONCURRENCY), each as its documentation says a
// worker is set up. The handler notes when it starts (wall ms, sub-millisecond) against the
// submit time the job carries, for the latency scenario; it does nothing else.
//
// IPC from run.ts: {cmd:"latencies", label, count} answers the submit→start times of `count`
// jobs labelled `label` once that many have started; {cmd:"stop"} closes the worker and exits.
import { performance } from "node:perf_hooks";
import { peerFromEnv, type PeerConfig } from "./peer-config.js";

const wallNow = () => performance.timeOrigin + performance.now();
const started = new Map<string, number[]>();

/** The handler's one act: note its start against the job's submit time. */
function onStart(data: { l?: string; t0?: number } | undefined): void {
  if (!data?.l || data.t0 === undefined) return;
  const list = started.get(data.l) ?? [];
  list.push(wallNow() - data.t0);
  started.set(data.l, list);
}

async function startBullmq(c: PeerConfig): Promise<() => Promise<void>> {
  const { Worker } = await import("bullmq");
  const { Redis } = await import("ioredis");
  const connection = new Redis(c.redisUrl, { maxRetriesPerRequest: null });
  const worker = new Worker(c.queue, async (job) => onStart(job.data), {
    connection,
    prefix: c.redisPrefix,
    concurrency: c.concurrency,
  });
  await worker.waitUntilReady();
  return async () => {
    await worker.close();
    connection.disconnect();
  };
}

async function startPgBoss(c: PeerConfig): Promise<() => Promise<void>> {
  const { default: PgBoss } = await import("pg-boss");
  const boss = new PgBoss({ connectionString: c.pgUrl, schema: c.schema, max: c.concurrency + 2 });
  boss.on("error", (err: Error) => console.error(`pg-boss: ${err.message}`));
  await boss.start();
  await boss.createQueue(c.queue);
  // pg-boss 10 has no concurrency option: each work() is one polling loop that fetches up to
  // batchSize jobs, runs the handler on them, and waits out the polling interval before it
  // fetches again (even with jobs waiting). 16 loops at its shortest interval (0.5 s) is
  // concurrency 16; the batch lets a loop take more than one job per interval.
  for (let i = 0; i < c.concurrency; i++) {
    await boss.work(c.queue, { batchSize: c.pgBossBatch, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      for (const job of jobs) onStart(job.data as { l?: string; t0?: number });
    });
  }
  return () => boss.stop({ graceful: true, wait: true, close: true });
}

async function startGraphile(c: PeerConfig): Promise<() => Promise<void>> {
  const { run, Logger } = await import("graphile-worker");
  const runner = await run({
    connectionString: c.pgUrl,
    schema: c.schema,
    concurrency: c.concurrency,
    maxPoolSize: c.concurrency + 2,
    noHandleSignals: true,
    logger: new Logger(() => (level, message) => level === "error" && console.error(`graphile-worker: ${message}`)),
    taskList: { noop: async (payload) => onStart(payload as { l?: string; t0?: number }) },
  });
  return () => runner.stop();
}

const config = peerFromEnv();
const starters = { bullmq: startBullmq, "pg-boss": startPgBoss, "graphile-worker": startGraphile };
const stop = await starters[config.system](config);

const waiting: { label: string; count: number; reply(): void }[] = [];
setInterval(() => {
  for (const w of waiting.splice(0)) {
    if ((started.get(w.label)?.length ?? 0) >= w.count) w.reply();
    else waiting.push(w);
  }
}, 10).unref();

process.on("message", async (m: { cmd: "latencies"; label: string; count: number } | { cmd: "stop" }) => {
  if (m.cmd === "latencies") {
    waiting.push({
      label: m.label,
      count: m.count,
      reply: () => process.send!({ label: m.label, latencies: started.get(m.label) ?? [] }),
    });
  } else {
    await stop();
    process.exit(0);
  }
});
process.on("disconnect", () => process.exit(0));
process.send!({ ready: true });
