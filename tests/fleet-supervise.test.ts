// Supervision through the built epd: a supervised process agent (process backend) killed with
// SIGKILL is restarted by the watchdog after the poll; pause/resume and restart by `ep agent
// supervise …` and by the tower's SuperviseAgent over the link; every step a matrix event; the agent
// outlives an epd restart and is re-adopted.
import { createClient } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createMgmtTransport } from "../daemon/mgmt/client.js";
import { processGone } from "../daemon/runtimes/process-group.js";
import { SuperviseService } from "../gen/ep/daemon/v1/mgmt_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import type { EpdProcess } from "./epd-harness.js";
import { type FleetSetup, fleetSuite, runEp, startFleetEpd, towerEvents, writeDaemonFile } from "./fleet-harness.js";
import { waitFor } from "./harness.js";

let s: FleetSetup;
let epd: EpdProcess | undefined;
const pids = new Set<number>();

fleetSuite("ep-fleet-", { set: (setup) => (s = setup), epd: () => epd, pids });

// A killed agent stays a zombie until epd reaps it (asynchronously, on SIGCHLD): that is gone, not alive.
const alive = (pid: number) => !processGone(pid);

describe("supervised profile agents", () => {
  it("watchdog restarts a killed agent, honours pause/resume, " +
    "takes tower commands, survives epd restarts", async () => {
    const domainId = (await s.work.createDomain({ name: "fleet" })).domain!.id;
    writeDaemonFile(
      s,
      "agents.toml",
      `[[agent]]
id = "svc"
name = "sleeper"
runtime = "shell"
command = ["sleep", "3600"]
supervise = true
domain = "${domainId}"
capabilities = ["ops"]
`,
    );
    const env = { EP_WATCHDOG_POLL_MS: "200", EP_WATCHDOG_GRACE_MS: "400", EP_WATCHDOG_THROTTLE_MS: "600000" };
    epd = await startFleetEpd(s, env);
    const ep = (...args: string[]) => runEp(s.home, [...args, "--json"]);

    // list / status with --json
    const listed = await ep("agent", "supervise", "list");
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.json().agents).toHaveLength(1);
    const first = listed.json().agents[0];
    expect(first).toMatchObject({
      id: "svc",
      name: "sleeper",
      runtime: "shell",
      state: "running",
      supervised: true,
      paused: false,
      restarts: 0,
    });
    expect(first.pid).toBeGreaterThan(0);
    expect(first.domain_id).toBe(domainId);
    pids.add(first.pid);
    const towerAgent = /tower agent (agt_\S+)/.exec(first.detail)![1];

    // SIGKILL (after the start's grace: a death inside it would count as a failed start) → the next poll restarts it
    await new Promise((r) => setTimeout(r, 700));
    process.kill(first.pid, "SIGKILL");
    await waitFor(async () => {
      const st = (await ep("agent", "supervise", "status", "svc")).json().agent;
      return st.restarts === 1 && st.state === "running" && st.pid > 0 && st.pid !== first.pid;
    }, 10_000);
    const second = (await ep("agent", "supervise", "status", "svc")).json().agent;
    pids.add(second.pid);
    expect(second.detail).toContain("found dead by the watchdog poll");
    await waitFor(async () => (await towerEvents(s, "matrix", "supervise.restart")).length >= 1, 10_000);
    const restartEvent = (await towerEvents(s, "matrix", "supervise.restart"))[0];
    expect(restartEvent).toMatchObject({ status: "restart", agentId: towerAgent });
    expect(restartEvent.payload).toMatchObject({
      profile: "svc",
      action: "restart",
      reason: "found dead by the watchdog poll",
    });

    // pause: a death is not restarted, and the skip is a matrix event with the reason
    expect((await ep("agent", "supervise", "pause", "svc")).json().agent.paused).toBe(true);
    await new Promise((r) => setTimeout(r, 500)); // past the grace of the last restart
    process.kill(second.pid, "SIGKILL");
    await waitFor(
      async () => (await towerEvents(s, "matrix", "supervise.skip")).some((e) => /paused/.test(e.payload.reason)),
      10_000,
    );
    await new Promise((r) => setTimeout(r, 600)); // three more polls
    const paused = (await ep("agent", "supervise", "status", "svc")).json().agent;
    expect(paused).toMatchObject({ state: "dead", paused: true, restarts: 1 });

    // resume: the next poll restarts it
    expect((await ep("agent", "supervise", "resume", "svc")).json().agent.paused).toBe(false);
    await waitFor(
      async () => (await ep("agent", "supervise", "status", "svc")).json().agent.state === "running",
      10_000,
    );
    const third = (await ep("agent", "supervise", "status", "svc")).json().agent;
    pids.add(third.pid);
    expect(third.restarts).toBe(2);
    expect(alive(third.pid)).toBe(true);

    // the tower's SuperviseAgent reaches the profile over the link (by its tower agent id)
    const towerAgents = s.client(AgentService);
    // the tower knows its node supervises it (the console offers restart, pause, resume only then)
    expect((await towerAgents.getAgent({ agentId: towerAgent })).agent!.supervised).toBe(true);
    await towerAgents.superviseAgent({ agentId: towerAgent, op: "pause" });
    await waitFor(
      async () => (await ep("agent", "supervise", "status", towerAgent)).json().agent.paused === true,
      10_000,
    );
    await towerAgents.superviseAgent({ agentId: towerAgent, op: "resume" });
    await waitFor(async () => (await ep("agent", "supervise", "status", "svc")).json().agent.paused === false, 10_000);

    // the generated Connect client on mgmt.sock: operator restart
    const sup = createClient(SuperviseService, createMgmtTransport(epd.mgmt));
    const restarted = await sup.restart({ id: "svc" });
    expect(restarted.agent).toMatchObject({ id: "svc", restarts: 3, state: "running" });
    pids.add(restarted.agent!.pid);
    expect(alive(third.pid)).toBe(false);

    // unknown ids: exit code 4 / agent_not_found
    const ghost = await ep("agent", "supervise", "status", "ghost");
    expect(ghost.code).toBe(4);
    expect(ghost.stderr).toContain("ghost");
    await expect(sup.status({ id: "" })).rejects.toThrow(/id/);

    // epd restart: the agent keeps running and is re-adopted (same pid, no second copy)
    await epd.stop();
    expect(alive(restarted.agent!.pid)).toBe(true);
    epd = await startFleetEpd(s, env);
    const adopted = (await ep("agent", "supervise", "status", "svc")).json().agent;
    expect(adopted).toMatchObject({ state: "running", pid: restarted.agent!.pid, restarts: 0 });
  }, 120_000);
});
