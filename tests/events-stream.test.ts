// The live event feed over real HTTP: SSE with independent clients (the `eventsource`
// package), resume without gap or duplicate across disconnects and restarts, auth ending
// streams, slow consumers, the WebSocket mirror, the Connect stream, filters and limits.
import { RoleSchema, type Role } from "../gen/ep/tower/v1/resources_pb.js";
import { enumOf } from "../common/vocab.js";
import { EventSource } from "eventsource";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { FakeClock } from "../test-support/fake-clock.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { emitEvents, openSse, sseParser, tcpProxy, type SseMessage } from "./events-helpers.js";
import { startTower, tempHome, waitFor, type TestTower } from "./harness.js";

/**
 * Every stream of these tests has ended by now; fetch (undici) may still hold idle or
 * never-used sockets for seconds, which the graceful close would wait for.
 */
async function closeTower(t: TestTower | undefined): Promise<void> {
  if (!t) return;
  const closing = t.close();
  t.tower.app.server.closeAllConnections();
  await closing;
}

function bearerFetch(token: string): typeof fetch {
  return (input, init) =>
    fetch(input, {
      ...init,
      headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` },
    });
}

async function makeToken(t: TestTower, role = "viewer", ttlSeconds = 0): Promise<{ id: string; secret: string }> {
  const res = await t.client(AuthService).createToken({
    name: `t-${role}-${Math.random()}`,
    role: enumOf<Role>(RoleSchema, role, "role"),
    ttlSeconds: BigInt(ttlSeconds),
  });
  return { id: res.token!.id, secret: res.secret };
}

/** Follows ids seen by one client and checks the sequence is gap-free and duplicate-free. */
function idCollector() {
  const ids: number[] = [];
  return {
    ids,
    push(id: number) {
      ids.push(id);
    },
    assertContiguous(from: number, to: number) {
      expect(ids.length).toBe(to - from + 1);
      for (let i = 0; i < ids.length; i++)
        if (ids[i] !== from + i)
          throw new Error(`at position ${i} expected id ${from + i}, got ${ids[i]} (previous ${ids[i - 1]})`);
    },
  };
}

describe("GET /events/stream with the eventsource package", () => {
  let t: TestTower;
  beforeAll(async () => {
    t = await startTower();
  });
  afterAll(async () => {
    await closeTower(t);
  });

  it("resumes after forced disconnects with no gap and no duplicate across 10,000 events", async () => {
    const proxy = await tcpProxy(Number(new URL(t.url).port));
    const startId = t.tower.deps.hub.lastId;
    const seen = idCollector();
    const payloadNs: number[] = [];
    let opens = 0;
    const es = new EventSource(`http://127.0.0.1:${proxy.port}/events/stream?type=matrix`, {
      fetch: bearerFetch(t.adminToken),
    });
    es.onopen = () => opens++;
    es.onmessage = (m) => {
      const chunk = JSON.parse(m.data);
      expect(String(chunk.id)).toBe(m.lastEventId);
      seen.push(chunk.id);
      payloadNs.push(chunk.payload.n);
    };
    await waitFor(() => opens === 1);
    const total = 10_000;
    // the producer stays at most 500 events ahead of the reader, so every cut below leaves events
    // that only a resume can deliver (unpaced, a fast transport had all 10,000 in the client's
    // buffers before the second cut, and the reader never needed to reconnect)
    const producing = (async () => {
      for (let i = 0; i < total; i += 50) {
        await waitFor(() => seen.ids.length >= i - 500, 20_000, 2);
        await emitEvents(t.tower, Math.min(50, total - i), { start: i });
      }
    })();
    // cut the connection three times while events flow
    for (const at of [1500, 4000, 7000]) {
      await waitFor(() => seen.ids.length >= at, 20_000, 5);
      proxy.cutAll();
    }
    await producing;
    await waitFor(() => seen.ids.length >= total, 30_000);
    es.close();
    await proxy.close();
    expect(opens).toBeGreaterThanOrEqual(4);
    seen.assertContiguous(startId + 1, startId + total);
    expect(payloadNs).toEqual(Array.from({ length: total }, (_, i) => i));
  }, 60_000);

  it("carries the seed's chunk fields in snake_case with id:/data: lines and a retry hint", async () => {
    const s = await openSse(`${t.url}/events/stream`, { authorization: `Bearer ${t.adminToken}` });
    expect(s.status).toBe(200);
    await emitEvents(t.tower, 1, {
      extra: {
        type: "approval",
        name: "action.created",
        domainId: "dom_x",
        missionId: "msn_y",
        agentId: "agt_z",
        taskId: "tsk_1",
        sessionId: "ses_1",
        status: "pending",
        payload: { action: "create_mission" },
      },
    });
    await waitFor(() => s.messages.length === 1);
    s.close();
    const m = s.messages[0];
    const chunk = JSON.parse(m.data);
    expect(m.id).toBe(String(chunk.id));
    expect(chunk).toEqual({
      id: expect.any(Number),
      type: "approval",
      name: "action.created",
      domain_id: "dom_x",
      mission_id: "msn_y",
      agent_id: "agt_z",
      task_id: "tsk_1",
      session_id: "ses_1",
      status: "pending",
      payload: { action: "create_mission" },
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(chunk.rate_limit).toBeUndefined();
  });

  it("resumes from ?last_event_id= and lets the Last-Event-ID header win over it", async () => {
    const base = t.tower.deps.hub.lastId;
    await emitEvents(t.tower, 10);
    const byQuery = await openSse(`${t.url}/events/stream?last_event_id=${base + 4}`, {
      authorization: `Bearer ${t.adminToken}`,
    });
    const both = await openSse(`${t.url}/events/stream?last_event_id=${base}`, {
      authorization: `Bearer ${t.adminToken}`,
      "last-event-id": String(base + 8),
    });
    await waitFor(() => byQuery.messages.length === 6 && both.messages.length === 2);
    byQuery.close();
    both.close();
    expect(byQuery.messages.map((m) => Number(m.id))).toEqual([5, 6, 7, 8, 9, 10].map((i) => base + i));
    expect(both.messages.map((m) => Number(m.id))).toEqual([base + 9, base + 10]);
  });

  it("filters by type (repeated or comma list), domain, mission and agent", async () => {
    const auth = { authorization: `Bearer ${t.adminToken}` };
    const base = t.tower.deps.hub.lastId;
    await emitEvents(t.tower, 1, { extra: { type: "inbox", domainId: "dom_a", agentId: "agt_1" } });
    await emitEvents(t.tower, 1, { extra: { type: "progress", domainId: "dom_a", missionId: "msn_1" } });
    await emitEvents(t.tower, 1, { extra: { type: "approval", domainId: "dom_b", missionId: "msn_1" } });
    await emitEvents(t.tower, 1, { extra: { type: "matrix", domainId: "dom_b", agentId: "agt_1" } });
    // the last event matches every filter: once it arrived, the stream (in id order) has sent
    // everything it was going to from the four above
    const LAST = 5;
    await emitEvents(t.tower, 1, {
      extra: { type: "matrix", domainId: "dom_a", missionId: "msn_1", agentId: "agt_1" },
    });
    const q = (s: string) => openSse(`${t.url}/events/stream?last_event_id=${base}&${s}`, auth);
    const cases: [string, number[]][] = [
      ["type=inbox&type=matrix", [1, 4]],
      ["type=progress,matrix", [2, 4]],
      ["domain_id=dom_a", [1, 2]],
      ["mission_id=msn_1", [2, 3]],
      ["agent_id=agt_1", [1, 4]],
      ["agent_id=agt_1&domain_id=dom_a", [1]],
    ];
    for (const [query, want] of cases) {
      const s = await q(query);
      await waitFor(() => s.messages.some((m) => Number(m.id) - base === LAST));
      s.close();
      expect(
        s.messages.map((m) => Number(m.id) - base),
        query,
      ).toEqual([...want, LAST]);
    }
  });

  it("answers 400 naming the field for a malformed Last-Event-ID, a bad type or an unknown parameter", async () => {
    const auth = { authorization: `Bearer ${t.adminToken}` };
    const cases: [string, Record<string, string>, string][] = [
      ["/events/stream", { "last-event-id": "12abc" }, "Last-Event-ID"],
      ["/events/stream", { "last-event-id": "-5" }, "Last-Event-ID"],
      ["/events/stream?last_event_id=1.5", {}, "last_event_id"],
      ["/events/stream?type=matrix,bogus", {}, "type"],
      ["/events/stream?domain_id=a%20b", {}, "domain_id"],
      ["/events/stream?colour=red", {}, "colour"],
    ];
    for (const [path, headers, field] of cases) {
      const res = await fetch(t.url + path, { headers: { ...auth, ...headers } });
      expect(res.status, path).toBe(400);
      const body = await res.json();
      expect(body.error.code).toBe("invalid_argument");
      expect(body.error.details.field).toBe(field);
    }
    const unauth = await fetch(`${t.url}/events/stream`);
    expect(unauth.status).toBe(401);

    // a resume point past the newest event is refused, saying where the log ends (it used to wait silently)
    const head = await t.tower.deps.store.lastEventId();
    const past = await fetch(`${t.url}/events/stream`, { headers: { ...auth, "last-event-id": String(head + 1000) } });
    expect(past.status).toBe(400);
    const pastBody = await past.json();
    expect(pastBody.error.message).toBe(
      `last event id ${head + 1000} is past the newest event ` +
        `(${head}); resume from ${head} or omit it to start at the head`,
    );
    expect(pastBody.error.details).toMatchObject({ field: "last_event_id", last_event_id: head });
    const wsStatus = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`${t.url.replace("http", "ws")}/events/ws?last_event_id=${head + 1000}`, {
        headers: auth,
      });
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.on("open", () => (resolve(101), ws.close()));
      ws.on("error", () => undefined);
    });
    expect(wsStatus).toBe(400);
    // the newest id itself is a fine resume point
    const atHead = await fetch(`${t.url}/events/stream?last_event_id=${head}`, {
      headers: auth,
      signal: AbortSignal.timeout(2000),
    }).catch(() => undefined);
    expect(atHead?.status).toBe(200);
    void atHead?.body?.cancel();
    // an id no tower can hold says so rather than "not an integer"
    const huge = await fetch(`${t.url}/events/stream`, { headers: { ...auth, "last-event-id": "9007199254740993" } });
    expect(huge.status).toBe(400);
    expect((await huge.json()).error.message).toContain("is larger than any event id this tower can hold");
  });

  it("cuts off a slow reader with a final error event while another reader continues", async () => {
    const port = Number(new URL(t.url).port);
    const before = t.tower.deps.hub.lastId;
    const fast = await openSse(`${t.url}/events/stream`, { authorization: `Bearer ${t.adminToken}` });
    // the slow reader: a raw socket that reads the headers and then stops reading
    const slow = connect(port, "127.0.0.1");
    let received = "";
    await new Promise<void>((resolve) => {
      slow.on("connect", () =>
        slow.write(
          `GET /events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: ` +
            `Bearer ${t.adminToken}\r\nAccept: text/event-stream\r\n\r\n`,
        ),
      );
      slow.once("data", (d) => {
        received += d.toString();
        slow.pause();
        resolve();
      });
    });
    expect(received).toContain("200 OK");
    const cutBefore = t.tower.deps.hub.lastId;
    // ~12 MB of events: more than the socket buffers and the 1 MiB per-client limit
    const blob = "x".repeat(8000);
    await emitEvents(t.tower, 1500, { batch: 25, extra: { payload: { blob } }, pauseEvery: 1 });
    await waitFor(() => fast.messages.length === 1500, 30_000);
    expect(Number(fast.messages.at(-1)!.id)).toBe(before + 1500);
    // the slow socket, once it reads again, finds the reason at the end and the connection closed
    slow.on("data", (d) => (received += d.toString()));
    const closed = new Promise<void>((r) => slow.on("close", () => r()));
    slow.resume();
    await closed;
    fast.close();
    const messages: SseMessage[] = [];
    sseParser((m) => messages.push(m))(received.replace(/\r\n[0-9a-f]+\r\n/g, ""));
    const last = messages.at(-1)!;
    expect(last.event).toBe("error");
    const err = JSON.parse(last.data).error;
    expect(err.code).toBe("slow_consumer");
    expect(err.message).toContain("Last-Event-ID");
    expect(err.last_event_id).toBeGreaterThanOrEqual(cutBefore);
    expect(err.last_event_id).toBeLessThan(before + 1500);
  }, 60_000);

  it("carries the same ids over /events/ws, with a Bearer header or a one-time ticket", async () => {
    const base = t.tower.deps.hub.lastId;
    await emitEvents(t.tower, 5);
    const wsUrl = t.url.replace("http", "ws");
    const got: Record<string, number[]> = { header: [], ticket: [] };
    const viaHeader = new WebSocket(`${wsUrl}/events/ws?last_event_id=${base}`, {
      headers: { authorization: `Bearer ${t.adminToken}` },
    });
    viaHeader.on("message", (d) => got.header.push(JSON.parse(d.toString()).id));
    const { ticket } = await t.client(AuthService).createTicket({ purpose: "events" });
    const viaTicket = new WebSocket(`${wsUrl}/events/ws?last_event_id=${base}&ticket=${ticket}`);
    viaTicket.on("message", (d) => got.ticket.push(JSON.parse(d.toString()).id));
    await waitFor(() => got.header.length === 5 && got.ticket.length === 5);
    await emitEvents(t.tower, 3);
    await waitFor(() => got.header.length === 8 && got.ticket.length === 8);
    const sse = await openSse(`${t.url}/events/stream?last_event_id=${base}`, {
      authorization: `Bearer ${t.adminToken}`,
    });
    await waitFor(() => sse.messages.length === 8);
    sse.close();
    viaHeader.close();
    viaTicket.close();
    const want = Array.from({ length: 8 }, (_, i) => base + 1 + i);
    expect(got.header).toEqual(want);
    expect(got.ticket).toEqual(want);
    expect(sse.messages.map((m) => Number(m.id))).toEqual(want);

    // the ticket is single-use; no credentials and bad parameters are refused before the upgrade
    const refused = async (url: string, headers: Record<string, string> = {}) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(url, { headers });
        ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        ws.on("open", () => resolve(101));
        ws.on("error", () => undefined);
      });
    expect(await refused(`${wsUrl}/events/ws?ticket=${ticket}`)).toBe(401);
    expect(await refused(`${wsUrl}/events/ws`)).toBe(401);
    expect(await refused(`${wsUrl}/events/ws?last_event_id=x`, { authorization: `Bearer ${t.adminToken}` })).toBe(400);
    const plain = await fetch(`${t.url}/events/ws`, { headers: { authorization: `Bearer ${t.adminToken}` } });
    expect(plain.status).toBe(426);
  });

  it("serves the same feed as the EventService.StreamEvents Connect stream", async () => {
    const base = t.tower.deps.hub.lastId;
    await emitEvents(t.tower, 4, { extra: { type: "progress" } });
    await emitEvents(t.tower, 2, { extra: { type: "inbox" } });
    const ac = new AbortController();
    const ids: number[] = [];
    const reading = (async () => {
      for await (const res of t
        .client(EventService)
        .streamEvents({ afterId: BigInt(base), filter: { types: ["progress"] } }, { signal: ac.signal })) {
        ids.push(Number(res.event!.id));
        expect(res.event!.type).toBe("progress");
      }
    })().catch(() => undefined);
    await waitFor(() => ids.length === 4);
    await emitEvents(t.tower, 1, { extra: { type: "progress" } });
    await waitFor(() => ids.length === 5);
    ac.abort();
    await reading;
    expect(ids).toEqual([1, 2, 3, 4, 7].map((i) => base + i));
    await expect(async () => {
      for await (const _ of t.client(EventService).streamEvents({ filter: { types: ["nope"] } })) break;
    }).rejects.toThrow(/types/);
  });
});

