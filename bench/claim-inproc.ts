// bench/claim.ts's loop without HTTP: the same three calls per task (create, claim with a 1 s long
// poll, complete) made straight on the tower's domain services in this process, as its admin, with
// 4 submitters and 8 agents. What it costs beside bench/claim.ts's tower CPU per task is what the
// HTTP layer (node:http, fastify, auth, the REST codec) costs.
//   node scripts/run-ts.mjs bench/claim-inproc.ts [tasks, default 5000]
// Prints tasks, seconds and this process's CPU per task (all threads).
import { create } from "@bufbuild/protobuf";
import { startTower } from "../tests/harness.js";
import { INTERNAL_CALLER } from "../tower/domain/caller.js";
import * as wpb from "../gen/ep/tower/v1/work_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
const t = await startTower();
const work = t.tower.services.work;
const c = INTERNAL_CALLER;
const domainId = (await work.createDomain(c, create(wpb.CreateDomainRequestSchema, { name: "b" }))).domain!.id;
const missionId = (await work.createMission(c, create(wpb.CreateMissionRequestSchema, { domainId, title: "m" })))
  .mission!.id;
const node = await t.client(NodeService).registerNode({ hostname: "h" });
const agents: string[] = [];
for (let i = 0; i < 8; i++)
  agents.push(
    (
      await t
        .client(AgentService)
        .enrollAgent({ nodeId: node.node!.id, domainId, runtime: Runtime.SHELL, name: `a${i}` })
    ).agent!.id,
  );
const N = Number(process.argv[2] ?? 5000);
const cpu0 = process.cpuUsage();
const t0 = performance.now();
let done = 0;
await Promise.all([
  ...[0, 1, 2, 3].map(async () => {
    for (let i = 0; i < N / 4; i++)
      await work.createTask(
        c,
        create(wpb.CreateTaskRequestSchema, { missionId, title: `t${i}`, input: { command: "true" } }),
      );
  }),
  ...agents.map(async (agentId) => {
    while (done < N) {
      const r = await work.claimTask(
        c,
        create(wpb.ClaimTaskRequestSchema, { agentId, wait: { seconds: 1n, nanos: 0 } }),
      );
      if (!r.task) continue;
      await work.completeTask(
        c,
        create(wpb.CompleteTaskRequestSchema, { taskId: r.task.id, agentId, result: { output: "ok" } }),
      );
      done++;
    }
  }),
]);
const cpu = process.cpuUsage(cpu0);
console.log(
  JSON.stringify({
    tasks: N,
    seconds: ((performance.now() - t0) / 1000).toFixed(2),
    cpu_ms_per_task: ((cpu.user + cpu.system) / 1000 / N).toFixed(3),
  }),
);
await t.close();
process.exit(0);
