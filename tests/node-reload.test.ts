// `ep node reload <node_id>` end to end: a built tower and epd; the tower's ReloadNodeConfig
// sends config_reload over the link, the node reloads cron.toml and runtimes.toml, checks
// agents.toml, and answers with a config.reload matrix event the command waits for. Errors come
// back with their file and line, and the running configuration is kept.
import { AgentState, TaskKind, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { processGone } from "../daemon/runtimes/process-group.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import type { EpdProcess } from "./epd-harness.js";
import { type FleetSetup, fleetSuite, runEp, startFleetEpd, towerEvents, writeDaemonFile } from "./fleet-harness.js";
import { waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

let s: FleetSetup;
let epd: EpdProcess | undefined;

fleetSuite("ep-node-reload-", { set: (setup) => (s = setup), epd: () => epd });

const ep = (...args: string[]) => runEp(s.home, [...args, "--url", s.tower.url, "--token", s.tower.adminToken]);

async function cronJobs(): Promise<{ reportedAt: string; names: string[]; errors: any[] }> {
  const res = await fetch(`${s.tower.url}/mcp/call`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.tower.adminToken}`, "content-type": "application/json" },
    body: JSON.stringify({ tool: "list_cron_jobs", arguments: { node_id: s.nodeId } }),
  });
  const node = ((await res.json()) as any).result.nodes[0];
  return { reportedAt: node.reported_at, names: node.jobs.map((j: any) => j.name).sort(), errors: node.config_errors };
}

const job = (name: string) => `[[job]]\nname = "${name}"\nschedule = "0 3 * * *"\ndispatch = "bash"\nprompt = "true"\n`;

describe("ep node reload", () => {
  it("reloads cron.toml and runtimes.toml on the node, " +
    "reports errors with lines, keeps the running config", async () => {
    writeDaemonFile(s, "cron.toml", job("nightly"));
    epd = await startFleetEpd(s, { EP_NODE_STATE_MS: "3600000" });
    await waitFor(async () => (await cronJobs()).names.join() === "nightly", 15_000);
    const domainId = (await s.work.createDomain({ name: "reload" })).domain!.id;
    const missionId = (await s.work.createMission({ domainId, title: "m" })).mission!.id;
    await epd.call("agent.enroll", { domainId, runtime: "shell", name: "sh" });
    const runShell = async (title: string) => {
      const task = (
        await s.work.createTask({
          missionId,
          kind: TaskKind.CLAIMABLE,
          title,
          runtime: Runtime.SHELL,
          input: { command: 'echo "greeting=${EP_GREETING:-none}"' },
        })
      ).task!;
      let output = "";
      await waitFor(async () => {
        const t = (await s.work.getTask({ taskId: task.id })).task!;
        output = t.result?.output ?? "";
        return t.status === TaskStatus.SUCCEEDED;
      }, 15_000);
      return output;
    };
    expect(await runShell("before")).toContain("greeting=none");

    // valid changes: a second cron job, an env var for shell runs
    writeDaemonFile(s, "cron.toml", `${job("nightly")}\n${job("backup")}`);
    writeFileSync(join(s.epdHome, "runtimes.toml"), `[shell]\nenv = { EP_GREETING = "hello" }\n`);
    const ok = await ep("node", "reload", s.nodeId, "--json");
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.json()).toMatchObject({ node_id: s.nodeId, status: "ok", errors: [] });
    expect(ok.json().results).toEqual([
      "cron.toml: 2 jobs",
      "agents.toml: unchanged (0 profiles)",
      "runtimes.toml: reloaded",
    ]);
    expect(ok.json().event_id).toBeGreaterThan(0);
    // the tower's copy follows without waiting for the periodic push, and new runs use the new runtimes.toml
    await waitFor(async () => (await cronJobs()).names.join() === "backup,nightly", 10_000);
    expect(await runShell("after")).toContain("greeting=hello");

    // broken files: every error with its file and line; the running jobs and runtimes are kept
    writeDaemonFile(
      s,
      "cron.toml",
      `${job("nightly")}\n[[job]]\nname = "bad"\nschedule = "0 25 * * *"\nprompt = "x"\ndispatch = "bash"\n`,
    );
    writeFileSync(join(s.epdHome, "runtimes.toml"), `[shell]\nenv = { EP_GREETING = "bye" }\ntimeout_second = 5\n`);
    writeDaemonFile(s, "agents.toml", `[[agent]]\nid = "x"\nruntime = "nope"\n`);
    const bad = await ep("node", "reload", s.nodeId);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toContain(`${s.nodeId}: configuration reload failed`);
    expect(bad.stdout).toMatch(/cron\.toml, line 9, bad, field schedule: .*25/);
    expect(bad.stdout).toMatch(/runtimes\.toml, line 3, field shell\.timeout_second: /);
    expect(bad.stdout).toMatch(/agents\.toml, line \d, x, field runtime: /);
    expect(bad.stdout).toContain("cron.toml: 1 error; the running jobs were kept");
    const events = await towerEvents(s, "matrix", "config.reload");
    expect(events.map((e) => e.status)).toEqual(["ok", "failed"]);
    expect(events[1].payload).toMatchObject({ source: "tower", status: "failed", node_id: s.nodeId });
    expect(events[1].payload.errors.map((e: any) => [e.file.split("/").pop(), e.line])).toEqual([
      ["cron.toml", 9],
      ["agents.toml", 3],
      ["runtimes.toml", 3],
    ]);
    expect(await runShell("kept")).toContain("greeting=hello");
    await waitFor(async () => (await cronJobs()).errors.length === 2, 10_000);
    expect((await cronJobs()).names).toEqual(["backup", "nightly"]);

    // not waiting; and a node that is not connected
    const sent = await ep("node", "reload", s.nodeId, "--wait", "0");
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toContain("config_reload sent to");
    expect((await ep("node", "reload", s.nodeId, "--wait", "x")).code).toBe(2);
    await epd.stop();
    epd = undefined;
    await waitFor(async () => {
      const res = await fetch(`${s.tower.url}/mcp/call`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.tower.adminToken}`, "content-type": "application/json" },
        body: JSON.stringify({ tool: "list_nodes", arguments: {} }),
      });
      return ((await res.json()) as any).result.nodes.some((n: any) => n.id === s.nodeId && n.status === "offline");
    }, 10_000);
    const offline = await ep("node", "reload", s.nodeId);
    expect(offline.code).toBe(7);
    expect(offline.stderr).toContain("not connected");
    expect((await ep("node", "reload", "nod_nope")).code).toBe(4);
  }, 120_000);

  it("applies a valid agents.toml live: a new profile " +
    "starts, a changed one restarts, a removed one stops", async () => {
    const alive = (pid: number) => !processGone(pid);
    const domainId = (await s.work.createDomain({ name: "live-profiles" })).domain!.id;
    const profile = (id: string, seconds: number) =>
      `[[agent]]\nid = "${id}"\nname = "${id}"\nruntime = "shell"\ncommand ` +
      `= ["sleep", "${seconds}"]\nsupervise = true\ndomain = "${domainId}"\n`;
    const agents = createClient(
      AgentService,
      createConnectTransport({
        baseUrl: s.tower.url,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${s.tower.adminToken}`), next(req))],
      }),
    );
    const towerAgents = async () =>
      new Map((await agents.listAgents({ domainId })).agents.map((a) => [a.name, a] as const));
    writeDaemonFile(s, "cron.toml", "");
    writeFileSync(join(s.epdHome, "runtimes.toml"), ""); // the first test left a broken one
    writeDaemonFile(s, "agents.toml", profile("keep", 3600) + profile("change", 3600) + profile("drop", 3600));
    epd = await startFleetEpd(s, { EP_NODE_STATE_MS: "3600000", EP_WATCHDOG_POLL_MS: "200" });
    type Listed = { agents: { id: string; pid: number; state: string }[] };
    const pids = async () => new Map((await epd!.call<Listed>("agent.list")).agents.map((a) => [a.id, a.pid] as const));
    await waitFor(async () => {
      const p = await pids();
      return ["keep", "change", "drop"].every((id) => (p.get(id) ?? 0) > 0);
    }, 15_000);
    const before = await pids();

    writeDaemonFile(s, "agents.toml", profile("keep", 3600) + profile("change", 3599) + profile("add", 3600));
    const res = await ep("node", "reload", s.nodeId, "--json");
    expect(res.code, res.stderr).toBe(0);
    expect(res.json().results).toContain("agents.toml: applied (added add; restarted change; removed drop)");
    await waitFor(async () => ((await pids()).get("add") ?? 0) > 0, 15_000);
    const after = await pids();
    expect([...after.keys()].filter((id) => ["add", "change", "keep", "drop"].includes(id)).sort()).toEqual([
      "add",
      "change",
      "keep",
    ]);
    expect(after.get("keep")).toBe(before.get("keep")); // untouched
    expect(after.get("change")).not.toBe(before.get("change"));
    expect(alive(after.get("change")!)).toBe(true);
    await waitFor(() => !alive(before.get("change")!) && !alive(before.get("drop")!), 10_000);
    // the removed profile's tower agent is marked dead, saying why; the others are still its own
    await waitFor(async () => (await towerAgents()).get("drop")?.state === AgentState.DEAD, 10_000);
    const dropId = (await towerAgents()).get("drop")!.id;
    const dead = (await towerEvents(s, "matrix", "agent.state")).find((e) => e.agentId === dropId);
    expect(dead?.payload).toMatchObject({ to: "dead", reason: "profile drop was removed from agents.toml" });
    expect((await towerAgents()).get("keep")?.state).not.toBe("dead");
    expect([...(await towerAgents()).keys()].sort()).toEqual(["add", "change", "drop", "keep"]);
    const stopped = (await towerEvents(s, "matrix", "agent.stopped")).map((e) => e.payload.reason);
    expect(stopped).toEqual(expect.arrayContaining(["removed from agents.toml", "changed in agents.toml; restarting"]));

    // the same file again: nothing moves
    const again = await ep("node", "reload", s.nodeId, "--json");
    expect(again.json().results).toContain("agents.toml: unchanged (3 profiles)");
    expect((await pids()).get("change")).toBe(after.get("change"));
    await epd.stop();
    epd = undefined;
    for (const id of ["add", "change", "keep"]) if (alive(after.get(id)!)) process.kill(after.get(id)!, "SIGKILL");
  }, 60_000);
});
