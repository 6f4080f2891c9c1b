// The node's cron and supervision state at the tower, end to end: a built epd with a cron.toml
// job and a supervised process agent reports both (NodeService.ReportNodeState); the tower's
// list_cron_jobs and get_supervision (POST /mcp/call) answer the latest report per node with its
// time; a fire and a restart reach the tower without waiting for the periodic push.
import { enumWord } from "../common/vocab.js";
import { AgentStateSchema } from "../gen/ep/tower/v1/resources_pb.js";
import { describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import type { EpdProcess } from "./epd-harness.js";
import { type FleetSetup, fleetSuite, startFleetEpd, writeDaemonFile } from "./fleet-harness.js";
import { waitFor } from "./harness.js";

let s: FleetSetup;
let epd: EpdProcess | undefined;
const pids = new Set<number>();

fleetSuite("ep-node-state-", { set: (setup) => (s = setup), epd: () => epd, pids });

async function tool(name: string, args: Record<string, unknown> = {}): Promise<any> {
  const res = await fetch(`${s.tower.url}/mcp/call`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.tower.adminToken}`, "content-type": "application/json" },
    body: JSON.stringify({ tool: name, arguments: args }),
  });
  const body = (await res.json()) as any;
  if (res.status !== 200) throw new Error(`${name}: HTTP ${res.status} ${JSON.stringify(body)}`);
  return body.result;
}

describe("node state at the tower", () => {
  it("list_cron_jobs and get_supervision show what a real epd reported, fresh after changes", async () => {
    const domainId = (await s.work.createDomain({ name: "state" })).domain!.id;
    writeDaemonFile(
      s,
      "cron.toml",
      `# every minute, a plain command
[[job]]
name = "tick"
schedule = "* * * * *"
dispatch = "bash"
prompt = "echo tick"

[[job]]
name = "pulse"
kind = "heartbeat"
interval = "1s"
dispatch = "bash"
prompt = "echo pulse"
`,
    );
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
`,
    );
    // the periodic push is an hour away: everything below arrives through the on-change pushes
    epd = await startFleetEpd(s, {
      EP_NODE_STATE_MS: "3600000",
      EP_CRON_TICK_MS: "1000",
      EP_WATCHDOG_POLL_MS: "200",
      EP_WATCHDOG_GRACE_MS: "400",
    });
    const started = Date.now();

    // the cron jobs, with their next fire time and the report's time
    let node: any;
    await waitFor(async () => {
      node = (await tool("list_cron_jobs", { node_id: s.nodeId })).nodes[0];
      return node.jobs.length === 2 && node.jobs.some((j: any) => j.name === "pulse" && j.last_fire);
    }, 15_000);
    expect(node).toMatchObject({ node_id: s.nodeId, hostname: "worker-1", node_status: "online", config_errors: [] });
    expect(Date.parse(node.reported_at)).toBeGreaterThanOrEqual(started - 1000);
    const tick = node.jobs.find((j: any) => j.name === "tick");
    expect(tick).toMatchObject({
      name: "tick",
      kind: "cron",
      schedule: "* * * * *",
      dispatch: "bash",
      prompt: "echo tick",
      missed: "skip",
      line: 2,
      running: false,
    });
    const next = Date.parse(tick.next_fire_at);
    expect(next).toBeGreaterThan(Date.now() - 2000);
    expect(next).toBeLessThanOrEqual(Date.now() + 62_000);
    expect(new Date(next).getUTCSeconds()).toBe(0);
    // a fire is pushed at once: the heartbeat's last fire moves with each tick
    const firstFire = node.jobs.find((j: any) => j.name === "pulse").last_fire;
    expect(firstFire).toMatchObject({ status: "ok" });
    await waitFor(async () => {
      const again = (await tool("list_cron_jobs", { node_id: s.nodeId })).nodes[0];
      return (
        again.jobs.find((j: any) => j.name === "pulse").last_fire.fired_at !== firstFire.fired_at &&
        again.reported_at !== node.reported_at
      );
    }, 10_000);

    // every reporting node without node_id
    expect((await tool("list_cron_jobs")).nodes.map((n: any) => n.node_id)).toEqual([s.nodeId]);

    // supervision: the watchdog's view of the profile, with the tower agent id and state
    let sup: any;
    await waitFor(async () => {
      sup = (await tool("get_supervision", { node_id: s.nodeId })).nodes[0];
      return (
        sup.agents.length === 1 &&
        sup.agents[0].state === "running" &&
        sup.agents[0].pid > 0 &&
        sup.agents[0].agent_id !== ""
      );
    }, 15_000);
    const agent = sup.agents[0];
    pids.add(agent.pid);
    expect(agent).toMatchObject({
      profile: "svc",
      name: "sleeper",
      runtime: "shell",
      backend: "process",
      paused: false,
      restarts: 0,
      domain_id: domainId,
    });
    const towerAgent = (
      await createClient(
        AgentService,
        createConnectTransport({
          baseUrl: s.tower.url,
          httpVersion: "1.1",
          interceptors: [
            (next) => (req) => (req.header.set("authorization", `Bearer ${s.tower.adminToken}`), next(req)),
          ],
        }),
      ).getAgent({ agentId: agent.agent_id })
    ).agent!;
    expect(towerAgent.name).toBe("sleeper");
    // the tool shows the word of the same state
    expect(agent.tower_state).toBe(enumWord(AgentStateSchema, towerAgent.state));

    // a restart by the watchdog reaches the tower without the periodic push
    await new Promise((r) => setTimeout(r, 600)); // past the start's grace
    process.kill(agent.pid, "SIGKILL");
    await waitFor(async () => {
      const a = (await tool("get_supervision", { agent_id: agent.agent_id })).nodes[0].agents[0];
      if (a?.pid) pids.add(a.pid);
      return a?.restarts === 1 && a.state === "running" && a.pid !== agent.pid;
    }, 15_000);
    const restarted = (await tool("get_supervision", { agent_id: agent.agent_id })).nodes[0].agents[0];
    expect(restarted.last_restart_reason).toContain("found dead by the watchdog poll");
  }, 90_000);
});
