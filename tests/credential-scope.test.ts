// Issue 14, points 1 and 2: what is derived from a credential keeps its scope and lifetime.
// Each case is the attack from the issue, against a real tower over real HTTP and WebSockets;
// time moves on an injected clock, never by sleeping.
import { RoleSchema, type Role } from "../gen/ep/tower/v1/resources_pb.js";
import { enumOf, msOf } from "../common/vocab.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { FakeClock } from "../test-support/fake-clock.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, waitFor, type TestTower } from "./harness.js";

const clock = new FakeClock(Date.parse("2026-03-01T00:00:00Z"));
let t: TestTower;
let domainA: string;
let domainB: string;

beforeAll(async () => {
  t = await startTower({ clock });
  const work = t.client(WorkService);
  domainA = (await work.createDomain({ name: "scope-a" })).domain!.id;
  domainB = (await work.createDomain({ name: "scope-b" })).domain!.id;
  await work.createMission({ domainId: domainA, title: "in a" });
  await work.createMission({ domainId: domainB, title: "in b" });
});

afterAll(async () => {
  const closing = t?.close();
  t?.tower.app.server.closeAllConnections();
  await closing;
});

async function makeToken(role: string, opts: { domainId?: string; ttlSeconds?: number } = {}) {
  const res = await t.client(AuthService).createToken({
    name: `scope-${role}-${Math.random()}`,
    role: enumOf<Role>(RoleSchema, role, "role"),
    domainId: opts.domainId ?? "",
    ttlSeconds: BigInt(opts.ttlSeconds ?? 0),
  });
  return { id: res.token!.id, secret: res.secret };
}

const ticketFor = async (secret: string, purpose: string, agentId = "") =>
  (await t.client(AuthService, secret).createTicket({ purpose, agentId })).ticket;

/** Opens /events/ws with a ticket; resolves the close code if it is refused or ends. */
function eventsWs(ticket: string) {
  const got: { id: number; domain_id: string; name: string }[] = [];
  const ws = new WebSocket(`${t.url.replace("http", "ws")}/events/ws?last_event_id=0&ticket=${ticket}`);
  let status: number | undefined;
  ws.on("unexpected-response", (_req, res) => (status = res.statusCode));
  ws.on("error", () => undefined);
  ws.on("message", (d) => {
    const m = JSON.parse(d.toString());
    if (typeof m.id === "number") got.push(m);
  });
  return { got, ws, status: () => status };
}

