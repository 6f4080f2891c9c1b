// The daemon's local fan-out against a real tower, fake upstreams speaking real SSE, and
// the real Mosquitto broker on 127.0.0.1:1883 (EP_TEST_MQTT_URL).
import { createServer, type Server, type ServerResponse } from "node:http";
import { connect as netConnect } from "node:net";
import mqtt from "mqtt";
import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { FakeClock } from "../test-support/fake-clock.js";
import { silentLogger } from "../common/log.js";
import { createFanout, fanoutEnv, parseLoopbackListen, type Fanout } from "../daemon/fanout/fanout.js";
import { emitEvents, openSse } from "./events-helpers.js";
import { startTower, useCleanups, waitFor } from "./harness.js";

const MQTT_URL = process.env.EP_TEST_MQTT_URL ?? "mqtt://127.0.0.1:1883";

async function brokerReachable(): Promise<boolean> {
  const u = new URL(MQTT_URL);
  return new Promise((resolve) => {
    const s = netConnect(Number(u.port || 1883), u.hostname);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

const cleanup = useCleanups();

/** A fake tower /events/stream: the test decides each answer. */
async function fakeUpstream(
  handler: (res: ServerResponse, n: number, lastEventId: string | undefined) => void,
): Promise<{ url: string; requests: () => number; server: Server }> {
  let n = 0;
  const server = createServer((req, res) => handler(res, ++n, req.headers["last-event-id"] as string | undefined));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanup(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, requests: () => n, server };
}

const HOUR = 3_600_000;

async function startFanout(
  opts: Partial<Parameters<typeof createFanout>[0]> & { upstreamUrl: string },
): Promise<Fanout> {
  const f = createFanout({ token: "ept_test", listen: "127.0.0.1:0", log: silentLogger, ...opts });
  await f.start();
  cleanup(() => f.close());
  return f;
}

describe("local fan-out", () => {
  it("replays the tower's events with their ids over SSE and WebSocket, and resumes local clients by id", async () => {
    const t = await startTower();
    cleanup(async () => {
      const c = t.close();
      t.tower.app.server.closeAllConnections();
      await c;
    });
    const f = await startFanout({ upstreamUrl: t.url, token: t.adminToken });
    await waitFor(() => f.stats().upstream === "connected");
    const sse = await openSse(`${f.url}/events`, {});
    const wsIds: string[] = [];
    const ws = new WebSocket(`${f.url.replace("http", "ws")}/events`);
    ws.on("message", (d) => wsIds.push(String(JSON.parse(d.toString()).id)));
    await new Promise((r) => ws.once("open", r));
    const base = t.tower.deps.hub.lastId;
    await emitEvents(t.tower, 20);
    await waitFor(() => sse.messages.length === 20 && wsIds.length === 20);
    const want = Array.from({ length: 20 }, (_, i) => String(base + 1 + i));
    expect(sse.messages.map((m) => m.id)).toEqual(want);
    expect(wsIds).toEqual(want);
    expect(JSON.parse(sse.messages[0].data)).toMatchObject({ id: base + 1, type: "matrix", name: "test.tick" });
    sse.close();
    ws.close();
    const resumed = await openSse(`${f.url}/events`, { "last-event-id": String(base + 15) });
    await waitFor(() => resumed.messages.length === 5);
    resumed.close();
    expect(resumed.messages.map((m) => m.id)).toEqual(want.slice(15));
    expect(f.stats()).toMatchObject({ upstream: "connected", lastEventId: base + 20, reconnects: 0 });
  });

  it(
    "emits matrix-down exactly once while the upstream answers 503, " +
      "backing off 1 s doubling to 30 s, and matrix-up on recovery",
    async () => {
      const clock = new FakeClock("2026-03-01T12:00:00Z");
      let healthy = false;
      const up = await fakeUpstream((res, _n, last) => {
        if (!healthy) {
          res
            .writeHead(503, { "content-type": "application/json" })
            .end('{"error":{"code":"unavailable","message":"down"}}');
          return;
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`id: 41\ndata: {"id":41,"type":"matrix","name":"x"}\n\n`);
        void last;
      });
      // keep-alives an hour apart: the clock's only short timer is the retry under test
      const f = await startFanout({ upstreamUrl: up.url, clock, keepAliveMs: HOUR });
      const local = await openSse(`${f.url}/events`, {});
      await waitFor(() => up.requests() === 1 && local.messages.length === 1);
      const delays = [1000, 2000, 4000, 8000, 16000, 30000, 30000];
      for (const [i, d] of delays.entries()) {
        await waitFor(() => clock.pendingDelays()[0] === d); // the 503 was read: the retry is set d ms out
        clock.advance(d - 1);
        expect(clock.pendingDelays()[0]).toBe(1); // not yet retried (a due timer fires inside advance)
        expect(up.requests()).toBe(i + 1);
        clock.advance(1);
        await waitFor(() => up.requests() === i + 2);
      }
      await waitFor(() => f.stats().reconnects === delays.length);
      const downs = local.messages.filter((m) => m.event === "matrix-down");
      expect(downs).toHaveLength(1);
      expect(JSON.parse(downs[0].data)).toMatchObject({
        type: "matrix",
        name: "matrix-down",
        payload: { http_status: 503 },
      });
      expect(f.stats().reconnectTimes.length).toBe(delays.length);
      healthy = true;
      clock.advance(30_000);
      await waitFor(
        () => local.messages.some((m) => m.event === "matrix-up") && local.messages.some((m) => m.id === "41"),
      );
      local.close();
      expect(local.messages.filter((m) => m.event === "matrix-down")).toHaveLength(1);
      expect(local.messages.filter((m) => m.event === "matrix-up")).toHaveLength(1);
      expect(f.stats().upstream).toBe("connected");
    },
  );

  it(
    "holds retransmission while rate_limit.remaining is 0 until " +
      "reset_at plus the buffer, and resumes from the last id after a drop",
    async () => {
      const clock = new FakeClock("2026-03-01T12:00:00Z");
      const resetAt = new Date(clock.now() + 10_000).toISOString();
      const seenLastIds: (string | undefined)[] = [];
      let streamRes: ServerResponse | undefined;
      const up = await fakeUpstream((res, n, last) => {
        seenLastIds.push(last);
        res.writeHead(200, { "content-type": "text/event-stream" });
        if (n === 1) {
          res.write(`id: 1\ndata: {"id":1,"type":"matrix","name":"a"}\n\n`);
          res.write(
            `id: 2\ndata: {"id":2,"type":"matrix","name":"b",` +
              `"rate_limit":{"limit":3,"remaining":0,"reset_at":"${resetAt}"}}\n\n`,
          );
          res.write(
            `id: 3\ndata: {"id":3,"type":"matrix","name":"c",` +
              `"rate_limit":{"limit":3,"remaining":0,"reset_at":"${resetAt}"}}\n\n`,
          );
          streamRes = res;
        } else {
          res.write(`id: 4\ndata: {"id":4,"type":"matrix","name":"d"}\n\n`);
        }
      });
      const f = await startFanout({ upstreamUrl: up.url, clock, keepAliveMs: HOUR });
      const local = await openSse(`${f.url}/events`, {});
      await waitFor(() => f.stats().lastEventId === 3 && local.messages.length === 1);
      // 2 and 3 are held: the only short timer is the resume, at the reset time plus its 250 ms
      expect(clock.pendingDelays()[0]).toBe(10_250);
      expect(local.messages.map((m) => m.id)).toEqual(["1"]);
      expect(f.stats()).toMatchObject({
        throttledSince: "2026-03-01T12:00:00.000Z",
        throttledUntil: "2026-03-01T12:00:10.250Z",
        throttleEpisodes: 1,
      });
      clock.advance(10_000);
      expect(clock.pendingDelays()[0]).toBe(250); // still held
      expect(local.messages.map((m) => m.id)).toEqual(["1"]);
      clock.advance(250);
      await waitFor(() => local.messages.length === 3);
      expect(local.messages.map((m) => m.id)).toEqual(["1", "2", "3"]);
      expect(f.stats().throttledSince).toBeNull();
      // the upstream drops: the fan-out reconnects after 1 s with Last-Event-ID 3
      streamRes!.destroy();
      await waitFor(() => clock.pendingDelays()[0] === 1000); // the drop was seen: the reconnect is set
      clock.advance(1000);
      await waitFor(() => local.messages.length === 4);
      local.close();
      expect(seenLastIds).toEqual([undefined, "3"]);
      expect(local.messages.map((m) => m.id)).toEqual(["1", "2", "3", "4"]);
      expect(local.messages.some((m) => m.event === "matrix-down")).toBe(false);
    },
  );

  it("re-emits MQTT messages published with MQTT.js on the local /events stream with their topic", async (ctx) => {
    if (!(await brokerReachable())) {
      const reason = `no MQTT broker at ${MQTT_URL} (set EP_TEST_MQTT_URL)`;
      if (process.env.CI) throw new Error(reason);
      console.log(`skipping: ${reason}`);
      ctx.skip();
      return;
    }
    const up = await fakeUpstream((res) =>
      res.writeHead(200, { "content-type": "text/event-stream" }).write(": hello\n\n"),
    );
    const prefix = `ep-test/${process.pid}-${Date.now()}`;
    const f = await startFanout({ upstreamUrl: up.url, mqtt: { url: MQTT_URL, topics: [`${prefix}/#`] } });
    await waitFor(() => f.stats().mqtt?.connected === true);
    const local = await openSse(`${f.url}/events`, {});
    const ws = new WebSocket(`${f.url.replace("http", "ws")}/events`);
    const wsMessages: { topic: string; payload: unknown }[] = [];
    ws.on("message", (d) => wsMessages.push(JSON.parse(d.toString())));
    await new Promise((r) => ws.once("open", r));
    const pub = await mqtt.connectAsync(MQTT_URL);
    cleanup(() => pub.endAsync());
    // the subscription is in place once a probe comes through
    await waitFor(
      async () => {
        await pub.publishAsync(`${prefix}/probe`, "probe");
        return local.messages.some((m) => m.event === "mqtt");
      },
      10_000,
      100,
    );
    await pub.publishAsync(`${prefix}/sensors/temp`, JSON.stringify({ celsius: 21.5 }));
    await pub.publishAsync(`${prefix}/plain`, "hello world");
    await waitFor(() => local.messages.filter((m) => m.event === "mqtt" && !m.data.includes("probe")).length === 2);
    await waitFor(() => wsMessages.filter((m) => m.topic && !m.topic.endsWith("/probe")).length === 2);
    local.close();
    ws.close();
    const got = local.messages
      .filter((m) => m.event === "mqtt")
      .map((m) => JSON.parse(m.data))
      .filter((m) => !m.topic.endsWith("/probe"));
    expect(got[0]).toMatchObject({
      type: "mqtt",
      name: "mqtt.message",
      topic: `${prefix}/sensors/temp`,
      payload: { celsius: 21.5 },
    });
    expect(got[1]).toMatchObject({ topic: `${prefix}/plain`, payload: { text: "hello world" } });
    expect(f.stats().mqtt).toMatchObject({ connected: true });
  });

  it("listens on loopback only and reads its settings from the environment", () => {
    expect(() => parseLoopbackListen("0.0.0.0:9000")).toThrow(/loopback/);
    expect(() => parseLoopbackListen("nonsense")).toThrow(/EP_FANOUT_LISTEN/);
    expect(parseLoopbackListen("127.0.0.1:9000")).toEqual({ host: "127.0.0.1", port: 9000 });
    expect(fanoutEnv({})).toBeUndefined();
    expect(
      fanoutEnv({ EP_FANOUT_LISTEN: "127.0.0.1:7070", EP_MQTT_URL: "mqtt://127.0.0.1:1883", EP_MQTT_TOPICS: "a/#, b" }),
    ).toEqual({
      listen: "127.0.0.1:7070",
      mqtt: { url: "mqtt://127.0.0.1:1883", topics: ["a/#", "b"] },
    });
    expect(() => fanoutEnv({ EP_FANOUT_LISTEN: "127.0.0.1:7070", EP_MQTT_URL: "mqtt://x" })).toThrow(/EP_MQTT_TOPICS/);
  });
});
