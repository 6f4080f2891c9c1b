// The submitter (a child process of run.ts): puts no-op jobs in through each system's own client
// API, one call per job, as an application would.
//   EP: CreateTask over the tower's API with the lean unary transport epd uses (binary Connect
//     on node:http, keep-alive; bench/wakeup.ts's `--client lean`), a shell task that epd's
//     `--runs none` runtime never starts a process for.
//   BullMQ: Queue.add. pg-boss: send (to a queue made by the worker). graphile-worker:
//     WorkerUtils.addJob.
//
// IPC from run.ts:
//   {cmd:"burst", count, concurrency, label}: `count` jobs with `concurrency` calls in flight, as
//     fast as the system takes them; answers {seconds}.
//   {cmd:"rate", count, rate, inFlight, label}: open loop, one call every 1/rate s (timers, no
//     busy wait), at most inFlight outstanding; answers {started: [[jobId, t0]], failed}. Every job carries {l: label,
//       t0}: t0 is the wall time
//     (ms, sub-millisecond) at which its submit call started.
import { performance } from "node:perf_hooks";
import { configFromEnv, type SubmitConfig } from "./peer-config.js";

const wallNow = () => performance.timeOrigin + performance.now();
type Submit = (data: { l: string; t0: number }, i: number) => Promise<string>;

async function submitterFor(c: SubmitConfig): Promise<{ submit: Submit; close(): Promise<void> }> {
  if (c.system === "ep") {
    const { createClient } = await import("@connectrpc/connect");
    const { createConnectTransport } = await import("@connectrpc/connect-node");
    const { createUnaryTransport } = await import("../../daemon/link/unary-transport.js");
    const { WorkService } = await import("../../gen/ep/tower/v1/work_pb.js");
    const { Runtime } = await import("../../gen/ep/tower/v1/resources_pb.js");
    const headers = { authorization: `Bearer ${c.token}` };
    const streams = createConnectTransport({ baseUrl: c.url, httpVersion: "1.1" });
    const work = createClient(WorkService, createUnaryTransport({ baseUrl: c.url, headers, streams }));
    return {
      submit: async (d, i) =>
        (
          await work.createTask({
            missionId: c.missionId,
            title: `${d.l} ${i}`,
            runtime: Runtime.SHELL,
            input: { command: "true" },
          })
        ).task!.id,
      close: async () => {},
    };
  }
  if (c.system === "bullmq") {
    const { Queue } = await import("bullmq");
    const { Redis } = await import("ioredis");
    const connection = new Redis(c.redisUrl, { maxRetriesPerRequest: null });
    const queue = new Queue(c.queue, { connection, prefix: c.redisPrefix });
    return {
      submit: async (d) => (await queue.add("noop", d)).id!,
      close: async () => {
        await queue.close();
        connection.disconnect();
      },
    };
  }
  if (c.system === "pg-boss") {
    const { default: PgBoss } = await import("pg-boss");
    // a client only: no maintenance, no cron, the schema is the worker's
    const boss = new PgBoss({
      connectionString: c.pgUrl,
      schema: c.schema,
      supervise: false,
      schedule: false,
      migrate: false,
      max: 16,
    });
    boss.on("error", (err: Error) => console.error(`pg-boss: ${err.message}`));
    await boss.start();
    return {
      submit: async (d) => (await boss.send(c.queue, d))!,
      close: () => boss.stop({ graceful: false, close: true, wait: true }),
    };
  }
  const { makeWorkerUtils } = await import("graphile-worker");
  const utils = await makeWorkerUtils({ connectionString: c.pgUrl, schema: c.schema, maxPoolSize: 16 });
  return {
    submit: async (d) => (await utils.addJob("noop", d)).id,
    close: async () => utils.release(),
  };
}

const { submit, close } = await submitterFor(configFromEnv());

async function burst(count: number, concurrency: number, label: string): Promise<{ seconds: number }> {
  const start = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        await submit({ l: label, t0: wallNow() }, i);
      }
    }),
  );
  return { seconds: (performance.now() - start) / 1000 };
}

/**
 * Open loop: job i is due at i/rate s. At most `inFlight` calls are outstanding, as a client's pool
 * of connections allows (pg-boss's and graphile-worker's pools hold 16): a job due while all are
 * busy waits for one, and its latency still starts when it was due. A call that fails is counted,
 * not retried (an overloaded system shows as failures beside its latencies).
 */
async function atRate(
  count: number,
  rate: number,
  inFlight: number,
  label: string,
): Promise<{ started: [string, number][]; failed: number; error?: string }> {
  const started: [string, number][] = [];
  let failed = 0;
  let error: string | undefined;
  const pending = new Set<Promise<unknown>>();
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t0 = wallNow();
    while (pending.size >= inFlight) await Promise.race(pending);
    const call: Promise<unknown> = submit({ l: label, t0 }, i).then(
      (id) => started.push([id, t0]),
      (err: Error) => {
        failed++;
        error ??= err.message;
      },
    );
    pending.add(call);
    void call.finally(() => pending.delete(call));
  }
  await Promise.all(pending);
  return { started, failed, ...(error ? { error } : {}) };
}

type Command =
  | { cmd: "burst"; count: number; concurrency: number; label: string }
  | { cmd: "rate"; count: number; rate: number; inFlight: number; label: string }
  | { cmd: "stop" };
process.on("message", async (m: Command) => {
  try {
    if (m.cmd === "burst") process.send!(await burst(m.count, m.concurrency, m.label));
    else if (m.cmd === "rate") process.send!(await atRate(m.count, m.rate, m.inFlight, m.label));
    else {
      await close();
      process.exit(0);
    }
  } catch (err) {
    console.error(`submitter: ${(err as Error).stack ?? err}`);
    process.exit(1);
  }
});
process.on("disconnect", () => process.exit(0));
process.send!({ ready: true });
