// Why a task waits (issue 38, point 4): a real tower process and a real epd whose node is
// registered under this machine's hostname (as `ep up` does). The reason is in the API (Connect
// and REST), `ep task get` and `ep task watch`, and the TUI's source; an agent the tower enrolls
// for the node (what the console's button does) is adopted by epd and runs the task.
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { TaskWaitReason, WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { createTowerSource } from "../cli/tui/tower-source.js";
import { localHostname } from "../tower/domain/work/task-wait.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import {
  adminClient,
  registerNode,
  spawnEpd,
  spawnTowerProcess,
  type EpdProcess,
  type TowerProcess,
} from "./epd-harness.js";
import { tempHome, waitFor } from "./harness.js";

const home = tempHome("ep-task-wait-");
let tower: TowerProcess;
let epd: EpdProcess;
let nodeId = "";
let work: Client<typeof WorkService>;
let cliEnv: Record<string, string>;

async function taskIn(
  domainName: string,
  init: { runtime?: Runtime; capabilities?: string[]; command?: string } = {},
): Promise<{ domainId: string; taskId: string }> {
  const domainId = (await work.createDomain({ name: domainName })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: `${domainName} work` })).mission!.id;
  const taskId = (
    await work.createTask({
      missionId,
      title: `${domainName} task`,
      runtime: init.runtime ?? Runtime.SHELL,
      capabilities: init.capabilities ?? [],
      input: { command: init.command ?? "echo waited" },
    })
  ).task!.id;
  return { domainId, taskId };
}

beforeAll(async () => {
  assertBuilt();
  tower = await spawnTowerProcess(home.dir);
  const nodeFile = `${home.dir}/node.json`;
  ({ nodeId } = await registerNode(tower.url, tower.adminToken, nodeFile, localHostname()));
  epd = await spawnEpd({ home: home.dir, nodeFile, backendUrl: tower.url });
  work = adminClient(tower, WorkService);
  cliEnv = { EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken, EP_HOME: home.dir };
}, 60_000);

afterAll(async () => {
  await epd?.stop();
  await tower?.stop();
  home.cleanup();
});

describe("why a task waits", () => {
  it("a task in a domain with no agent says so in the API (Connect and REST), the CLI and the TUI", async () => {
    const { domainId, taskId } = await taskIn("nobody");
    const got = await work.getTask({ taskId });
    expect(got.wait?.reason).toBe(TaskWaitReason.NO_AGENT_IN_DOMAIN);
    expect(got.wait?.message).toContain(`no agent serves domain ${domainId}`);
    expect(got.wait?.enrollNodeId).toBe(nodeId);

    const rest = await fetch(`${tower.url}/work/tasks/${taskId}`, {
      headers: { authorization: `Bearer ${tower.adminToken}` },
    });
    expect(rest.status).toBe(200);
    const body = (await rest.json()) as { wait: { reason: string; enroll_node_id: string } };
    expect(body.wait).toMatchObject({ reason: "no_agent_in_domain", enroll_node_id: nodeId });

    const text = await ep(["task", "get", taskId], { env: cliEnv });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/waiting\s+no_agent_in_domain: no agent serves domain/);
    const json = await ep(["task", "get", taskId, "--json"], { env: cliEnv });
    expect(json.json().wait.reason).toBe("no_agent_in_domain");

    const transport = createConnectTransport({
      baseUrl: tower.url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))],
    });
    const tui = await createTowerSource(transport, "test").task(taskId);
    expect(tui.wait).toMatch(/^no_agent_in_domain: no agent serves domain/);
  });

  it("names the missing runtime and the missing capabilities", async () => {
    const agents = adminClient(tower, AgentService);
    const { domainId, taskId } = await taskIn("wrong-runtime", { runtime: Runtime.VENDORB });
    await agents.enrollAgent({ domainId, runtime: Runtime.SHELL, nodeId, name: "only-shell" });
    const runtimeWait = (await work.getTask({ taskId })).wait!;
    expect(runtimeWait.reason).toBe(TaskWaitReason.NO_AGENT_WITH_RUNTIME);
    expect(runtimeWait.message).toContain("no agent of the domain runs vendorB");

    const missionId = (await work.createMission({ domainId, title: "caps" })).mission!.id;
    const capsTask = (
      await work.createTask({
        missionId,
        title: "needs gpu",
        runtime: Runtime.SHELL,
        capabilities: ["gpu"],
        input: { command: "true" },
      })
    ).task!.id;
    const capsWait = (await work.getTask({ taskId: capsTask })).wait!;
    expect(capsWait.reason).toBe(TaskWaitReason.NO_AGENT_WITH_CAPABILITIES);
    expect(capsWait.message).toContain("gpu");
  });

  it("an agent on a node that is not linked: the task says its node is offline", async () => {
    const other = await registerNode(tower.url, tower.adminToken, `${home.dir}/other-node.json`, "never-linked");
    const { domainId, taskId } = await taskIn("offline-node");
    await adminClient(tower, AgentService).enrollAgent({
      domainId,
      runtime: Runtime.SHELL,
      nodeId: other.nodeId,
      name: "far-away",
    });
    const wait = (await work.getTask({ taskId })).wait!;
    expect(wait.reason).toBe(TaskWaitReason.NODE_OFFLINE);
    expect(wait.message).toContain("never-linked");
    expect(wait.enrollNodeId).toBe("");
  });

  it("ep task watch says why it waits, and the agent the tower enrolls on this node runs it", async () => {
    const { domainId, taskId } = await taskIn("enroll-here", { command: "echo ran after enrolling" });
    let printed = "";
    const watching = ep(["task", "watch", taskId, "--json"], {
      env: cliEnv,
      timeoutMs: 30_000,
      onStdout: (out) => (printed = out),
    });
    // the watch has said why the task waits before an agent is enrolled (under load the process
    // may start after a quick enroll, and would then never see the task waiting)
    await waitFor(() => printed.includes('"no_agent_in_domain"'), 15_000);
    // what the console's "Enroll a shell agent" button calls
    const agent = (
      await adminClient(tower, AgentService).enrollAgent({ domainId, runtime: Runtime.SHELL, nodeId, name: "shell" })
    ).agent!;
    const watched = await watching;
    expect(watched.code, watched.stderr).toBe(0);
    const lines = watched.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, any>);
    expect(lines[0].wait.reason).toBe("no_agent_in_domain");
    expect(lines.at(-1)!.task).toMatchObject({ status: "succeeded", claimed_by: agent.id });
    expect(lines.at(-1)!.task.result.output).toContain("ran after enrolling");
    expect((await work.getTask({ taskId })).wait).toBeUndefined();
    // epd keeps it: the agent is in agents.json and says so in its log
    expect(
      epd.logs.some((l) => l.msg === "agent enrolled at the tower joins this node" && l.agent_id === agent.id),
    ).toBe(true);
  });

  it("refuses a task id that is not there, on every surface", async () => {
    await expect(work.getTask({ taskId: "tsk_nope" })).rejects.toThrow(/tsk_nope/);
    const rest = await fetch(`${tower.url}/work/tasks/tsk_nope`, {
      headers: { authorization: `Bearer ${tower.adminToken}` },
    });
    expect(rest.status).toBe(404);
    const cli = await ep(["task", "get", "tsk_nope"], { env: cliEnv });
    expect(cli.code).toBe(4);
    expect(cli.stderr).toContain("tsk_nope");
    const usage = await ep(["task", "watch"], { env: cliEnv });
    expect(usage.code).toBe(2);
  });
});
