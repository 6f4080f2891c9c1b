// The tower's side of the dial-back, with a node that speaks the link protocol by hand (the real
// NodeService.Link stream and a real WebSocket): a proof made with the attach secret of an older
// link is refused, the current one is spliced; expired tickets, foreign nodes and unknown attach
// ids are refused; the dial timeout tells the viewer.
import { Role } from "../gen/ep/tower/v1/resources_pb.js";
import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { FakeClock } from "../test-support/fake-clock.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { AgentService, NodeService, type AttachDial, type LinkResponse } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { mustOpen, openAttach, wsUrl } from "./attach-helpers.js";
import { startTower, waitFor, type TestTower } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const proof = (secret: string, id: string) => createHmac("sha256", secret).update(id).digest("base64url");

let t: TestTower;
const clock = new FakeClock(Date.parse("2026-01-01T00:00:00Z"));
let nodeToken: string;
let otherNodeToken: string;
let agentId: string;

/** A link as epd opens it, with its commands collected. */
function openLink(token: string, attachSecret: string) {
  const ac = new AbortController();
  const got: LinkResponse[] = [];
  const done = (async () => {
    try {
      for await (const m of t.client(NodeService, token).link({ attachSecret, version: "test" }, { signal: ac.signal }))
        got.push(m);
    } catch {
      // aborted
    }
  })();
  const attach = (): AttachDial | undefined =>
    got.flatMap((m) => (m.command.case === "attach" ? [m.command.value] : []))[0];
  return { got, close: () => (ac.abort(), done), attach, hello: () => got.some((m) => m.command.case === "hello") };
}

