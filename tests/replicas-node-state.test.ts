// Node state and config_reload across two tower replicas on one PostgreSQL schema: a node linked
// to replica A reports its cron jobs there and list_cron_jobs on B answers them; ReloadNodeConfig
// called on B reaches the link on A (fleet.deliver through the replication relay) and B sees the
// node's config.reload answer (published on A) through the event relay.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { NodeService, type LinkResponse, CronKind, ReloadStatus } from "../gen/ep/tower/v1/fleet_pb.js";
import { tempHome, type TestTower, useCleanups, waitFor } from "./harness.js";
import { freshSchema, requirePg, skipPg, startReplica } from "./replicas-harness.js";
import { timestampOf, isoOf } from "../common/vocab.js";
import { durationFromMs } from "@bufbuild/protobuf/wkt";

requirePg("replicas-node-state");

const cleanup = useCleanups();

async function replicas(n: number): Promise<TestTower[]> {
  const schema = await freshSchema();
  cleanup(() => schema.drop());
  const home = tempHome("ep-rep-state-");
  cleanup(() => home.cleanup());
  const towers: TestTower[] = [];
  for (let i = 0; i < n; i++) {
    const t = await startReplica(schema, home.dir);
    cleanup(() => t.close());
    towers.push(t);
  }
  return towers;
}

describe.skipIf(skipPg)("node state and config_reload across replicas", () => {
  it("B answers A's node report and relays ReloadNodeConfig to the link on A, waiting for the answer", async () => {
    const [a, b] = await replicas(2);
    const reg = await a.client(NodeService).registerNode({ hostname: "worker-1" });
    const nodeId = reg.node!.id;
    const asNode = createClient(
      NodeService,
      createConnectTransport({
        baseUrl: a.url,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${reg.token}`), next(req))],
      }),
    );

    // the node: answers config_reload with a config.reload event naming the request, like epd does
    const ac = new AbortController();
    const got: LinkResponse[] = [];
    const stream = (async () => {
      try {
        for await (const m of asNode.link({ attachSecret: "s" }, { signal: ac.signal })) {
          got.push(m);
          if (m.command.case === "configReload") {
            await asNode.publishEvents({
              events: [
                {
                  type: "matrix",
                  name: "config.reload",
                  status: "failed",
                  payload: {
                    request_id: m.command.value.requestId,
                    source: "tower",
                    status: "failed",
                    results: ["cron.toml: 1 error; the running jobs were kept"],
                    errors: [{ file: "/h/cron.toml", line: 4, field: "schedule", item: "x", message: "bad" }],
                  },
                },
              ],
            });
          }
        }
      } catch {
        // aborted below
      }
    })();
    await waitFor(() => got.some((m) => m.command.case === "hello"));
    await waitFor(
      async () =>
        (await b.tower.deps.store.getMeta(`link:${nodeId}`))?.startsWith(a.tower.replication!.replicaId) === true,
    );

    const reported = await asNode.reportNodeState({
      cronJobs: [
        {
          name: "nightly",
          kind: CronKind.CRON,
          schedule: "0 3 * * *",
          dispatch: "bash",
          prompt: "true",
          nextFireAt: timestampOf("2030-01-01T03:00:00.000Z"),
        },
      ],
    });
    const onB = await b.api("POST", "/mcp/call", { tool: "list_cron_jobs", arguments: {} });
    expect(onB.body.result.nodes).toMatchObject([
      {
        node_id: nodeId,
        reported_at: isoOf(reported.reportedAt),
        jobs: [{ name: "nightly", next_fire_at: "2030-01-01T03:00:00.000Z" }],
      },
    ]);

    expect(b.tower.services.fleet.isLinked(nodeId)).toBe(false);
    const res = await b.client(NodeService).reloadNodeConfig({ nodeId, wait: durationFromMs(10_000) });
    expect(res).toMatchObject({
      status: ReloadStatus.FAILED,
      results: ["cron.toml: 1 error; the running jobs were kept"],
      errors: [{ file: "/h/cron.toml", line: 4, field: "schedule", item: "x", message: "bad" }],
    });
    expect(res.requestId).toMatch(/^rld_/);
    expect(res.eventId).toBeGreaterThan(0n);
    expect(got.filter((m) => m.command.case === "configReload")).toHaveLength(1);

    // not an admin: refused; a node gone: node_offline
    await expect(b.client(NodeService, reg.token).reloadNodeConfig({ nodeId })).rejects.toThrow();
    ac.abort();
    await stream;
    await waitFor(async () => (await b.tower.deps.store.getNode(nodeId))?.status === "offline");
    await expect(b.client(NodeService).reloadNodeConfig({ nodeId })).rejects.toThrow(/not connected/);
  }, 30_000);
});
