// An ACP profile agent (vendorA_agent_acp in agents.toml, the fake ACP agent of
// daemon/runtimes/fixtures standing in for claude-code-acp) signalled with the built `ep agent
// signal` and from the tower: each prompt is a turn on the session, and its output reaches the
// tower as progress, inbox and matrix events.
import { statusWord } from "../test-support/words.js";
import { ClaimPolicy } from "../gen/ep/tower/v1/resources_pb.js";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { ApprovalService, ApprovalStatus, type Approval } from "../gen/ep/tower/v1/approvals_pb.js";
import type { EpdProcess } from "./epd-harness.js";
import { type FleetSetup, fleetSuite, runEp, startFleetEpd, towerEvents, writeDaemonFile } from "./fleet-harness.js";
import { waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

let s: FleetSetup;
let epd: EpdProcess | undefined;

fleetSuite("ep-fleet-acp-", { set: (setup) => (s = setup), epd: () => epd });

describe("vendorA_agent_acp profile agents", () => {
  it("takes ep agent signal as a prompt on its ACP session; the turn's output reaches the tower", async () => {
    const domainId = (await s.work.createDomain({ name: "acp" })).domain!.id;
    writeDaemonFile(
      s,
      "agents.toml",
      `[[agent]]
id = "reviewer"
runtime = "vendorA_agent_acp"
domain = "${domainId}"
`,
    );
    epd = await startFleetEpd(s);
    await waitFor(() => epd!.logs.some((l) => l.msg === "fleet started"), 10_000);
    const towerAgents = s.client(AgentService);
    // enrolled at the tower under the profile
    let towerAgentId = "";
    await waitFor(async () => {
      towerAgentId =
        (await towerAgents.listAgents({ domainId })).agents.find((a) => a.runtime === Runtime.VENDORA_AGENT_ACP)?.id ??
        "";
      return towerAgentId !== "";
    }, 10_000);

    const sig = await runEp(s.home, ["agent", "signal", "reviewer", "review the patch", "--json"]);
    expect(sig.code, sig.stderr).toBe(0);
    const answer = sig.json();
    expect(answer).toEqual({ delivered_via: "acp_prompt" });

    // the delivery is an inbox event; the turn's chunks are progress; its end a matrix event
    await waitFor(async () => (await towerEvents(s, "matrix", "agent.signal.finished")).length >= 1, 15_000);
    const inbox = await towerEvents(s, "inbox", "agent.signal");
    expect(inbox).toHaveLength(1);
    expect(inbox[0].agentId).toBe(towerAgentId);
    expect(inbox[0].payload).toMatchObject({
      profile: "reviewer",
      prompt: "review the patch",
      via: "acp_prompt",
      source: "cli",
      node_id: s.nodeId,
    });
    const progress = await towerEvents(s, "progress", "agent.signal.progress");
    expect(progress.every((e) => e.agentId === towerAgentId)).toBe(true);
    const text = progress.map((e) => String(e.payload.text)).join("");
    expect(text).toContain("Working on: review the patch");
    expect(text).toContain("Done: review the patch");
    const [finished] = await towerEvents(s, "matrix", "agent.signal.finished");
    expect(finished).toMatchObject({ status: "succeeded", agentId: towerAgentId });
    // the turn's progress and its end carry one run id (the progress once said "acp")
    expect(finished.payload.run_id).toMatch(/^acp_[0-9a-f]{12}$/);
    expect(new Set(progress.map((e) => e.payload.run_id))).toEqual(new Set([finished.payload.run_id]));
    expect(finished.payload).toMatchObject({ ok: true, stop_reason: "end_turn" });
    expect(finished.payload.output).toContain("Done: review the patch");
    // the agent's tool call ran in the profile's directory, after the daemon granted permission
    expect(readFileSync(join(s.epdHome, "agents", "reviewer", "notes.txt"), "utf8")).toBe(
      "notes for review the patch\n",
    );

    const pid = (await epd.call<{ agents: { id: string; pid: number; state: string }[] }>("agent.list")).agents.find(
      (a) => a.id === "reviewer",
    )!.pid;
    expect(pid).toBeGreaterThan(0);

    // a signal from the tower (AgentService.SignalAgent) becomes the next turn on the same session
    await towerAgents.signalAgent({ agentId: towerAgentId, prompt: "second look" });
    await waitFor(async () => (await towerEvents(s, "matrix", "agent.signal.finished")).length >= 2, 15_000);
    const second = (await towerEvents(s, "matrix", "agent.signal.finished"))[1];
    expect(second.payload).toMatchObject({ ok: true });
    expect(second.payload.output).toContain("Done: second look");
    const texts = (await towerEvents(s, "progress", "agent.signal.progress"))
      .map((e) => String(e.payload.text))
      .join("");
    expect(texts).toContain("Working on: second look");
    // the second turn has its own run id, shared by its progress and its end
    expect(second.payload.run_id).not.toBe(finished.payload.run_id);
    const secondProgress = (await towerEvents(s, "progress", "agent.signal.progress")).filter((e) =>
      String(e.payload.text).includes("second look"),
    );
    expect(secondProgress.length).toBeGreaterThan(0);
    expect(secondProgress.every((e) => e.payload.run_id === second.payload.run_id)).toBe(true);
    // one ACP agent process served both turns
    const pidAfter = (await epd.call<{ agents: { id: string; pid: number }[] }>("agent.list")).agents.find(
      (a) => a.id === "reviewer",
    )!.pid;
    expect(pidAfter).toBe(pid);

    // a task assigned to the profile's tower agent runs as an ephemeral ACP run in the profile's
    // directory (not as a turn on the long-running session) and is reported like any agent's
    const missionId = (await s.work.createMission({ domainId, title: "acp work" })).mission!.id;
    const task = (
      await s.work.createTask({
        missionId,
        title: "acp task",
        runtime: Runtime.VENDORA_AGENT_ACP,
        claimPolicy: ClaimPolicy.ASSIGNED,
        assigneeAgentId: towerAgentId,
        input: { prompt: "task review" },
      })
    ).task!;
    let done = task;
    await waitFor(
      async () =>
        ["succeeded", "failed"].includes(statusWord((done = (await s.work.getTask({ taskId: task.id })).task!).status)),
      20_000,
    );
    expect(statusWord(done.status), JSON.stringify(done.result)).toBe("succeeded");
    expect(done.claimedBy).toBe(towerAgentId);
    expect(done.result!.output).toContain("Done: task review");
    expect(readFileSync(join(s.epdHome, "agents", "reviewer", "notes.txt"), "utf8")).toBe("notes for task review\n");
    expect((await towerEvents(s, "matrix", "agent.signal.finished")).length).toBe(2);
    expect(
      (await epd.call<{ agents: { id: string; pid: number }[] }>("agent.list")).agents.find((a) => a.id === "reviewer")!
        .pid,
    ).toBe(pid);
  }, 90_000);

  it("a profile's own permission = \"ask\" puts its tasks' tool requests before a person (issue 20)", async () => {
    await epd?.stop();
    const domainId = (await s.work.createDomain({ name: "asking" })).domain!.id;
    writeDaemonFile(
      s,
      "agents.toml",
      `[[agent]]\nid = "asker"\nruntime = "vendorA_agent_acp"\ndomain = "${domainId}"\npermission = "ask"\n`,
    );
    epd = await startFleetEpd(s);
    let agentId = "";
    await waitFor(async () => {
      agentId = (await s.client(AgentService).listAgents({ domainId })).agents[0]?.id ?? "";
      return agentId !== "";
    }, 10_000);
    const missionId = (await s.work.createMission({ domainId, title: "asks" })).mission!.id;
    const task = (
      await s.work.createTask({
        missionId,
        title: "ask first",
        runtime: Runtime.VENDORA_AGENT_ACP,
        claimPolicy: ClaimPolicy.ASSIGNED,
        assigneeAgentId: agentId,
        input: { prompt: "careful notes" },
      })
    ).task!;
    const approvals = s.client(ApprovalService);
    let pending: Approval | undefined;
    await waitFor(
      async () => (pending = (await approvals.listApprovals({ taskId: task.id })).approvals[0]) !== undefined,
      20_000,
    );
    expect(pending).toMatchObject({ status: ApprovalStatus.PENDING, agentId, tool: "edit", nodeId: s.nodeId });
    expect(pending!.paths).toEqual([join(s.epdHome, "agents", "asker", "notes.txt")]);
    await approvals.reject({ approvalId: pending!.id, reason: "not in this profile" });
    let done = task;
    await waitFor(
      async () =>
        ["succeeded", "failed"].includes(statusWord((done = (await s.work.getTask({ taskId: task.id })).task!).status)),
      20_000,
    );
    // the agent heard no: it went on without writing its notes
    expect(statusWord(done.status), JSON.stringify(done.result)).toBe("succeeded");
    expect(existsSync(join(s.epdHome, "agents", "asker", "notes.txt"))).toBe(false);
  }, 60_000);
});