async function login(body: Record<string, string>): Promise<{ status: number; cookie?: string; json: any }> {
  const res = await fetch(`${t.url}/auth/session`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const set = res.headers.get("set-cookie") ?? "";
  return { status: res.status, cookie: /ep_session=([^;]*)/.exec(set)?.[1], json: await res.json() };
}

const withCookie = (cookie: string, method = "GET", path = "/domains", body?: unknown) =>
  fetch(`${t.url}${path}`, {
    method,
    headers: { cookie: `ep_session=${cookie}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

describe("tickets carry the scope of the credential that made them", () => {
  it("an agent token's events ticket sees only its domain on /events/ws", async () => {
    const agent = await makeToken("agent", { domainId: domainA });
    const s = eventsWs(await ticketFor(agent.secret, "events"));
    // a live event in A after the replay is the barrier: everything before it has arrived
    const barrier = (await t.client(WorkService).createMission({ domainId: domainA, title: "barrier" })).mission!.id;
    await waitFor(() => s.got.some((e) => e.name === "mission.created" && JSON.stringify(e).includes(barrier)));
    s.ws.close();
    expect(s.got.length).toBeGreaterThan(1);
    expect(s.got.filter((e) => e.domain_id !== domainA)).toEqual([]);
  });

  it("a ticket is refused once its token is revoked, and never outlives the token", async () => {
    const op = await makeToken("operator", { ttlSeconds: 30 });
    const res = await t.client(AuthService, op.secret).createTicket({ purpose: "events" });
    // asked for the default 60 s, but the token ends in 30 s
    expect(msOf(res.expiresAt)).toBeLessThanOrEqual(clock.now() + 30_000);
    const other = await ticketFor(op.secret, "events");
    await t.client(AuthService).revokeToken({ tokenId: op.id });
    const s = eventsWs(other);
    await waitFor(() => s.status() !== undefined);
    expect(s.status()).toBe(401);
  });

  it("an attach ticket carries the role: an agent token's ticket cannot attach", async () => {
    const agent = await makeToken("agent", { domainId: domainA });
    const ticket = await ticketFor(agent.secret, "attach", "agt_any");
    const status = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`${t.url.replace("http", "ws")}/api/attach-ws?ticket=${ticket}`);
      ws.on("unexpected-response", (_req, r) => resolve(r.statusCode ?? 0));
      ws.on("open", () => resolve(101));
      ws.on("error", () => undefined);
    });
    expect(status).toBe(403);
  });
});

describe("a console session is bound to the credential it came from", () => {
  it("ends when the source token is revoked (ticket login and token login)", async () => {
    const op = await makeToken("operator");
    const viaTicket = await login({ ticket: await ticketFor(op.secret, "login") });
    const viaToken = await login({ token: op.secret });
    expect(viaTicket.status).toBe(200);
    for (const c of [viaTicket.cookie!, viaToken.cookie!]) {
      expect(
        (await withCookie(c, "POST", "/domains", { name: `w-${Math.random().toString(36).slice(2, 8)}` })).status,
      ).toBe(201);
    }
    await t.client(AuthService).revokeToken({ tokenId: op.id });
    for (const c of [viaTicket.cookie!, viaToken.cookie!]) {
      expect((await withCookie(c, "POST", "/domains", { name: "after-revoke" })).status).toBe(401);
      expect((await withCookie(c)).status).toBe(401);
    }
  });

  it("never outlives its token: a 5-second token's session ends after 5 seconds", async () => {
    const op = await makeToken("operator", { ttlSeconds: 5 });
    const s = await login({ ticket: await ticketFor(op.secret, "login") });
    expect(Date.parse(s.json.expires_at)).toBeLessThanOrEqual(clock.now() + 5000);
    expect((await withCookie(s.cookie!)).status).toBe(200);
    clock.advance(6000);
    expect((await withCookie(s.cookie!)).status).toBe(401);
  });

  it("logout ends it, and logins mint no tokens", async () => {
    const before = (await t.client(AuthService).listTokens({})).tokens.length;
    const cookies: string[] = [];
    for (let i = 0; i < 5; i++) cookies.push((await login({ ticket: await ticketFor(t.adminToken, "login") })).cookie!);
    expect((await t.client(AuthService).listTokens({})).tokens.length).toBe(before);
    expect((await withCookie(cookies[0])).status).toBe(200);
    const out = await fetch(`${t.url}/auth/session`, {
      method: "DELETE",
      headers: { cookie: `ep_session=${cookies[0]}` },
    });
    expect(out.status).toBe(200);
    expect((await withCookie(cookies[0])).status).toBe(401);
    expect((await withCookie(cookies[1])).status).toBe(200); // other sessions go on
  });

  it("a login link lasts 24 hours by default (opened 10 minutes later it works); socket tickets a minute", async () => {
    const res = await t.client(AuthService).createTicket({ purpose: "login" });
    expect(msOf(res.expiresAt) - clock.now()).toBe(24 * 3_600_000);
    expect(msOf((await t.client(AuthService).createTicket({ purpose: "events" })).expiresAt) - clock.now()).toBe(
      60_000,
    );
    clock.advance(10 * 60_000);
    expect((await login({ ticket: res.ticket })).status).toBe(200);
  });

  it("a node token cannot open a console session", async () => {
    const { NodeService } = await import("../gen/ep/tower/v1/fleet_pb.js");
    const node = await t.client(NodeService).registerNode({ hostname: "scope-node" });
    expect((await login({ token: node.token })).status).toBe(403);
  });
});
