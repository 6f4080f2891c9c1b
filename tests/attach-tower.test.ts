// Mediated attach through a real ep-tower and a real epd (both built, child processes): a
// tmux-hosted shell profile typed into and read back through /api/attach-ws, the screen read by
// @xterm/headless; resize reaching the PTY; a viewer's input dropped; refused tickets; and
// attach working on the first try after epd is killed with SIGKILL and started again.
import { Role } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { mustOpen, openAttach, wsUrl } from "./attach-helpers.js";
import type { EpdProcess } from "./epd-harness.js";
import { buildAll, fleetSetup, startFleetEpd, tmux, writeDaemonFile, type FleetSetup } from "./fleet-harness.js";
import { waitFor } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const tmuxTool = optionalTool("tmux", { pkg: "tmux", suite: "attach-tower" });

const SOCKET = `ep-attach-test-${process.pid}`;
let s: FleetSetup;
let epd: EpdProcess | undefined;
let agentId: string;

const clients = (token: string) => {
  const transport = createConnectTransport({
    baseUrl: s.tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
  });
  return { auth: createClient(AuthService, transport), agents: createClient(AgentService, transport) };
};

async function ticket(token = s.tower.adminToken, id = agentId): Promise<string> {
  return (await clients(token).auth.createTicket({ purpose: "attach", agentId: id })).ticket;
}

const attachUrl = (t: string, extra = "") =>
  `${wsUrl(s.tower.url)}/api/attach-ws?ticket=${encodeURIComponent(t)}${extra}`;
const pane = async () => (await tmux(SOCKET, ["capture-pane", "-p", "-J", "-S", "-", "-t", "=ops:"])).stdout;

beforeAll(async () => {
  if (tmuxTool.skip) return;
  tmuxTool.require();
  await buildAll();
  s = await fleetSetup("ep-attach-");
  const domainId = (await s.work.createDomain({ name: "attach" })).domain!.id;
  writeDaemonFile(
    s,
    "agents.toml",
    `[[agent]]
id = "ops-shell"
runtime = "muxhost_hosted"
session = "ops"
domain = "${domainId}"
command = ["bash", "--norc", "--noprofile"]
env = { PS1 = "ops$ " }
`,
  );
  epd = await startFleetEpd(s, { EP_TMUX_SOCKET: SOCKET });
  await waitFor(
    async () => (await clients(s.tower.adminToken).agents.listAgents({ domainId })).agents.length === 1,
    15_000,
  );
  agentId = (await clients(s.tower.adminToken).agents.listAgents({ domainId })).agents[0].id;
  await waitFor(async () => (await pane()).includes("ops$"), 10_000);
}, 120_000);

afterAll(async () => {
  await epd?.stop();
  await tmux(SOCKET, ["kill-server"]);
  await s?.cleanup();
});

describe.skipIf(tmuxTool.skip)("attach through the tower", () => {
  it("types into a tmux-hosted shell and reads the echo", async () => {
    const c = await mustOpen(attachUrl(await ticket()));
    const hello = await c.waitFrame("hello");
    expect(hello).toMatchObject({ type: "hello", agent_id: agentId, target: "tmux", session: "ops", mode: "rw" });
    expect(c.frames.map((f) => f.type).slice(0, 2)).toEqual(["status", "status"]); // dialing, connected
    c.type("echo attach-$((6*7))\r");
    await c.waitScreen((sc) => sc.includes("attach-42"));
    expect(await pane()).toContain("attach-42");
    c.close();
    expect((await c.closed).code).toBe(1005);
  }, 30_000);

  it("resizes the PTY", async () => {
    const c = await mustOpen(attachUrl(await ticket(), "&cols=80&rows=24"));
    await c.waitFrame("hello");
    c.resize(101, 33);
    // tmux keeps one row for its status line: the pane is 101x32
    await waitFor(
      async () =>
        (await tmux(SOCKET, ["display-message", "-p", "-t", "=ops:", "#{pane_width}x#{pane_height}"])).stdout.trim() ===
        "101x32",
      10_000,
    );
    // tmux resizes the pane's tty a moment after the window: ask until the shell sees it
    await waitFor(async () => {
      c.type("clear; stty size\r");
      return c
        .waitScreen((sc) => /^32 101$/m.test(sc), 500)
        .then(
          () => true,
          () => false,
        );
    }, 10_000);
    c.close();
  }, 30_000);

  it("drops a viewer's input while an operator's arrives", async () => {
    const viewerToken = (await clients(s.tower.adminToken).auth.createToken({ name: "watcher", role: Role.VIEWER }))
      .secret;
    const viewer = await mustOpen(attachUrl(await ticket(viewerToken)));
    expect(await viewer.waitFrame("hello")).toMatchObject({ mode: "ro" });
    viewer.type("echo viewer-typed-$((2+2))\r");
    viewer.resize(50, 10);
    const operator = await mustOpen(attachUrl(await ticket()));
    await operator.waitFrame("hello");
    operator.type("echo operator-typed-$((3+3))\r");
    // the viewer sees what the operator typed, and its own keystrokes never reached the pane
    await viewer.waitScreen((sc) => sc.includes("operator-typed-6"));
    expect(await pane()).not.toContain("viewer-typed");
    expect(await pane()).not.toContain("viewer-typed-4");
    viewer.close();
    operator.close();
  }, 30_000);

  it("refuses a missing, unknown, used or wrong-purpose ticket", async () => {
    const none = await openAttach(`${wsUrl(s.tower.url)}/api/attach-ws?agent_id=${agentId}`);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe("unauthenticated");
    expect((await openAttach(attachUrl("tkt_not-a-real-ticket"))).status).toBe(401);
    const t = await ticket();
    const first = await mustOpen(attachUrl(t));
    await first.waitFrame("hello");
    const again = await openAttach(attachUrl(t));
    expect(again.status).toBe(401);
    expect(again.body.error.message).toContain("used or expired");
    first.close();
    const login = (await clients(s.tower.adminToken).auth.createTicket({ purpose: "login" })).ticket;
    expect((await openAttach(attachUrl(login, `&agent_id=${agentId}`))).status).toBe(401);
    expect((await openAttach(attachUrl(await ticket(s.tower.adminToken, "agt_missing")))).status).toBe(404);
    // a plain GET is told to upgrade
    const plain = await fetch(`${s.tower.url}/api/attach-ws`, {
      headers: { authorization: `Bearer ${s.tower.adminToken}` },
    });
    expect(plain.status).toBe(426);
  }, 30_000);

  it("works on the first try after epd is killed and started again", async () => {
    await epd!.kill9();
    epd = await startFleetEpd(s, { EP_TMUX_SOCKET: SOCKET });
    const c = await mustOpen(attachUrl(await ticket()));
    expect(await c.waitFrame("hello")).toMatchObject({ target: "tmux", mode: "rw" });
    c.type("echo after-restart-$((5*5))\r");
    await c.waitScreen((sc) => sc.includes("after-restart-25"));
    c.close();
  }, 60_000);
});
