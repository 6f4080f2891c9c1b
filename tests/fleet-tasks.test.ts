// Profile agents of agents.toml that name a `domain` are agents at the tower: it routes `assigned`
// tasks, broadcast runs and matching first_claim tasks to them. The built epd claims for them
// under their tower agent id and runs each task as an ephemeral run of the profile's runtime in
// the profile's cwd with its env, reported like any other agent's (docs/supervision.md). Without
// that those tasks stayed `queued` forever.
import { readJournal } from "../daemon/worker/journal.js";
import { statusWord } from "../test-support/words.js";
import { ClaimPolicy } from "../gen/ep/tower/v1/resources_pb.js";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import type { EpdProcess } from "./epd-harness.js";
import {
  buildAll,
  fleetSetup,
  startFleetEpd,
  tmux,
  tmuxSessions,
  writeDaemonFile,
  type FleetSetup,
} from "./fleet-harness.js";
import { waitFor } from "./harness.js";
import { optionalTool } from "./optional-tools.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const tmuxTool = optionalTool("tmux", { pkg: "tmux", suite: "fleet-tasks" });
const SOCKET = `ep-fleet-tasks-${process.pid}`;

let s: FleetSetup;
let epd: EpdProcess | undefined;
let domainId = "";
let missionId = "";
let profileCwd = "";
let opsAgentId = "";
/** No periodic poll during the test: only task_ready wake-ups (and the start-up catch-up) make claims. */
const NO_POLL = { EP_POLL_MS: "600000", EP_TMUX_SOCKET: SOCKET };

async function waitTask(taskId: string, statuses = ["succeeded", "failed"], timeoutMs = 20_000) {
  let last = "";
  await waitFor(async () => {
    last = statusWord((await s.work.getTask({ taskId })).task!.status);
    return statuses.includes(last);
  }, timeoutMs).catch(() => {
    throw new Error(`task ${taskId} stayed ${last}, wanted ${statuses.join("|")}\n${epd?.stderr().slice(-4000)}`);
  });
  return (await s.work.getTask({ taskId })).task!;
}

