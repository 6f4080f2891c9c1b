// Issue 14, point 5: a transport error on epd's completion report is never a refusal. The
// report stays in the journal and is retried until the tower answers, so a finished task is not
// dropped, left to its lease and run again. Built ep-tower and epd as child processes; the resets
// come from a TCP proxy between them (deterministic), and a tower kill -9 right after the run.
import { statusWord } from "../test-support/words.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, registerNode, spawnEpd, spawnTowerProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, useCleanups, waitFor } from "./harness.js";
import { tcpProxy } from "./tcp-proxy.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const cleanup = useCleanups();

beforeAll(async () => {
  await buildBinaries();
}, 60_000);

/**
 * A proxy that resets (TCP RST) the first `times` connections carrying bytes that include
 * `marker`: the task's output, so the connection carrying its outcome — a CompleteTask request, or
 * the session's HTTP/2 stream with the outcome message on it.
 */
async function resettingProxy(targetPort: number, marker: string, times: number) {
  let left = times;
  const proxy = await tcpProxy(targetPort, ({ client, upstream }) => {
    client.on("data", (chunk: Buffer) => {
      if (left > 0 && chunk.includes(marker)) {
        left--;
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      upstream.write(chunk);
    });
    upstream.pipe(client);
  });
  return { ...proxy, resetsLeft: () => left };
}

async function setup(home: string, tower: TowerProcess) {
  const nodeFile = join(home, "etc", "node.json");
  await registerNode(tower.url, tower.adminToken, nodeFile);
  const transport = createConnectTransport({
    baseUrl: tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))],
  });
  const work = createClient(WorkService, transport);
  const domainId = (await work.createDomain({ name: "report" })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  return { nodeFile, work, domainId, missionId };
}

const runsIn = (file: string) =>
  existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean).length : 0;

describe("completion reports across transport failures", () => {
  // the session carries the outcome up its HTTP/2 stream; the HTTP/1.1 link leaves it to CompleteTask
  it.each(["session", "http1"])(
    "a reset connection while reporting is retried, and the task runs once (EP_LINK=%s)",
    async (link) => {
      const h = tempHome("ep-report-");
      cleanup(() => h.cleanup());
      const tower = await spawnTowerProcess(h.dir, { EP_LEASE_MS: "3000" });
      cleanup(() => tower.stop());
      const s = await setup(h.dir, tower);
      const proxy = await resettingProxy(tower.port, "ran-and-reported", 2);
      cleanup(() => proxy.close());
      const epd = await spawnEpd({
        home: h.dir,
        nodeFile: s.nodeFile,
        backendUrl: proxy.url,
        env: { EP_POLL_MS: "500", EP_LINK: link },
      });
      cleanup(() => epd.stop());
      const { jsonRpcCall } = await import("../daemon/mgmt/client.js");
      await jsonRpcCall(join(h.dir, "epd", "mgmt.sock"), "agent.enroll", {
        domainId: s.domainId,
        runtime: "shell",
        name: "runner",
      });
      const counter = join(h.dir, "runs.txt");
      const task = (
        await s.work.createTask({
          missionId: s.missionId,
          title: "once",
          runtime: Runtime.SHELL,
          input: { command: `echo ran >> ${counter}; echo ran-and-reported` },
        })
      ).task!;
      let status = "";
      await waitFor(async () => {
        status = statusWord((await s.work.getTask({ taskId: task.id })).task!.status);
        return status === "succeeded" || status === "failed";
      }, 30_000);
      expect(proxy.resetsLeft()).toBe(0); // both reports were cut
      expect(status).toBe("succeeded");
      // a dropped report leaves the task running until its lease expires; it is then run again and
      // succeeds on attempt 2. A succeeded task is final, so attempt 1 and one run settle it.
      const got = (await s.work.getTask({ taskId: task.id })).task!;
      expect({ status: got.status, attempts: got.attempts, runs: runsIn(counter) }).toEqual({
        status: TaskStatus.SUCCEEDED,
        attempts: 1,
        runs: 1,
      });
    },
    60_000,
  );

  it("a tower killed with -9 right after the run finished: the task completes once after the restart", async () => {
    const h = tempHome("ep-report-");
    cleanup(() => h.cleanup());
    let tower = await spawnTowerProcess(h.dir, { EP_LEASE_MS: "4000" });
    const port = tower.port;
    cleanup(() => tower.stop());
    const s = await setup(h.dir, tower);
    const epd = await spawnEpd({
      home: h.dir,
      nodeFile: s.nodeFile,
      backendUrl: tower.url,
      env: { EP_POLL_MS: "500" },
    });
    cleanup(() => epd.stop());
    const { jsonRpcCall } = await import("../daemon/mgmt/client.js");
    await jsonRpcCall(join(h.dir, "epd", "mgmt.sock"), "agent.enroll", {
      domainId: s.domainId,
      runtime: "shell",
      name: "runner",
    });
    const counter = join(h.dir, "runs.txt");
    const task = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "once",
        runtime: Runtime.SHELL,
        input: { command: `sleep 0.5; echo ran >> ${counter}` },
      })
    ).task!;
    await waitFor(() => runsIn(counter) === 1, 20_000, 5);
    tower.child.kill("SIGKILL");
    await new Promise((r) => tower.child.once("exit", r));
    tower = await spawnTowerProcess(h.dir, { EP_LEASE_MS: "4000" }, port);
    const transport = createConnectTransport({
      baseUrl: tower.url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))],
    });
    const work = createClient(WorkService, transport);
    await waitFor(async () => (await work.getTask({ taskId: task.id })).task!.status === TaskStatus.SUCCEEDED, 30_000);
    const got = (await work.getTask({ taskId: task.id })).task!;
    expect({ status: got.status, attempts: got.attempts, runs: runsIn(counter) }).toEqual({
      status: TaskStatus.SUCCEEDED,
      attempts: 1,
      runs: 1,
    });
  }, 90_000);
});
