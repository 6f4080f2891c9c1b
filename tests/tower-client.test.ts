// epd's tower clients (unary calls on unary-transport.ts) against a real tower: answers, the
// tower's refusals (read as refusals, with EP's code), and every way a call can fail without the
// tower deciding anything (a closed port, a proxy's HTML error page, a connection reset, a
// deadline, a cancelled call), which must never read as one; a kept-alive connection the server
// reset as a call went out is retried once on a new one.
import { Code, ConnectError } from "@connectrpc/connect";
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toEpError } from "../common/errors.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { startTower, type TestTower } from "./harness.js";
import { refusedByTower } from "../daemon/worker/report.js";
import { createTowerClients } from "../daemon/link/tower-client.js";

const clientAt = (baseUrl: string, token: string) => createTowerClients(baseUrl, token).work;

async function failure(p: Promise<unknown>): Promise<ConnectError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConnectError);
  return err as ConnectError;
}

describe("epd's tower clients", () => {
  let t: TestTower;
  let proxy: Server;
  let proxyUrl: string;
  beforeAll(async () => {
    t = await startTower();
    // what a reverse proxy answers when the tower behind it is down
    proxy = createServer((_req, res) =>
      res.writeHead(502, { "content-type": "text/html" }).end("<html>Bad Gateway</html>"),
    );
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => proxy?.close(r));
    await t?.close();
  });

  it("calls the tower and reads its answer", async () => {
    const work = clientAt(t.url, t.adminToken);
    const domain = (await work.createDomain({ name: "lean" })).domain!;
    expect((await work.getDomain({ domainId: domain.id })).domain?.name).toBe("lean");
  });

  it("reads a refusal as the tower's, with EP's code", async () => {
    const err = await failure(clientAt(t.url, t.adminToken).getTask({ taskId: "t_nope" }));
    expect(refusedByTower(err)?.code).toBe("task_not_found");
    const bad = await failure(clientAt(t.url, "ept_not-a-token").listDomains({}));
    expect(toEpError(bad).code).toBe("unauthenticated");
    expect(refusedByTower(bad)).toBeDefined();
  });

  it("a closed port is the transport's failure, not a refusal", async () => {
    const closed = await new Promise<string>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const url = `http://127.0.0.1:${(s.address() as { port: number }).port}`;
        s.close(() => resolve(url));
      });
    });
    const err = await failure(clientAt(closed, t.adminToken).listDomains({}));
    expect(err.code).toBe(Code.Unavailable);
    expect(refusedByTower(err)).toBeUndefined();
  });

  it("a proxy's error page is not a refusal", async () => {
    const err = await failure(clientAt(proxyUrl, t.adminToken).listDomains({}));
    expect(err.code).toBe(Code.Unavailable);
    expect(refusedByTower(err)).toBeUndefined();
  });

  it("a connection reset before the answer is the transport's failure, not a refusal", async () => {
    const resets = createServer((req) => req.socket.resetAndDestroy());
    await new Promise<void>((r) => resets.listen(0, "127.0.0.1", r));
    try {
      const err = await failure(
        clientAt(`http://127.0.0.1:${(resets.address() as { port: number }).port}`, "x").listDomains({}),
      );
      expect(refusedByTower(err)).toBeUndefined();
    } finally {
      await new Promise((r) => resets.close(r));
    }
  });

  it("a kept-alive connection reset as a call is sent: the call goes once more on a new one", async () => {
    // answers the first call and keeps the connection; resets it when the next call arrives on it
    const seen: boolean[] = [];
    const flaky = createServer((req, res) => {
      const reused = (req.socket as { served?: boolean }).served === true;
      seen.push(reused);
      if (reused) return void req.socket.resetAndDestroy();
      (req.socket as { served?: boolean }).served = true;
      res.writeHead(200, { "content-type": "application/proto" }).end();
    });
    await new Promise<void>((r) => flaky.listen(0, "127.0.0.1", r));
    try {
      const work = clientAt(`http://127.0.0.1:${(flaky.address() as { port: number }).port}`, "x");
      await work.listDomains({});
      expect((await work.listDomains({})).domains).toEqual([]);
      expect(seen).toEqual([false, true, false]);
    } finally {
      flaky.closeAllConnections();
      await new Promise((r) => flaky.close(r));
    }
  });

  it("reaches a tower at an IPv6 literal, under a path prefix", async () => {
    const seen: string[] = [];
    const v6 = createServer((req, res) => {
      seen.push(req.url ?? "");
      res.writeHead(200, { "content-type": "application/proto" }).end();
    });
    await new Promise<void>((r) => v6.listen(0, "::1", r));
    try {
      const work = clientAt(`http://[::1]:${(v6.address() as { port: number }).port}/ep/`, "x");
      expect((await work.listDomains({})).domains).toEqual([]);
      expect(seen).toEqual(["/ep/ep.tower.v1.WorkService/ListDomains"]);
    } finally {
      await new Promise((r) => v6.close(r));
    }
  });

  it("a call past its deadline, or cancelled, ends as such", async () => {
    const work = clientAt(t.url, t.adminToken);
    const domainId = (await work.createDomain({ name: "waits" })).domain!.id;
    const agentId = (await t.client(AgentService).enrollAgent({ domainId, runtime: Runtime.SHELL, name: "a" })).agent!
      .id;
    // a claim that waits for work (nothing is queued) outlives a short deadline
    const late = await failure(work.claimTask({ agentId, wait: { seconds: 5n } }, { timeoutMs: 100 }));
    expect(late.code).toBe(Code.DeadlineExceeded);
    expect(refusedByTower(late)).toBeUndefined();
    const ac = new AbortController();
    ac.abort();
    const cancelled = await failure(work.listDomains({}, { signal: ac.signal }));
    expect(cancelled.code).toBe(Code.Canceled);
  });
});
