// epd's session through docs/deploy.md's nginx, in front of two PostgreSQL replicas: on the TLS
// address (HTTP/2 by ALPN, native gRPC to the replicas by grpc_pass) the session is had and
// carries the outcomes; on the plain-HTTP address (HTTP/1.1 only) epd says once that it cannot
// have one and links over HTTP/1.1 instead, and the work flows the same.
import { readFileSync } from "node:fs";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { Runtime, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, registerNode, spawnEpd } from "./epd-harness.js";
import { tempHome, useCleanups, waitFor } from "./harness.js";
import { freshSchema, join, requirePg, skipNginx, skipPg, spawnReplica, startDeployNginx } from "./replicas-harness.js";

requirePg("session through nginx");
const cleanup = useCleanups();
const FALLBACK =
  "the tower does not take a session here (NodeService.Session " +
  "over HTTP/2); linking over HTTP/1.1, one request per outcome";

beforeAll(async () => {
  await buildBinaries();
}, 120_000);

describe.skipIf(skipPg || skipNginx)("the session through the documented nginx", () => {
  it("over TLS the session is had (no fallback) and runs the work; over plain " +
    "HTTP/1.1 epd falls back to the HTTP/1.1 link once, and both run the work", async () => {
    const schema = await freshSchema();
    cleanup(() => schema.drop());
    const h = tempHome("ep-session-nginx-");
    cleanup(() => h.cleanup());
    const towerHome = join(h.dir, "towers");
    const replicas = [
      await spawnReplica(schema, towerHome, { EP_REPLICA_ID: "rep_0" }),
      await spawnReplica(schema, towerHome, { EP_REPLICA_ID: "rep_1" }),
    ];
    cleanup(() => Promise.all(replicas.map((r) => r.kill9())));
    const nginx = await startDeployNginx(
      replicas.map((r) => r.port),
      cleanup,
    );
    const adminToken = readFileSync(join(towerHome, "tower", "admin.token"), "utf8").trim();
    const work = createClient(
      WorkService,
      createConnectTransport({
        baseUrl: nginx.url,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${adminToken}`), next(req))],
      }),
    );

    for (const [name, url] of [
      ["tls", nginx.tlsUrl],
      ["plain", nginx.url],
    ] as const) {
      const domainId = (await work.createDomain({ name: `session-${name}` })).domain!.id;
      const missionId = (await work.createMission({ domainId, title: name })).mission!.id;
      const nodeFile = join(h.dir, `node-${name}.json`);
      await registerNode(nginx.url, adminToken, nodeFile, `w-${name}`);
      const epd = await spawnEpd({
        home: join(h.dir, `node-${name}`),
        nodeFile,
        backendUrl: url,
        env: { NODE_EXTRA_CA_CERTS: nginx.caFile },
      });
      cleanup(() => epd.stop());
      await epd.call("agent.enroll", { domainId, runtime: "shell", name: `sh-${name}` });
      await waitFor(() => epd.logs.some((l) => l.msg === "link connected"), 20_000);
      const ids: string[] = [];
      for (let i = 0; i < 10; i++)
        ids.push(
          (
            await work.createTask({
              missionId,
              title: `t${i}`,
              runtime: Runtime.SHELL,
              input: { command: `echo ${name}-${i}` },
            })
          ).task!.id,
        );
      await waitFor(
        async () =>
          (await work.listTasks({ missionId, limit: 100 })).tasks.every((t) => t.status === TaskStatus.SUCCEEDED),
        30_000,
      );
      const fallbacks = epd.logs.filter((l) => l.msg === FALLBACK);
      if (name === "tls") expect(fallbacks, "the session over TLS").toEqual([]);
      else expect(fallbacks.length, "one fallback over plain HTTP/1.1").toBe(1);
    }
  }, 120_000);
});
