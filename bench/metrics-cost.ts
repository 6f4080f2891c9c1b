// What the tower's metrics add to the work path, per task, in CPU: the three HTTP observations
// of a REST task (submit, claim, complete: counter + duration histogram each), the claim
// (counter, latency histogram, the claim-time map) and the outcome (counter, run histogram).
// bench/claim.ts end to end is too noisy on a shared 2-core machine to see a few microseconds;
// this times exactly the calls the hot path makes, in-process.
//   node scripts/run-ts.mjs bench/metrics-cost.ts [--tasks 200000]
import { parseArgs } from "node:util";
import { Registry } from "prom-client";
import { createHttpMeter } from "../tower/metrics/http-meter.js";
import { createWorkMeter } from "../tower/metrics/work-meter.js";
import type { TaskRow } from "../tower/store/store.js";

const { values } = parseArgs({ options: { tasks: { type: "string", default: "200000" } } });
const TASKS = Number(values.tasks);
const registry = new Registry();
const http = createHttpMeter(registry);
const work = createWorkMeter(registry);
const createdAt = new Date().toISOString();
const rows: TaskRow[] = Array.from(
  { length: 1000 },
  (_, i) => ({ id: `tsk_${i.toString(36).padStart(12, "0")}`, attempts: 1, createdAt }) as TaskRow,
);

function oneTask(i: number): void {
  const t = rows[i % rows.length];
  http("POST", "/work/missions/:mission_id/tasks", 200, 0.0004);
  http("POST", "/work/agents/:agent_id/claim", 200, 0.002);
  work.claimed(t, Date.now());
  http("POST", "/work/tasks/:task_id/complete", 200, 0.0005);
  work.reported(t, "succeeded", Date.now());
}

function round(): number {
  const start = process.cpuUsage();
  for (let i = 0; i < TASKS; i++) oneTask(i);
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / TASKS; // ns per task
}

for (let i = 0; i < 20_000; i++) oneTask(i); // warm up (JIT)
const rounds = [round(), round(), round(), round(), round()];
rounds.sort((a, b) => a - b);
console.log(
  JSON.stringify(
    {
      tasks: TASKS,
      ns_per_task: rounds.map((r) => Math.round(r)),
      median_us_per_task: Number((rounds[2] / 1000).toFixed(2)),
    },
    null,
    2,
  ),
);
