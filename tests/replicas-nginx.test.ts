// The nginx configuration of docs/deploy.md, run for real: nginx (a non-daemon child with a temp
// prefix) in front of two in-process replicas on one PostgreSQL schema. SSE and a WebSocket go
// through it and see events committed on both replicas in id order; a Connect call and a REST
// call go through it; when one replica stops, the SSE client resumes through nginx on the other
// with no gap.
import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { commit } from "../tower/domain/event-hub.js";
import { tempHome, type TestTower, useCleanups, waitFor } from "./harness.js";
import {
  followSse,
  freshSchema,
  gapsAndDuplicates,
  NGINX,
  requirePg,
  skipNginx,
  skipPg,
  startDeployNginx,
  startReplica,
} from "./replicas-harness.js";

requirePg("replicas-nginx");

const cleanup = useCleanups();
if (!NGINX)
  console.log(
    `replicas-nginx: ${process.env.CI ? "FAILING" : "skipping"}: nginx is not installed (apt-get install nginx-light)`,
  );
const startNginx = (upstreams: number[]) => startDeployNginx(upstreams, cleanup);

describe.skipIf(skipPg || skipNginx)("replicas: nginx in front (docs/deploy.md)", () => {
  it("streams SSE and a WebSocket through nginx from two replicas, and SSE fails over when one stops", async () => {
    expect(NGINX, "nginx must be installed under CI (.ci/run installs nginx-light)").toBeDefined();
    const schema = await freshSchema();
    cleanup(() => schema.drop());
    const home = tempHome("ep-rep-nginx-");
    cleanup(() => home.cleanup());
    const a: TestTower = await startReplica(schema, home.dir);
    cleanup(() => a.close());
    const b: TestTower = await startReplica(schema, home.dir);
    let bClosed = false;
    cleanup(() => (bClosed ? undefined : b.close()));
    const port = (u: string) => Number(new URL(u).port);
    const nginx = await startNginx([port(a.url), port(b.url)]);
    const token = a.adminToken;
    const start = await a.tower.deps.store.lastEventId();

    const sse = followSse([nginx.url], token, { afterId: start, retryMs: 100 });
    cleanup(() => sse.close());
    const wsIds: number[] = [];
    const ws = new WebSocket(`${nginx.url.replace("http", "ws")}/events/ws?last_event_id=${start}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    cleanup(() => ws.terminate());
    ws.on("message", (data) => {
      const m = JSON.parse(String(data)) as { id?: number };
      if (typeof m.id === "number") wsIds.push(m.id);
    });
    await new Promise<void>((resolve, reject) => (ws.once("open", () => resolve()), ws.once("error", reject)));

    // REST and Connect through nginx as well
    const rest = await fetch(`${nginx.url}/domains`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "via-nginx" }),
    });
    expect(rest.status).toBe(201);
    const { createClient } = await import("@connectrpc/connect");
    const { createConnectTransport } = await import("@connectrpc/connect-node");
    const viaNginx = createClient(
      WorkService,
      createConnectTransport({
        baseUrl: nginx.url,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
      }),
    );
    expect((await viaNginx.listDomains({})).domains.map((d) => d.name)).toContain("via-nginx");

    // events committed on both replicas, one at a time, each timed to its arrival through nginx
    const latencies: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t = i % 2 ? b : a;
      const t0 = performance.now();
      const [row] = await commit(t.tower.deps, async (_tx, emit) =>
        emit({ type: "matrix", name: "test.tick", status: "ok", payload: { i } }),
      ).then(async () => [await t.tower.deps.store.lastEventId()]);
      await waitFor(() => sse.arrivals.has(row) && wsIds.includes(row), 5000, 1);
      latencies.push(sse.arrivals.get(row)! - t0);
    }
    latencies.sort((x, y) => x - y);
    console.log(
      `replicas-nginx: commit on a replica -> SSE event through nginx: p50 ` +
        `${latencies[10].toFixed(1)} ms, max ${latencies.at(-1)!.toFixed(1)} ms`,
    );

    let expected = (await a.tower.deps.store.listEvents({ afterId: start, limit: 100_000 })).map((e) => e.id);
    await waitFor(() => sse.ids.at(-1) === expected.at(-1) && wsIds.at(-1) === expected.at(-1), 5000);
    expect(gapsAndDuplicates(sse.ids, expected)).toEqual({ missing: [], duplicates: [], outOfOrder: 0 });
    expect(gapsAndDuplicates(wsIds, expected)).toEqual({ missing: [], duplicates: [], outOfOrder: 0 });

    // one replica stops: SSE clients it served reconnect through nginx to the other and resume.
    // nginx alternates between the upstreams, so of four clients opened in a row some are on B.
    const more = [0, 1, 2, 3].map(() => followSse([nginx.url], token, { afterId: start, retryMs: 100 }));
    cleanup(() => more.forEach((f) => f.close()));
    await waitFor(() => more.every((f) => f.ids.at(-1) === expected.at(-1)), 5000);
    bClosed = true;
    await b.close();
    for (let i = 0; i < 5; i++)
      await commit(a.tower.deps, async (_tx, emit) =>
        emit({ type: "matrix", name: "test.after", status: "ok", payload: { i } }),
      );
    expected = (await a.tower.deps.store.listEvents({ afterId: start, limit: 100_000 })).map((e) => e.id);
    for (const f of [sse, ...more]) {
      await waitFor(() => f.ids.at(-1) === expected.at(-1), 10_000);
      expect(gapsAndDuplicates(f.ids, expected)).toEqual({ missing: [], duplicates: [], outOfOrder: 0 });
    }
    expect([sse, ...more].filter((f) => f.connections.length > 1).length).toBeGreaterThan(0);
  }, 60_000);
});