beforeAll(async () => {
  await buildAll();
  s = await fleetSetup("ep-fleet-tasks-");
  domainId = (await s.work.createDomain({ name: "profiles" })).domain!.id;
  missionId = (await s.work.createMission({ domainId, title: "profile work" })).mission!.id;
  profileCwd = join(s.home, "ops-cwd");
  mkdirSync(profileCwd, { recursive: true });
  const hosted = tmuxTool.skip
    ? ""
    : `
[[agent]]
id = "pm"
runtime = "muxhost_hosted"
command = ["bash", "--norc", "--noprofile"]
domain = "${domainId}"
capabilities = ["hosted"]
`;
  if (!tmuxTool.skip) {
    // task runs of muxhost_hosted: a shell in a pane of their own on the test's tmux socket
    writeFileSync(
      join(s.epdHome, "runtimes.toml"),
      `[muxhost_hosted]
command = "bash"
args = ["--norc", "--noprofile"]
task_args = ["-c", "echo task says {prompt}; echo in $(pwd)"]
socket_name = "${SOCKET}"
`,
    );
  }
  writeDaemonFile(
    s,
    "agents.toml",
    `[[agent]]
id = "ops"
runtime = "shell"
cwd = "${profileCwd}"
env = { OPS_FLAG = "from-the-profile" }
capabilities = ["ops"]
domain = "${domainId}"
${hosted}`,
  );
  epd = await startFleetEpd(s, NO_POLL);
  await waitFor(() => epd!.logs.some((l) => l.msg === "fleet started"), 10_000);
  const transport = createConnectTransport({
    baseUrl: s.tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${s.tower.adminToken}`), next(req))],
  });
  const agents = createClient(AgentService, transport);
  await waitFor(async () => {
    opsAgentId = (await agents.listAgents({ domainId })).agents.find((a) => a.runtime === Runtime.SHELL)?.id ?? "";
    return opsAgentId !== "";
  }, 10_000);
}, 90_000);

afterAll(async () => {
  await epd?.stop();
  if (!tmuxTool.skip) await tmux(SOCKET, ["kill-server"]);
  await s?.cleanup();
});

describe("tasks for profile agents", () => {
  it("an assigned task to a shell profile runs in the profile's cwd with its env and succeeds", async () => {
    const t = (
      await s.work.createTask({
        missionId,
        title: "assigned to the profile",
        runtime: Runtime.SHELL,
        claimPolicy: ClaimPolicy.ASSIGNED,
        assigneeAgentId: opsAgentId,
        input: {
          command:
            'echo "flag=$OPS_FLAG profile=$EP_PROFILE agent=$EP_AGENT_ID task=$EP_TASK_ID ' +
            'session=$EP_SECRETS_SESSION"; echo "cwd=$(pwd)"; echo "mcp=$EP_MCP_CONFIG"',
        },
      })
    ).task!;
    const done = await waitTask(t.id);
    expect(statusWord(done.status), JSON.stringify(done.result)).toBe("succeeded");
    expect(done.claimedBy).toBe(opsAgentId);
    expect(done.result!.exitCode).toBe(0);
    const out = done.result!.output;
    expect(out).toContain(`flag=from-the-profile profile=ops agent=${opsAgentId} task=${t.id}`);
    expect(out).toMatch(/session=ses_\S{10,}/);
    expect(out).toContain(`cwd=${profileCwd}`);
    // the run's MCP config stays out of the profile's directory
    expect(out).toContain(`mcp=${join(s.epdHome, "work", t.id, ".ep-mcp.json")}`);

    // its output reached the tower as progress, like any agent's run
    const progress = (await s.events.listEvents({ limit: 1000, filter: { types: ["progress"] } })).events.filter(
      (e) => e.taskId === t.id,
    );
    expect(progress.map((e) => String((e.payload as any).text)).join("\n")).toContain("flag=from-the-profile");
    expect(progress.every((e) => e.agentId === opsAgentId)).toBe(true);

    // journalled while it ran, and out of the journal once the tower acknowledged the outcome
    await waitFor(() => !readJournal(s.epdHome).some((e) => e.taskId === t.id), 5_000);
  }, 40_000);

  it("agent.list says which task a profile agent runs while it runs", async () => {
    const gate = join(s.epdHome, "..", `gate-${Date.now()}`);
    const t = (
      await s.work.createTask({
        missionId,
        title: "held open",
        runtime: Runtime.SHELL,
        claimPolicy: ClaimPolicy.ASSIGNED,
        assigneeAgentId: opsAgentId,
        input: { command: `while [ ! -e '${gate}' ]; do sleep 0.05; done; echo released` },
      })
    ).task!;
    type Listed = { agents: { id: string; detail: string }[] };
    const ops = async () => (await epd!.call<Listed>("agent.list")).agents.find((a) => a.id === "ops")!;
    await waitFor(async () => (await ops()).detail.includes(`running task ${t.id}`), 15_000);
    writeFileSync(gate, "");
    expect(statusWord((await waitTask(t.id)).status)).toBe("succeeded");
    await waitFor(async () => !(await ops()).detail.includes("running task"), 10_000);
  }, 40_000);

  it("a broadcast to a domain with an enrolled worker agent and a profile agent succeeds with both runs", async () => {
    const worker = await epd!.call<{ agent: { id: string } }>("agent.enroll", {
      domainId,
      runtime: "shell",
      name: "worker",
    });
    const created = await s.work.createTask({
      missionId,
      title: "everyone",
      runtime: Runtime.SHELL,
      claimPolicy: ClaimPolicy.BROADCAST,
      input: { command: 'echo "ran as $EP_AGENT_ID in $(pwd)"' },
    });
    expect(created.runs.map((r) => r.assigneeAgentId).sort()).toEqual([opsAgentId, worker.agent.id].sort());
    const parent = await waitTask(created.task!.id);
    expect(statusWord(parent.status)).toBe("succeeded");
    const runs = await Promise.all(created.runs.map((r) => waitTask(r.id)));
    for (const r of runs) {
      expect(statusWord(r.status)).toBe("succeeded");
      expect(r.claimedBy).toBe(r.assigneeAgentId);
      expect(r.result!.output).toContain(`ran as ${r.assigneeAgentId}`);
    }
    // the profile's run in its cwd, the worker agent's in a fresh work/<task_id>
    const byAgent = new Map(runs.map((r) => [r.claimedBy, r]));
    expect(byAgent.get(opsAgentId)!.result!.output).toContain(`in ${profileCwd}`);
    const w = byAgent.get(worker.agent.id)!;
    expect(w.result!.output).toContain(`in ${join(s.epdHome, "work", w.id)}`);
  }, 40_000);

  it("an assigned task created while epd is down runs once epd is back (catch-up claims cover profiles)", async () => {
    await epd!.stop();
    epd = undefined;
    const t = (
      await s.work.createTask({
        missionId,
        title: "while down",
        runtime: Runtime.SHELL,
        claimPolicy: ClaimPolicy.ASSIGNED,
        assigneeAgentId: opsAgentId,
        input: { command: "echo caught-up" },
      })
    ).task!;
    epd = await startFleetEpd(s, NO_POLL);
    const done = await waitTask(t.id);
    expect(statusWord(done.status)).toBe("succeeded");
    expect(done.claimedBy).toBe(opsAgentId); // the same tower agent: fleet-state.json kept it
    expect(done.result!.output).toContain("caught-up");
  }, 40_000);

  it.skipIf(tmuxTool.skip)(
    "an assigned task to a muxhost_hosted profile runs in its own tmux session, not in the profile's pane",
    async () => {
      const transport = createConnectTransport({
        baseUrl: s.tower.url,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${s.tower.adminToken}`), next(req))],
      });
      const pmId = (await createClient(AgentService, transport).listAgents({ domainId })).agents.find(
        (a) => a.runtime === Runtime.MUXHOST_HOSTED,
      )!.id;
      await waitFor(async () => (await tmuxSessions(SOCKET)).includes("pm"), 10_000);
      const t = (
        await s.work.createTask({
          missionId,
          title: "hosted",
          runtime: Runtime.MUXHOST_HOSTED,
          claimPolicy: ClaimPolicy.ASSIGNED,
          assigneeAgentId: pmId,
          input: { prompt: "hosted-task-marker" },
        })
      ).task!;
      const done = await waitTask(t.id, ["succeeded", "failed"], 30_000);
      expect(statusWord(done.status), JSON.stringify(done.result)).toBe("succeeded");
      expect(done.claimedBy).toBe(pmId);
      expect(done.result!.output).toContain("task says hosted-task-marker");
      expect(done.result!.output).toContain(`in ${join(s.epdHome, "agents", "pm")}`);
      // nothing was typed into the long-running pane, which is still there
      expect((await tmux(SOCKET, ["capture-pane", "-p", "-t", "=pm:"])).stdout).not.toContain("hosted-task-marker");
      expect(await tmuxSessions(SOCKET)).toContain("pm");
    },
    60_000,
  );
});
