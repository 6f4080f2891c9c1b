// Two built ep-tower processes on one PostgreSQL schema behind a fail-over TCP balancer, and
// the built epd linked through it. A task submitted on replica B reaches the daemon linked to
// replica A through A's link (the event relay carries the wake-up); an SSE client on B sees
// what A writes; after `kill -9` of A the daemon relinks to B, every task runs exactly once
// (one claim each, none lost), and an SSE client that followed A resumes on B with no gap.
import { statusWord } from "../test-support/words.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, registerNode, spawnEpd } from "./epd-harness.js";
import { tempHome, useCleanups, waitFor } from "./harness.js";
import {
  failoverBalancer,
  followSse,
  freshSchema,
  gapsAndDuplicates,
  join,
  requirePg,
  skipPg,
  spawnReplica,
} from "./replicas-harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

requirePg("replicas-failover");

const cleanup = useCleanups();

beforeAll(async () => {
  if (!skipPg) await buildBinaries();
}, 120_000);

function clients(url: string, token: string) {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
  });
  return Object.assign(createClient(WorkService, transport), { events: createClient(EventService, transport) });
}

describe.skipIf(skipPg)("replicas: fail-over with a real epd", () => {
  it("B's task wakes the daemon on A; kill -9 A: the daemon " +
    "relinks to B, nothing lost or claimed twice, SSE resumes on B", async () => {
    const schema = await freshSchema();
    cleanup(() => schema.drop());
    const home = tempHome("ep-rep-fo-");
    cleanup(() => home.cleanup());
    const towerHome = join(home.dir, "towers");
    const a = await spawnReplica(schema, towerHome, { EP_REPLICA_ID: "rep_a" });
    cleanup(() => a.kill9());
    const b = await spawnReplica(schema, towerHome, { EP_REPLICA_ID: "rep_b" });
    cleanup(() => b.stop());
    const adminToken = readFileSync(join(towerHome, "tower", "admin.token"), "utf8").trim();
    const lb = await failoverBalancer([a.port, b.port]);
    cleanup(() => lb.close());

    const onA = clients(a.url, adminToken);
    const onB = clients(b.url, adminToken);
    const domainId = (await onA.createDomain({ name: "fo" })).domain!.id;
    const missionId = (await onA.createMission({ domainId, title: "m" })).mission!.id;
    const start = (await onB.listTasks({ domainId })).tasks.length; // warms B's statements
    expect(start).toBe(0);

    const nodeFile = join(home.dir, "etc", "node.json");
    const { nodeId } = await registerNode(lb.url, adminToken, nodeFile);
    const epd = await spawnEpd({
      home: join(home.dir, "node"),
      nodeFile,
      backendUrl: lb.url,
      env: { EP_POLL_MS: "600000" },
    });
    cleanup(() => epd.stop());
    for (let i = 0; i < 2; i++) await epd.call("agent.enroll", { domainId, runtime: "shell", name: `sh${i}` });
    expect(lb.open().get(a.port)).toBeGreaterThan(0);

    // SSE: one client on B directly, one through the balancer (on A until A dies)
    const firstId = 0; // both replay the whole log first, then follow live
    const sseB = followSse([b.url], adminToken, { afterId: firstId });
    const sseLb = followSse([lb.url], adminToken, { afterId: firstId, retryMs: 200 });
    cleanup(() => (sseB.close(), sseLb.close()));
    await waitFor(() => sseB.ids.length > 0 && sseLb.ids.length > 0);

    // 1. wake-up across replicas: submitted on B, claimed by the daemon linked to A
    const wake: number[] = [];
    for (let i = 0; i < 6; i++) {
      const t0 = performance.now();
      const task = (
        await onB.createTask({ missionId, title: `w${i}`, runtime: Runtime.SHELL, input: { command: "true" } })
      ).task!;
      await waitFor(() => sseB.rows.some((r) => r.task_id === task.id && r.name === "task.claimed"), 10_000, 2);
      const claimedAt = sseB.arrivals.get(
        sseB.rows.find((r) => r.task_id === task.id && r.name === "task.claimed")!.id,
      )!;
      if (i > 0) wake.push(claimedAt - t0);
      await waitFor(async () => (await onB.getTask({ taskId: task.id })).task!.status === TaskStatus.SUCCEEDED, 10_000);
    }
    const sorted = [...wake].sort((x, y) => x - y);
    console.log(
      `replicas-failover: submit on B -> claimed by epd linked to A ` +
        `(seen on B's SSE): p50 ${sorted[2].toFixed(1)} ms, max ` +
        `${sorted.at(-1)!.toFixed(1)} ms (${wake.map((w) => w.toFixed(0)).join(", ")})`,
    );
    // the relay, not the poll (10 min here), woke the daemon; the latency itself is bench/'s business,
    // and a loaded CI machine (two cores, the rest of the suite) must not fail this
    expect(sorted[2]).toBeLessThan(1000);
    // the daemon's link is on A: the wake-up went B -> PostgreSQL -> A -> link
    expect((await onB.listTasks({ domainId })).tasks.every((t) => t.status === TaskStatus.SUCCEEDED)).toBe(true);
    expect(lb.open().get(a.port)).toBeGreaterThan(0);

    // 2. two tasks running when A dies, more submitted on B meanwhile
    const running: string[] = [];
    for (let i = 0; i < 2; i++)
      running.push(
        (
          await onB.createTask({
            missionId,
            title: `r${i}`,
            runtime: Runtime.SHELL,
            input: { command: "sleep 1.5; echo ran" },
          })
        ).task!.id,
      );
    await waitFor(
      async () =>
        (await Promise.all(running.map(async (id) => (await onB.getTask({ taskId: id })).task!.status))).every(
          (s) => s === TaskStatus.RUNNING,
        ),
      10_000,
    );
    const seenBeforeKill = sseLb.ids.length;
    await a.kill9();
    const later: string[] = [];
    for (let i = 0; i < 6; i++)
      later.push(
        (await onB.createTask({ missionId, title: `l${i}`, runtime: Runtime.SHELL, input: { command: `echo l${i}` } }))
          .task!.id,
      );

    const all = [...running, ...later];
    await waitFor(
      async () =>
        (await Promise.all(all.map(async (id) => (await onB.getTask({ taskId: id })).task!.status))).every(
          (s) => s === TaskStatus.SUCCEEDED,
        ),
      45_000,
    ).catch(async (err) => {
      const st = await Promise.all(all.map(async (id) => `${id}:${(await onB.getTask({ taskId: id })).task!.status}`));
      throw new Error(`${(err as Error).message}: ${st.join(" ")}\n${epd.stderr().slice(-3000)}`);
    });
    expect((await epd.call<{ link: string }>("daemon.status")).link).toBe("connected");
    expect(lb.open().get(b.port)).toBeGreaterThan(0);
    expect((await fetch(`${b.url}/readyz`)).ok).toBe(true);

    // exactly one claim per task, every task succeeded once
    const events = (await onB.events.listEvents({ limit: 1000 } as never)).events;
    const tasks = (await onB.listTasks({ domainId })).tasks;
    expect(tasks).toHaveLength(14);
    for (const t of tasks) {
      expect(statusWord(t.status), t.id).toBe("succeeded");
      expect(
        events.filter((e) => e.taskId === t.id && e.name === "task.claimed"),
        t.id,
      ).toHaveLength(1);
      expect(
        events.filter((e) => e.taskId === t.id && e.name === "task.succeeded"),
        t.id,
      ).toHaveLength(1);
      expect(t.attempts, t.id).toBe(1);
    }
    expect((await onB.getTask({ taskId: running[0] })).task!.result!.output).toContain("ran");

    // SSE: the client on B saw everything; the one behind the balancer resumed on B with no gap.
    // The daemon goes on writing (agent.state after the last runs), so each client may be past
    // the snapshot: every id up to the snapshot's last, and whatever later ids it got, must be
    // the log's ids in order, each once.
    const expected = events.map((e) => Number(e.id)).filter((id) => id > firstId);
    const last = expected.at(-1)!;
    await waitFor(() => (sseB.ids.at(-1) ?? 0) >= last && (sseLb.ids.at(-1) ?? 0) >= last, 10_000).catch((err) => {
      throw new Error(
        `${(err as Error).message}: the log ends at ${last}, B's client ` +
          `at ${sseB.ids.at(-1)}, the balancer's at ${sseLb.ids.at(-1)}`,
      );
    });
    // what each client got so far, then the log: everything a client got was committed before
    const received = [[...sseB.ids], [...sseLb.ids]];
    const log = (await onB.events.listEvents({ limit: 2000 } as never)).events
      .map((e) => Number(e.id))
      .filter((id) => id > firstId);
    for (const got of received) {
      const upTo = log.filter((id) => id <= got.at(-1)!);
      expect(upTo.slice(0, expected.length)).toEqual(expected);
      expect(gapsAndDuplicates(got, upTo)).toEqual({ missing: [], duplicates: [], outOfOrder: 0 });
      expect(
        got.filter((id) => !upTo.includes(id)),
        "ids not in the log",
      ).toEqual([]);
    }
    expect(sseLb.connections.length).toBeGreaterThan(1);
    expect(sseLb.ids.length).toBeGreaterThan(seenBeforeKill);
    expect(await fetch(`${b.url}/readyz`).then((r) => r.ok)).toBe(true);
    expect(
      (await onB.events.listEvents({ limit: 1000 } as never)).events.filter(
        (e) => e.name === "node.online" && e.payload?.node_id === nodeId,
      ).length,
    ).toBeGreaterThanOrEqual(2);
  }, 120_000);
});
