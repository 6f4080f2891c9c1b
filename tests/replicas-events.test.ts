// Two (or three) in-process towers on one PostgreSQL schema: events committed on one replica
// reach the SSE clients, hub listeners and long-polling claimers of the others exactly once and
// in order; concurrent writers on both replicas never make a follower skip an id; node-link
// commands (signal, supervise, attach proof) reach the replica holding the link; the bootstrap
// admin token is made once; cluster locks exclude each other; work is pushed by the replica holding the link.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../common/log.js";
import { AgentService, NodeService, type LinkResponse } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { createTower } from "../tower/app.js";
import { bootstrap } from "../tower/bootstrap.js";
import { loadConfig } from "../tower/config.js";
import { commit } from "../tower/domain/event-hub.js";
import { attachProof } from "../tower/edges/attach/attach-ws.js";
import { openStore } from "../tower/store/open-store.js";
import { WatchedClock } from "../test-support/watched-clock.js";
import { tempHome, type TestTower, useCleanups, waitFor } from "./harness.js";
import {
  followSse,
  freshSchema,
  gapsAndDuplicates,
  requirePg,
  skipPg,
  startReplica,
  type Schema,
} from "./replicas-harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { durationFromMs } from "@bufbuild/protobuf/wkt";

requirePg("replicas-events");

const cleanup = useCleanups();

async function replicas(
  n: number,
  env: Record<string, string> = {},
  clock?: WatchedClock,
): Promise<{ schema: Schema; towers: TestTower[] }> {
  const schema = await freshSchema();
  cleanup(() => schema.drop());
  const home = tempHome("ep-rep-");
  cleanup(() => home.cleanup());
  const towers: TestTower[] = [];
  for (let i = 0; i < n; i++) {
    const t = await startReplica(schema, home.dir, env, clock);
    cleanup(() => t.close());
    towers.push(t);
  }
  return { schema, towers };
}

async function storeIds(t: TestTower, afterId: number): Promise<number[]> {
  return (await t.tower.deps.store.listEvents({ afterId, limit: 1_000_000 })).map((e) => e.id);
}

