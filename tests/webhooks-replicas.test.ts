// Webhooks with two tower replicas on one PostgreSQL schema (docs/webhooks.md, "Never on the
// work path"): tasks failing on both replicas reach the receiver once each, whichever replica read
// the event log and whichever took the delivery; a receiver that fails at first still gets each
// event once in the end, retried by either replica.
import { describe, expect, it } from "vitest";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WebhookDeliveryStatus, WebhookService } from "../gen/ep/tower/v1/webhooks_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { tempHome, useCleanups, waitFor, type TestTower } from "./harness.js";
import { freshSchema, requirePg, skipPg, startReplica } from "./replicas-harness.js";
import { startReceiver, verifySignature } from "./webhook-receiver.js";

requirePg("webhooks-replicas");

const cleanup = useCleanups();
const ENV = {
  EP_SECRET_KEY: "replicas share it",
  EP_WEBHOOK_BACKOFF_MS: "20",
  EP_WEBHOOK_BACKOFF_MAX_MS: "40",
  EP_WEBHOOK_POLL_MS: "20",
  EP_WEBHOOK_MAX_ATTEMPTS: "10",
};

async function twoReplicas(): Promise<TestTower[]> {
  const schema = await freshSchema();
  cleanup(() => schema.drop());
  const home = tempHome("ep-hooks-rep-");
  cleanup(() => home.cleanup());
  const towers: TestTower[] = [];
  for (let i = 0; i < 2; i++) {
    const t = await startReplica(schema, home.dir, ENV);
    cleanup(() => t.close());
    towers.push(t);
  }
  return towers;
}

describe.skipIf(skipPg)("webhooks on two replicas", () => {
  it("each failed task reaches the receiver once, from whichever replica, retried through failures", async () => {
    const [a, b] = await twoReplicas();
    // the first 10 requests fail: retries happen while both replicas take due deliveries
    const r = await startReceiver((n) => (n < 10 ? 500 : 200));
    cleanup(() => r.close());
    const work = a.client(WorkService);
    const domainId = (await work.createDomain({ name: "rep-hooks" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
    const node = await a.client(NodeService).registerNode({ hostname: "rep-node", domainIds: [domainId] });
    const agentId = (
      await a.client(AgentService, node.token).enrollAgent({ domainId, runtime: Runtime.SHELL, name: "rep-agent" })
    ).agent!.id;
    const made = await b.client(WebhookService).createWebhook({ domainId, url: r.url, events: ["task.failed"] });
    const TASKS = 20;
    const failed: string[] = [];
    for (let i = 0; i < TASKS; i++) {
      const t = i % 2 ? a : b;
      await t
        .client(WorkService)
        .createTask({ missionId, title: `t${i}`, runtime: Runtime.SHELL, input: { command: "false" } });
      const held = (await t.client(WorkService, node.token).claimTask({ agentId })).task!;
      await t.client(WorkService, node.token).failTask({ taskId: held.id, agentId, result: { error: "exit 1" } });
      failed.push(held.id);
    }
    const list = () =>
      a.client(WebhookService).listWebhookDeliveries({ domainId, webhookId: made.webhook!.id, pageSize: 100 });
    await waitFor(async () => {
      const { deliveries } = await list();
      return deliveries.length === TASKS && deliveries.every((d) => d.status === WebhookDeliveryStatus.SUCCEEDED);
    }, 30_000);
    const { deliveries } = await list();
    // one delivery per event, never two (the unique key, the cursor's compare-and-set)
    expect(new Set(deliveries.map((d) => d.eventId)).size).toBe(TASKS);
    const succeeded = r.received.slice(10);
    const byTask = new Map<string, number>();
    for (const x of succeeded) byTask.set(x.json.event.task_id, (byTask.get(x.json.event.task_id) ?? 0) + 1);
    expect([...byTask.keys()].sort()).toEqual([...failed].sort());
    expect([...byTask.values()].every((n) => n === 1)).toBe(true);
    // each attempt was made by one replica: no delivery was sent twice at the same attempt number
    const seen = new Set<string>();
    for (const x of r.received) {
      const key = `${x.headers["ep-delivery"]}#${x.headers["ep-attempt"]}`;
      expect(seen.has(key)).toBe(false);
      seen.add(key);
      expect(verifySignature(made.secret, x.headers["ep-signature"] as string, x.body)).toBe(true);
    }
    expect(deliveries.reduce((n, d) => n + d.attempts, 0)).toBe(r.received.length);
  }, 60_000);
});