function dial(
  attachId: string,
  headers: Record<string, string>,
): Promise<{ ws?: WebSocket; status?: number; body?: string }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${wsUrl(t.url)}/api/attach-dial?attach_id=${encodeURIComponent(attachId)}`, { headers });
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    ws.on("open", () => resolve({ ws }));
    ws.on("error", () => undefined);
  });
}

const ticket = async (token = t.adminToken) =>
  (await t.client(AuthService, token).createTicket({ purpose: "attach", agentId })).ticket;
const attachUrl = (tk: string) => `${wsUrl(t.url)}/api/attach-ws?ticket=${encodeURIComponent(tk)}`;

beforeAll(async () => {
  t = await startTower({ clock });
  const reg = await t.client(NodeService).registerNode({ hostname: "hand-made" });
  nodeToken = reg.token;
  otherNodeToken = (await t.client(NodeService).registerNode({ hostname: "other" })).token;
  const domainId = (await t.client(WorkService).createDomain({ name: "dial" })).domain!.id;
  agentId = (
    await t
      .client(AgentService)
      .enrollAgent({ domainId, nodeId: reg.node!.id, runtime: Runtime.MUXHOST_HOSTED, name: "pane" })
  ).agent!.id;
}, 30_000);

afterAll(async () => {
  await t?.close();
}, 5_000);

describe("attach dial-back", () => {
  it("refuses a proof made with a stale attach secret and splices the current one", async () => {
    const old = openLink(nodeToken, "secret-before-restart");
    await waitFor(old.hello);
    // the daemon restarted: a new link with a new secret replaces the old one
    const cur = openLink(nodeToken, "secret-after-restart");
    await waitFor(cur.hello);

    const viewer = await mustOpen(attachUrl(await ticket()));
    await waitFor(() => cur.attach() !== undefined);
    expect(old.attach()).toBeUndefined();
    const cmd = cur.attach()!;
    expect(cmd.agentId).toBe(agentId);
    const attachId = cmd.attachId;
    expect(cmd).toMatchObject({ mode: "rw", cols: 80, rows: 24 });

    const stale = await dial(attachId, {
      authorization: `Bearer ${nodeToken}`,
      "x-ep-attach-proof": proof("secret-before-restart", attachId),
    });
    expect(stale.status).toBe(401);
    expect(JSON.parse(stale.body!).error.message).toContain("current link");
    expect((await dial(attachId, { authorization: `Bearer ${nodeToken}` })).status).toBe(401); // no proof at all
    // no node token
    expect((await dial(attachId, { "x-ep-attach-proof": proof("secret-after-restart", attachId) })).status).toBe(401);
    expect(
      (
        await dial(attachId, {
          authorization: `Bearer ${otherNodeToken}`,
          "x-ep-attach-proof": proof("secret-after-restart", attachId),
        })
      ).status,
    ).toBe(403);
    expect(
      (
        await dial(attachId, {
          authorization: `Bearer ${t.adminToken}`,
          "x-ep-attach-proof": proof("secret-after-restart", attachId),
        })
      ).status,
    ).toBe(403);

    const good = await dial(attachId, {
      authorization: `Bearer ${nodeToken}`,
      "x-ep-attach-proof": proof("secret-after-restart", attachId),
    });
    expect(good.ws).toBeDefined();
    await viewer.waitFrame("status");
    await waitFor(() => viewer.frames.some((f) => f.state === "connected"));
    // spliced both ways: node output reaches the viewer, viewer keystrokes reach the node
    const fromViewer = new Promise<string>((r) => good.ws!.once("message", (d: Buffer) => r(d.toString())));
    viewer.type("ls\r");
    expect(await fromViewer).toBe("ls\r");
    good.ws!.send(Buffer.from("hello from the pane\r\n"), { binary: true });
    await viewer.waitScreen((sc) => sc.includes("hello from the pane"));
    // single use: the same attach id cannot be dialed again
    expect(
      (
        await dial(attachId, {
          authorization: `Bearer ${nodeToken}`,
          "x-ep-attach-proof": proof("secret-after-restart", attachId),
        })
      ).status,
    ).toBe(404);
    // the node hanging up closes the viewer with the node's code
    good.ws!.close(1000, "exited");
    expect((await viewer.closed).code).toBe(1000);
    await old.close();
    await cur.close();
  }, 30_000);

  it("refuses an expired ticket", async () => {
    const tk = await ticket();
    clock.advance(61_000);
    const r = await openAttach(attachUrl(tk));
    expect(r.status).toBe(401);
    expect(r.body.error.message).toContain("expired");
  });

  it("tells the viewer when the node is offline or never dials back", async () => {
    const offline = await openAttach(attachUrl(await ticket()));
    expect(offline.status).toBe(503);
    expect(offline.body.error.code).toBe("node_offline");

    const link = openLink(nodeToken, "s");
    await waitFor(link.hello);
    const viewer = await mustOpen(attachUrl(await ticket()));
    await waitFor(() => link.attach() !== undefined);
    clock.advance(10_001);
    const err = await viewer.waitFrame("error");
    expect(err.code).toBe("node_offline");
    expect((await viewer.closed).code).toBe(4503);
    await link.close();
  }, 30_000);

  it("drops a viewer's keystrokes at the tower", async () => {
    const link = openLink(nodeToken, "s2");
    await waitFor(link.hello);
    const viewerToken = (await t.client(AuthService).createToken({ name: "v", role: Role.VIEWER })).secret;
    const viewer = await mustOpen(attachUrl(await ticket(viewerToken)));
    await waitFor(() => link.attach() !== undefined);
    const attachId = link.attach()!.attachId;
    expect(link.attach()!.mode).toBe("ro");
    const node = (
      await dial(attachId, { authorization: `Bearer ${nodeToken}`, "x-ep-attach-proof": proof("s2", attachId) })
    ).ws!;
    const received: string[] = [];
    node.on("message", (d: Buffer) => received.push(d.toString()));
    await waitFor(() => viewer.frames.some((f) => f.state === "connected"));
    viewer.type("rm -rf /\r");
    viewer.resize(10, 5);
    node.send(Buffer.from("marker\r\n"), { binary: true });
    await viewer.waitScreen((sc) => sc.includes("marker"));
    await new Promise((r) => setTimeout(r, 100));
    expect(received).toEqual([]);
    node.close();
    await link.close();
  }, 30_000);
});