describe.skipIf(skipPg)("replicas: events across towers", () => {
  it("an SSE client and a long-polling claimer on B hear what A commits", async () => {
    const clock = new WatchedClock();
    const { towers } = await replicas(2, {}, clock);
    const [a, b] = towers;
    const start = await a.tower.deps.store.lastEventId();
    const sse = followSse([b.url], b.adminToken, { afterId: start });
    cleanup(() => sse.close());

    const workA = a.client(WorkService);
    const domainId = (await workA.createDomain({ name: "rep" })).domain!.id;
    const missionId = (await workA.createMission({ domainId, title: "m" })).mission!.id;
    const agentId = (await b.client(AgentService).enrollAgent({ domainId, runtime: Runtime.SHELL })).agent!.id;

    // a long poll on B, a task created on A: B's claimer wakes from A's commit
    const figures: number[] = [];
    for (let i = 0; i < 11; i++) {
      const waiting = clock.pendingFor(9_000, 10_000);
      const claim = b.client(WorkService).claimTask({ agentId, wait: durationFromMs(10_000) });
      // the claim is waiting on B (its timer is set)
      await waitFor(() => clock.pendingFor(9_000, 10_000) > waiting, 10_000, 5);
      const t0 = performance.now();
      const created = (await workA.createTask({ missionId, title: `t${i}` })).task!;
      const claimed = await claim;
      if (i > 0) figures.push(performance.now() - t0); // the first warms up statements and connections
      expect(claimed.task?.id).toBe(created.id);
    }
    const sorted = [...figures].sort((x, y) => x - y);
    console.log(
      `replicas-events: create on A -> claim answered on B (long poll): p50 ${sorted[5].toFixed(1)} ` +
        `ms, max ${sorted.at(-1)!.toFixed(1)} ms (${figures.map((f) => f.toFixed(0)).join(", ")})`,
    );
    expect(sorted[5]).toBeLessThan(250);
    expect(sorted.at(-1)!).toBeLessThan(1000);

    const expected = await storeIds(a, start);
    await waitFor(() => sse.ids.length >= expected.length, 5000);
    expect(sse.ids).toEqual(expected);
    expect(sse.rows.filter((r) => r.name === "task.claimed")).toHaveLength(11);
  }, 30_000);

  it("concurrent writers on two replicas: every hub and SSE " +
    "client sees every id once, SSE in id order, across resumes", async () => {
    const { towers } = await replicas(2);
    const [a, b] = towers;
    const start = await a.tower.deps.store.lastEventId();
    const hubIds = towers.map((t) => {
      const got: number[] = [];
      t.tower.deps.hub.subscribe((rows) => rows.forEach((r) => got.push(r.id)));
      return got;
    });
    const onA = followSse([a.url], a.adminToken, { afterId: start });
    const onB = followSse([b.url], b.adminToken, { afterId: start });
    // this one hops between the replicas, resuming with Last-Event-ID each time
    const hopping = followSse([a.url, b.url], a.adminToken, { afterId: start, retryMs: 5 });
    cleanup(() => (onA.close(), onB.close(), hopping.close()));
    await waitFor(() => onA.opened > 0 && onB.opened > 0 && hopping.opened > 0);

    const WRITERS = 4;
    const COMMITS = 40;
    const writer = (t: TestTower, w: number) => async () => {
      for (let i = 0; i < COMMITS; i++) {
        await commit(t.tower.deps, async (_tx, emit) => {
          for (let j = 0; j <= i % 3; j++)
            emit({ type: "matrix", name: "test.tick", status: "ok", payload: { w, i, j } });
        });
        // the hopping client is cut off while the writers run (on a count, not a timer: the
        // writers commit in parallel and may finish within a few milliseconds)
        if (w % 10 === 0 && i % 8 === 7) {
          const made = hopping.connections.length;
          hopping.drop();
          await waitFor(() => hopping.connections.length > made, 5000);
        }
      }
    };
    await Promise.all(towers.flatMap((t, r) => Array.from({ length: WRITERS }, (_, w) => writer(t, r * 10 + w)())));

    const expected = await storeIds(a, start);
    // commits of 1, 2, 3 events in turn
    const perWriter = Array.from({ length: COMMITS }, (_, i) => (i % 3) + 1).reduce((x, y) => x + y, 0);
    expect(expected.length).toBe(2 * WRITERS * perWriter);
    for (const f of [onA, onB, hopping])
      await waitFor(() => f.ids.length >= expected.length || f.ids.at(-1) === expected.at(-1), 10_000);
    for (const [name, f] of [
      ["A", onA],
      ["B", onB],
      ["hopping", hopping],
    ] as const) {
      const check = gapsAndDuplicates(f.ids, expected);
      expect(check, `SSE ${name}`).toEqual({ missing: [], duplicates: [], outOfOrder: 0 });
    }
    expect(hopping.connections.length).toBeGreaterThan(3);
    // relayed across replicas: slower while other suites load the same PostgreSQL
    await waitFor(() => hubIds.every((ids) => ids.length >= expected.length), 15_000);
    for (const ids of hubIds) {
      expect(new Set(ids).size).toBe(ids.length); // exactly once per replica
      expect([...ids].sort((x, y) => x - y)).toEqual(expected);
    }
  }, 60_000);

  it("writers commit in parallel, yet no reader sees an id " +
    "above one still being written; a rolled-back id is crossed", async () => {
    const { towers } = await replicas(2);
    const [a, b] = towers;
    const base = await b.tower.deps.store.lastEventId();
    const hubIds: number[] = [];
    b.tower.deps.hub.subscribe((rows) => hubIds.push(...rows.map((r) => r.id)));
    let release!: () => void;
    let firstIds: number[] = [];
    const first = a.tower.deps.store.transaction(async (tx) => {
      firstIds = (await tx.appendEvents([{ type: "matrix", name: "test.slow" }], new Date().toISOString())).map(
        (e) => e.id,
      );
      await new Promise<void>((r) => (release = r)); // holds its id uncommitted
    });
    await waitFor(() => firstIds.length > 0);
    // the second writer does not wait for the first: it draws a higher id and commits
    const secondIds = await b.tower.deps.store.transaction(async (tx) =>
      (await tx.appendEvents([{ type: "matrix", name: "test.fast" }], new Date().toISOString())).map((e) => e.id),
    );
    expect(secondIds[0]).toBeGreaterThan(firstIds[0]);
    const raw = await b.tower.deps.store.transaction(async (tx) =>
      (await tx.listEvents({ afterId: base })).map((e) => e.id),
    );
    expect(raw).toContain(secondIds[0]); // committed and visible in the table…
    // …but held back by every reader: the store, its newest final id, the filtered reads, the hubs
    expect((await b.tower.deps.store.listEvents({ afterId: base })).map((e) => e.id)).toEqual([]);
    expect(await b.tower.deps.store.lastEventId()).toBe(base);
    expect((await b.tower.deps.store.listEvents({ afterId: base, types: ["matrix"] })).map((e) => e.id)).toEqual([]);
    await b.tower.replication!.catchUp();
    expect(hubIds.filter((id) => id > base)).toEqual([]);
    release();
    await first;
    expect((await b.tower.deps.store.listEvents({ afterId: base })).map((e) => e.id)).toEqual([
      firstIds[0],
      secondIds[0],
    ]);
    await waitFor(() => hubIds.includes(secondIds[0]), 5000);
    expect(hubIds.filter((id) => id > base)).toEqual([firstIds[0], secondIds[0]]);

    // a writer that rolls back after drawing its id: the readers wait while it runs, then go past
    const lastBefore = await b.tower.deps.store.lastEventId();
    let abort!: () => void;
    let doomed: number[] = [];
    const third = a.tower.deps.store
      .transaction(async (tx) => {
        doomed = (await tx.appendEvents([{ type: "matrix", name: "test.doomed" }], new Date().toISOString())).map(
          (e) => e.id,
        );
        await new Promise<void>((r) => (abort = r));
        throw new Error("roll back");
      })
      .catch((err: Error) => err.message);
    await waitFor(() => doomed.length > 0);
    const after = await b.tower.deps.store.transaction(async (tx) =>
      (await tx.appendEvents([{ type: "matrix", name: "test.after" }], new Date().toISOString())).map((e) => e.id),
    );
    expect((await b.tower.deps.store.listEvents({ afterId: lastBefore })).map((e) => e.id)).toEqual([]);
    abort();
    expect(await third).toBe("roll back");
    // crossed by a read once every writer running when the gap was seen has ended (other
    // suites' transactions on the same server can hold that a little)
    await waitFor(async () => (await b.tower.deps.store.listEvents({ afterId: lastBefore })).length > 0, 10_000);
    expect((await b.tower.deps.store.listEvents({ afterId: lastBefore })).map((e) => e.id)).toEqual([after[0]]);
    expect(await b.tower.deps.store.lastEventId()).toBe(after[0]);
    await waitFor(() => hubIds.includes(after[0]), 5000);
    expect(hubIds.filter((id) => id > lastBefore)).toEqual([after[0]]);
  }, 30_000);

  it("a node linked to A gets signal and supervise commands " +
    "sent through B; B asks A for the attach proof", async () => {
    const { towers } = await replicas(2);
    const [a, b] = towers;
    const domainId = (await a.client(WorkService).createDomain({ name: "links" })).domain!.id;
    const reg = await a.client(NodeService).registerNode({ hostname: "worker-1" });
    const nodeId = reg.node!.id;
    const agentId = (
      await a.client(AgentService).enrollAgent({ domainId, runtime: Runtime.SHELL, nodeId, supervised: true })
    ).agent!.id;

    const nodeTransport = createConnectTransport({
      baseUrl: a.url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${reg.token}`), next(req))],
    });
    const ac = new AbortController();
    const got: LinkResponse[] = [];
    const stream = (async () => {
      try {
        for await (const m of createClient(NodeService, nodeTransport).link(
          { attachSecret: "s3cret" },
          { signal: ac.signal },
        ))
          got.push(m);
      } catch {
        // aborted below
      }
    })();
    await waitFor(() => got.some((m) => m.command.case === "hello"));
    await waitFor(
      async () =>
        (await b.tower.deps.store.getMeta(`link:${nodeId}`))?.startsWith(a.tower.replication!.replicaId) === true,
    );

    expect(b.tower.services.fleet.isLinked(nodeId)).toBe(false);
    expect(await b.tower.services.fleet.linkedAnywhere(nodeId)).toBe(true);
    await b.client(AgentService).superviseAgent({ agentId, op: "pause" });
    const prompt = "é".repeat(30_000) + " done"; // larger than one NOTIFY: sent in frames
    await b.client(AgentService).signalAgent({ agentId, prompt });
    const command = <C extends NonNullable<LinkResponse["command"]["case"]>>(c: C) =>
      got.flatMap((m) =>
        m.command.case === c ? [m.command.value as Extract<LinkResponse["command"], { case: C }>["value"]] : [],
      );
    await waitFor(() => command("signal").length > 0);
    expect(command("supervise")[0]).toMatchObject({ agentId, op: "pause" });
    expect(command("signal")[0]).toMatchObject({ agentId, prompt });
    expect(await b.tower.replication!.proof(nodeId, "att_1")).toBe(attachProof("s3cret", "att_1"));
    // an unassigned task created on B reaches the link on A once, assigned to its idle agent
    // (through the event relay, not the command relay)
    const missionId = (await b.client(WorkService).createMission({ domainId, title: "m" })).mission!.id;
    const task = (
      await b
        .client(WorkService)
        .createTask({ missionId, title: "x", runtime: Runtime.SHELL, input: { command: "true" } })
    ).task!;
    await waitFor(() => command("assign").some((a) => a.task?.id === task.id));
    expect(command("assign").filter((a) => a.task?.id === task.id)).toHaveLength(1);

    ac.abort();
    await stream;
    await waitFor(async () => (await b.tower.deps.store.getNode(nodeId))?.status === "offline");
    expect(await b.tower.services.fleet.linkedAnywhere(nodeId)).toBe(false);
    await expect(b.client(AgentService).superviseAgent({ agentId, op: "resume" })).rejects.toThrow(/not connected/);
    expect(await b.tower.replication!.proof(nodeId, "att_2")).toBeUndefined();
  }, 30_000);

  it("a task created on B is pushed once, claimed and started, by A, which holds the idle agent's link", async () => {
    const { towers } = await replicas(2);
    const [a, b] = towers;
    const domainId = (await a.client(WorkService).createDomain({ name: "push" })).domain!.id;
    const reg = await a.client(NodeService).registerNode({ hostname: "pushed-1" });
    const agentId = (
      await a.client(AgentService).enrollAgent({ domainId, runtime: Runtime.SHELL, nodeId: reg.node!.id })
    ).agent!.id;
    const nodeTransport = createConnectTransport({
      baseUrl: a.url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${reg.token}`), next(req))],
    });
    const ac = new AbortController();
    const got: LinkResponse[] = [];
    const stream = (async () => {
      try {
        for await (const m of createClient(NodeService, nodeTransport).link(
          { attachSecret: "s" },
          { signal: ac.signal },
        ))
          got.push(m);
      } catch {
        // aborted below
      }
    })();
    await waitFor(() => got.some((m) => m.command.case === "hello"));
    await waitFor(() => a.tower.services.fleet.wakeTargets(domainId).length === 1);
    const missionId = (await b.client(WorkService).createMission({ domainId, title: "m" })).mission!.id;
    const task = (
      await b
        .client(WorkService)
        .createTask({ missionId, title: "x", runtime: Runtime.SHELL, input: { command: "true" } })
    ).task!;
    const assigned = () => got.flatMap((m) => (m.command.case === "assign" ? [m.command.value] : []));
    await waitFor(() => assigned().some((x) => x.task?.id === task.id));
    expect(assigned()).toHaveLength(1);
    expect(assigned()[0]).toMatchObject({ agentId, task: { id: task.id, claimedBy: agentId, attempts: 1 } });
    expect(assigned()[0].task!.leaseId).not.toBe("");
    const seen = (await b.client(WorkService).getTask({ taskId: task.id })).task!;
    expect(seen.claimedBy).toBe(agentId);
    expect(seen.leaseId).toBe(assigned()[0].task!.leaseId);
    ac.abort();
    await stream;
  }, 30_000);

  it("replicas starting together make one bootstrap admin token; cluster locks exclude each other", async () => {
    const schema = await freshSchema();
    cleanup(() => schema.drop());
    const started = await Promise.all(
      [0, 1, 2].map(async () => {
        const home = tempHome("ep-rep-boot-");
        cleanup(() => home.cleanup());
        const env = { EP_HOME: home.dir, EP_DATABASE_URL: schema.url, EP_SECRET_KEY: "test" };
        const config = loadConfig({ listen: "127.0.0.1:0" }, env);
        const store = await openStore(schema.url);
        const tower = await createTower({ config, store, log: silentLogger });
        cleanup(() => tower.close());
        return { tower, boot: await bootstrap(tower, config.home, config.publicUrl, env) };
      }),
    );
    expect(started.filter((s) => s.boot.adminTokenFile)).toHaveLength(1);
    expect((await started[0].tower.deps.store.listTokens()).filter((t) => t.name === "bootstrap-admin")).toHaveLength(
      1,
    );

    const [r1, r2] = started.map((s) => s.tower.replication!);
    let release!: () => void;
    const held = r1.exclusive("sweep", () => new Promise<string>((r) => (release = () => r("done"))));
    await waitFor(() => release !== undefined); // fn runs only once r1 holds the cluster lock
    expect(await r2.tryExclusive("sweep", async () => "ran")).toBeUndefined();
    release();
    expect(await held).toBe("done");
    expect(await r2.tryExclusive("sweep", async () => "ran")).toBe("ran");
  }, 30_000);
});