describe("resume across a tower restart", () => {
  it("an eventsource client keeps every id exactly once when the tower restarts on the same database", async () => {
    const home = tempHome();
    let t = await startTower({ home: home.dir });
    const proxy = await tcpProxy(Number(new URL(t.url).port));
    const seen = idCollector();
    let opens = 0;
    const es = new EventSource(`http://127.0.0.1:${proxy.port}/events/stream?last_event_id=0`, {
      fetch: bearerFetch(t.adminToken),
    });
    es.onopen = () => opens++;
    es.onmessage = (m) => seen.push(Number(m.lastEventId));
    const first = t.tower.deps.hub.lastId;
    await emitEvents(t.tower, 5000, { batch: 100, pauseEvery: 1 });
    await waitFor(() => seen.ids.length >= 2000, 20_000, 5);
    await closeTower(t);
    // events committed by the second tower while the client is away are replayed from the store
    t = await startTower({ home: home.dir });
    proxy.retarget(Number(new URL(t.url).port));
    await emitEvents(t.tower, 5000, { batch: 100, pauseEvery: 1 });
    const last = t.tower.deps.hub.lastId;
    await waitFor(() => seen.ids.at(-1) === last, 30_000);
    es.close();
    await proxy.close();
    await closeTower(t);
    home.cleanup();
    expect(opens).toBeGreaterThanOrEqual(2);
    seen.assertContiguous(seen.ids[0], last);
    expect(seen.ids[0]).toBeLessThanOrEqual(first + 1);
  }, 60_000);
});

