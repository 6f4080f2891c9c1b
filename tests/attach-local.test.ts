// The attach gateway on epd.sock with the built epd: several viewers on one pane, resuming with
// the bytes missed (ring buffer), a one-shot run followed read-only with its exit status, a pane
// whose program exits, and `ep agent attach` in a real PTY with the detach key.
import { statSync } from "node:fs";
import { join } from "node:path";
import pty from "node-pty";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mustOpen, openAttach, unixAttachUrl } from "./attach-helpers.js";
import type { EpdProcess } from "./epd-harness.js";
import {
  buildAll,
  buildCli,
  fleetSetup,
  startFleetEpd,
  tmux,
  writeDaemonFile,
  type FleetSetup,
} from "./fleet-harness.js";
import { waitFor } from "./harness.js";
import { optionalTool } from "./optional-tools.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const tmuxTool = optionalTool("tmux", { pkg: "tmux", suite: "attach-local" });

const SOCKET = `ep-attach-local-${process.pid}`;
let s: FleetSetup;
let epd: EpdProcess;
let sock: string;
let domainId: string;

beforeAll(async () => {
  if (tmuxTool.skip) return;
  tmuxTool.require();
  await buildAll();
  s = await fleetSetup("ep-attl-");
  domainId = (await s.work.createDomain({ name: "local" })).domain!.id;
  writeDaemonFile(
    s,
    "agents.toml",
    `[[agent]]
id = "ops"
runtime = "muxhost_hosted"
command = ["bash", "--norc", "--noprofile"]
env = { PS1 = "ops$ " }

[[agent]]
id = "short"
runtime = "muxhost_hosted"
command = ["bash", "--norc", "--noprofile"]
`,
  );
  epd = await startFleetEpd(s, { EP_TMUX_SOCKET: SOCKET });
  sock = join(s.epdHome, "epd.sock");
  await waitFor(async () => (await tmux(SOCKET, ["list-sessions"])).stdout.includes("short"), 10_000);
}, 120_000);

afterAll(async () => {
  await epd?.stop();
  await tmux(SOCKET, ["kill-server"]);
  await s?.cleanup();
});

describe.skipIf(tmuxTool.skip)("epd.sock", () => {
  it("is a 0600 socket that refuses unknown agents and bad parameters", async () => {
    expect(statSync(sock).mode & 0o777).toBe(0o600);
    const ghost = await mustOpen(unixAttachUrl(sock, "agent=ghost"));
    expect(await ghost.waitFrame("error")).toMatchObject({ code: "agent_not_found" });
    expect((await ghost.closed).code).toBe(4004);
    const bad = await openAttach(unixAttachUrl(sock, "agent=ops&cols=0"));
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.field).toBe("cols");
  });

  it("shares one pane between viewers and resumes a viewer with exactly what it missed", async () => {
    const a = await mustOpen(unixAttachUrl(sock, "agent=ops"));
    const b = await mustOpen(unixAttachUrl(sock, "agent=ops&mode=ro"));
    expect((await b.waitFrame("hello")).mode).toBe("ro");
    a.type("echo both-$((8*8))\r");
    await a.waitScreen((sc) => sc.includes("both-64"));
    await b.waitScreen((sc) => sc.includes("both-64"));

    // b drops off once it has all the pane printed (its offset is a's); output continues; b comes
    // back with its offset and gets only the gap
    await waitFor(() => b.offset() === a.offset());
    const offset = b.offset();
    b.close();
    await b.closed;
    a.type("echo while-away-$((9*9))\r");
    await a.waitScreen((sc) => sc.includes("while-away-81"));
    const back = await mustOpen(unixAttachUrl(sock, `agent=ops&mode=ro&since=${offset}`));
    const hello = await back.waitFrame("hello");
    expect(hello).toMatchObject({ offset, reset: false });
    expect(hello.replay).toBeGreaterThan(0);
    await waitFor(() => back.bytes() >= hello.replay);
    a.close();
    back.close();
  }, 30_000);

  it("follows an agent's one-shot runs read-only with their exit status", async () => {
    const enrolled = await epd.call<{ agent: { id: string } }>("agent.enroll", {
      domainId,
      runtime: "shell",
      name: "runner",
    });
    const id = enrolled.agent.id;
    const f = await mustOpen(unixAttachUrl(sock, `agent=${id}`));
    expect(await f.waitFrame("hello")).toMatchObject({ target: "run", mode: "ro" });
    const missionId = (await s.work.createMission({ domainId, title: "m" })).mission!.id;
    await s.work.createTask({
      missionId,
      title: "echo",
      runtime: Runtime.SHELL,
      input: { command: "echo run-out-$((4*4)); exit 3" },
    });
    const exit = await f.waitFrame("exit", 20_000);
    expect(exit).toMatchObject({ exit_code: 3 });
    expect(exit.task_id).toMatch(/^tsk_/);
    await f.waitScreen((sc) => sc.includes("run-out-16") && sc.includes("exit 3"));
    // the follower stays for the next run; keystrokes go nowhere
    f.type("ignored\r");
    expect(f.ws.readyState).toBe(f.ws.OPEN);
    f.close();
  }, 40_000);

  it("shows the end of the pane's program and closes", async () => {
    const c = await mustOpen(unixAttachUrl(sock, "agent=short"));
    await c.waitFrame("hello");
    c.type("exit 7\r");
    const exit = await c.waitFrame("exit");
    expect(exit.reason).toContain("ended");
    expect((await c.closed).code).toBe(1000);
  }, 20_000);
});

describe.skipIf(tmuxTool.skip)("ep agent attach", () => {
  it("attaches in raw mode and detaches with Ctrl-]", async () => {
    const cli = await buildCli();
    const term = pty.spawn(process.execPath, [cli, "agent", "attach", "ops"], {
      cols: 100,
      rows: 30,
      env: { ...process.env, EP_HOME: s.home } as Record<string, string>,
    });
    let out = "";
    term.onData((d) => (out += d));
    const exited = new Promise<number>((r) => term.onExit(({ exitCode }) => r(exitCode)));
    await waitFor(() => out.includes("ops$"), 10_000);
    term.write("echo cli-$((7*7))\r");
    await waitFor(() => out.includes("cli-49"), 10_000);
    term.write("\x1d");
    expect(await exited).toBe(0);
    expect(out).toContain("detached from ops");
    // the pane is still there
    expect((await tmux(SOCKET, ["capture-pane", "-p", "-t", "=ops:"])).stdout).toContain("cli-49");
  }, 30_000);

  it("says what is wrong for an unknown agent", async () => {
    const cli = await buildCli();
    const term = pty.spawn(
      process.execPath,
      [cli, "agent", "attach", "nobody", "--url", s.tower.url, "--token", s.tower.adminToken],
      { env: { ...process.env, EP_HOME: s.home } as Record<string, string> },
    );
    let out = "";
    term.onData((d) => (out += d));
    const code = await new Promise<number>((r) => term.onExit(({ exitCode }) => r(exitCode)));
    expect(code).toBe(4);
    expect(out).toContain("agent nobody does not exist");
  }, 30_000);
});
