// A real tmux-hosted profile agent through the built epd: started in a pane on the daemon's own
// tmux socket, signalled with `ep agent signal` (send-keys, visible in capture-pane, an inbox
// event at the tower), and re-adopted, not duplicated, when epd restarts.
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EpdProcess } from "./epd-harness.js";
import {
  buildAll,
  fleetSetup,
  runEp,
  startFleetEpd,
  tmux,
  tmuxSessions,
  towerEvents,
  writeDaemonFile,
  type FleetSetup,
} from "./fleet-harness.js";
import { waitFor } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const tmuxTool = optionalTool("tmux", { pkg: "tmux", suite: "fleet-tmux" });

const SOCKET = `ep-fleet-test-${process.pid}`;
let s: FleetSetup;
let epd: EpdProcess | undefined;

beforeAll(async () => {
  if (tmuxTool.skip) return;
  tmuxTool.require();
  await buildAll();
  s = await fleetSetup();
}, 90_000);

afterAll(async () => {
  await epd?.stop();
  await tmux(SOCKET, ["kill-server"]);
  rmSync(join(tmpdir(), `tmux-${process.getuid!()}`, SOCKET), { force: true });
  await s?.cleanup();
});

const panePid = async (session: string) =>
  Number((await tmux(SOCKET, ["display-message", "-p", "-t", `=${session}:`, "#{pane_pid}"])).stdout.trim());

describe.skipIf(tmuxTool.skip)("muxhost_hosted profile agents", () => {
  it("runs in a pane, takes signals by send-keys, and is re-adopted after an epd restart", async () => {
    writeDaemonFile(
      s,
      "agents.toml",
      `# a plain shell standing in for a hosted coding agent
[[agent]]
id = "shell-1"
runtime = "muxhost_hosted"
session = "ops"
command = ["bash", "--norc", "--noprofile"]
env = { PS1 = "ops$ " }
capabilities = ["bash"]

[[agent]]
id = "watched"
runtime = "muxhost_hosted"
command = ["bash", "--norc", "--noprofile"]
supervise = true
`,
    );
    const env = { EP_TMUX_SOCKET: SOCKET };
    epd = await startFleetEpd(s, env);
    await waitFor(async () => (await tmuxSessions(SOCKET)).length === 2, 10_000);
    expect((await tmuxSessions(SOCKET)).sort()).toEqual(["ops", "watched"]);
    const pidBefore = await panePid("ops");
    const watchedBefore = await panePid("watched");

    // ep agent signal → send-keys into the pane
    const sig = await runEp(s.home, ["agent", "signal", "shell-1", "echo fleet-marker-$((6*7))", "--json"]);
    expect(sig.code, sig.stderr).toBe(0);
    expect(sig.json()).toEqual({ delivered_via: "tmux_send_keys" });
    await waitFor(
      async () => (await tmux(SOCKET, ["capture-pane", "-p", "-t", "=ops:"])).stdout.includes("fleet-marker-42"),
      10_000,
    );

    // by session name too, and the inbox events reach the tower
    expect((await runEp(s.home, ["agent", "signal", "ops", "echo second-$((1+1))"])).code).toBe(0);
    await waitFor(
      async () => (await tmux(SOCKET, ["capture-pane", "-p", "-t", "=ops:"])).stdout.includes("second-2"),
      10_000,
    );
    await waitFor(async () => (await towerEvents(s, "inbox", "agent.signal")).length >= 2, 10_000);
    const inbox = await towerEvents(s, "inbox", "agent.signal");
    expect(inbox[0].payload).toMatchObject({
      profile: "shell-1",
      prompt: "echo fleet-marker-$((6*7))",
      via: "tmux_send_keys",
      source: "cli",
      node_id: s.nodeId,
    });

    // the profiles are listed on mgmt.sock
    const list = await epd.call<{ agents: { id: string; session: string; state: string; supervised: boolean }[] }>(
      "agent.list",
    );
    expect(list.agents.find((a) => a.id === "shell-1")).toMatchObject({
      session: "ops",
      state: "running",
      supervised: false,
    });
    expect(list.agents.find((a) => a.id === "watched")).toMatchObject({
      session: "watched",
      state: "running",
      supervised: true,
    });

    // restart epd twice: the panes are adopted, never started again
    for (let i = 0; i < 2; i++) {
      await epd.stop();
      expect((await tmuxSessions(SOCKET)).sort()).toEqual(["ops", "watched"]); // panes outlive the daemon
      epd = await startFleetEpd(s, env);
      await waitFor(() => epd!.logs.some((l) => l.msg === "fleet started"), 10_000);
      expect((await tmuxSessions(SOCKET)).sort()).toEqual(["ops", "watched"]);
      expect(await panePid("ops")).toBe(pidBefore);
      expect(await panePid("watched")).toBe(watchedBefore);
      // "ops"; "watched" is adopted by the watchdog (alive at add)
      expect(epd.logs.filter((l) => l.msg === "re-adopted the tmux pane of a profile agent").length).toBe(1);
    }
    // the same pane still answers, with its history intact
    expect((await runEp(s.home, ["agent", "signal", "shell-1", "echo after-restart-$((2*3))"])).code).toBe(0);
    await waitFor(async () => {
      const screen = (await tmux(SOCKET, ["capture-pane", "-p", "-t", "=ops:", "-S", "-"])).stdout;
      return screen.includes("after-restart-6") && screen.includes("fleet-marker-42");
    }, 10_000);

    // a supervised pane that dies is restarted by the watchdog (supervise restart by the operator here)
    const restarted = await runEp(s.home, ["agent", "supervise", "restart", "watched", "--json"]);
    expect(restarted.code, restarted.stderr).toBe(0);
    expect(restarted.json().agent).toMatchObject({ id: "watched", state: "running", restarts: 1, supervised: true });
    expect(await panePid("watched")).not.toBe(watchedBefore);
    expect((await tmuxSessions(SOCKET)).sort()).toEqual(["ops", "watched"]);

    // unknown target
    const ghost = await runEp(s.home, ["agent", "signal", "ghost", "hi", "--json"]);
    expect(ghost.code).toBe(4);
    expect(ghost.stderr).toContain("no agent or profile named ghost");
  }, 120_000);
});