describe("credentials and limits on a fake clock", () => {
  const clock = new FakeClock("2026-03-01T12:00:00Z");
  let t: TestTower;
  beforeAll(async () => {
    t = await startTower({
      clock,
      env: { EP_STREAM_RATE_LIMIT: "3", EP_STREAM_KEEPALIVE_MS: "15000", EP_STREAM_RECHECK_MS: "5000" },
    });
  });
  afterAll(async () => {
    await closeTower(t);
  });

  it("a token revoked mid-stream ends that stream, other streams continue", async () => {
    const doomed = await makeToken(t);
    const other = await makeToken(t);
    const a = await openSse(`${t.url}/events/stream`, { authorization: `Bearer ${doomed.secret}` });
    const b = await openSse(`${t.url}/events/stream`, { authorization: `Bearer ${other.secret}` });
    await emitEvents(t.tower, 2);
    await waitFor(() => a.messages.length === 2 && b.messages.length === 2);
    await t.client(AuthService).revokeToken({ tokenId: doomed.id });
    clock.advance(5000);
    await a.done;
    const last = a.messages.at(-1)!;
    expect(last.event).toBe("error");
    expect(JSON.parse(last.data).error).toMatchObject({
      code: "token_revoked",
      last_event_id: Number(a.messages[1].id),
    });
    await emitEvents(t.tower, 1);
    await waitFor(() => b.messages.length === 3);
    b.close();
    const again = await fetch(`${t.url}/events/stream`, { headers: { authorization: `Bearer ${doomed.secret}` } });
    expect(again.status).toBe(401);
  });

  it("a stream ends when its token expires, and keep-alive comments come every 15 s", async () => {
    const short = await makeToken(t, "viewer", 20);
    const s = await openSse(`${t.url}/events/stream`, { authorization: `Bearer ${short.secret}` });
    await waitFor(() => s.comments.length >= 1);
    const before = s.comments.filter((c) => c === "keep-alive").length;
    clock.advance(15_000);
    await waitFor(() => s.comments.filter((c) => c === "keep-alive").length === before + 1);
    clock.advance(5_000);
    await s.done;
    expect(JSON.parse(s.messages.at(-1)!.data).error.code).toBe("token_expired");
  });

  it(
    "over the per-token connection limit: 429 with " + "Retry-After, and rate_limit in the chunks while throttled",
    async () => {
      const tok = await makeToken(t);
      const auth = { authorization: `Bearer ${tok.secret}` };
      const s1 = await openSse(`${t.url}/events/stream`, auth);
      const s2 = await openSse(`${t.url}/events/stream`, auth);
      const s3 = await openSse(`${t.url}/events/stream`, auth);
      expect([s1.status, s2.status, s3.status]).toEqual([200, 200, 200]);
      // the third connection used the last token: every stream of the token hears it at once
      await waitFor(
        () => s1.messages.some((m) => m.event === "rate_limit") && s3.messages.some((m) => m.event === "rate_limit"),
      );
      const notice = JSON.parse(s1.messages.find((m) => m.event === "rate_limit")!.data).rate_limit;
      expect(notice).toEqual({ limit: 3, remaining: 0, reset_at: new Date(clock.now() + 20_000).toISOString() });
      const over = await fetch(`${t.url}/events/stream`, { headers: auth });
      expect(over.status).toBe(429);
      expect(over.headers.get("retry-after")).toBe("20");
      const body = await over.json();
      expect(body.error).toMatchObject({ code: "rate_limited", details: { limit: 3, remaining: 0 } });
      await emitEvents(t.tower, 1);
      await waitFor(() => s2.messages.filter((m) => !m.event).length === 1);
      expect(JSON.parse(s2.messages.filter((m) => !m.event)[0].data).rate_limit).toEqual(notice);
      // after reset_at the chunks are plain again and a new connection is let in
      clock.advance(20_000);
      await emitEvents(t.tower, 1);
      await waitFor(() => s2.messages.filter((m) => !m.event).length === 2);
      expect(JSON.parse(s2.messages.filter((m) => !m.event)[1].data).rate_limit).toBeUndefined();
      const s4 = await openSse(`${t.url}/events/stream`, auth);
      expect(s4.status).toBe(200);
      for (const s of [s1, s2, s3, s4]) s.close();
      // another token has its own bucket
      const s5 = await openSse(`${t.url}/events/stream`, { authorization: `Bearer ${t.adminToken}` });
      expect(s5.status).toBe(200);
      s5.close();
    },
  );

  it("retention keeps the newest EP_EVENT_RETENTION events", async () => {
    const home = tempHome();
    const small = await startTower({ home: home.dir, clock, env: { EP_EVENT_RETENTION: "50" } });
    await emitEvents(small.tower, 120);
    const last = small.tower.deps.hub.lastId;
    clock.advance(60_000);
    await waitFor(async () => (await small.tower.deps.store.listEvents({ afterId: 0, limit: 1000 })).length === 50);
    const left = await small.tower.deps.store.listEvents({ afterId: 0, limit: 1000 });
    expect(left[0].id).toBe(last - 49);
    expect(left.at(-1)!.id).toBe(last);
    await closeTower(small);
    home.cleanup();
  });
});
