// Names, not ids (issue 38): the CLI's default tables and event lines show what people call
// things; --json keeps the ids scripts depend on, --wide adds them as columns; an agent enrolled
// without a name is `<runtime>-<n>`, the lowest n free on its node.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { AiService } from "../gen/ep/tower/v1/ai_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import { registerNode, spawnEpd } from "./epd-harness.js";
import { startTower, tempHome, type TestTower } from "./harness.js";

let t: TestTower;
let env: Record<string, string>;
const home = tempHome("ep-cli-names-");
const IDS = /\b(agt|dom|ses|msn)_[0-9a-z]/;
const world = { domainId: "", missionId: "", agentIds: [] as string[], sessionId: "", actionId: "" };

beforeAll(async () => {
  assertBuilt();
  t = await startTower({ env: { EP_SECRET_KEY: randomBytes(32).toString("base64") } });
  env = { EP_HOME: home.dir, EP_BASE_URL: t.url, EP_TOKEN: t.adminToken, EP_NODE_FILE: join(home.dir, "node.json") };
  const work = t.client(WorkService);
  world.domainId = (await work.createDomain({ name: "demo" })).domain!.id;
  world.missionId = (await work.createMission({ domainId: world.domainId, title: "first mission" })).mission!.id;
  const nodes = t.client(NodeService);
  const n1 = await nodes.registerNode({ hostname: "w1", domainIds: [world.domainId] });
  const n2 = await nodes.registerNode({ hostname: "w2", domainIds: [world.domainId] });
  const enroll = async (token: string, name = "", runtime = Runtime.SHELL) =>
    (await t.client(AgentService, token).enrollAgent({ domainId: world.domainId, runtime, name })).agent!;
  const agents = [
    await enroll(n1.token),
    await enroll(n1.token),
    await enroll(n1.token, "reviewer"),
    await enroll(n1.token),
    await enroll(n2.token),
    await enroll(n1.token, "", Runtime.VENDORB),
  ];
  world.agentIds = agents.map((a) => a.id);
  // a task claimed by the first, so tables and events have an agent to name
  await work.createTask({
    missionId: world.missionId,
    title: "say hi",
    runtime: Runtime.SHELL,
    input: { command: "echo hi" },
  });
  const held = (await t.client(WorkService, n1.token).claimTask({ agentId: agents[0].id })).task!;
  await t
    .client(WorkService, n1.token)
    .completeTask({ taskId: held.id, agentId: agents[0].id, leaseId: held.leaseId, result: { output: "hi\n" } });
  // an AI session with a pending action (the heuristic planner proposes it)
  const ai = t.client(AiService);
  const s = (await ai.createSession({ title: "release chat" })).session!;
  const turn = await ai.submitTurn({ sessionId: s.id, content: 'create domain "later"' });
  world.sessionId = s.id;
  world.actionId = turn.actions[0].id;
  for (const [args, input] of [
    [["secret", "set", "DB_PASSWORD", "--domain", "demo"], "s3cret\n"],
    [["secret", "grant", "DB_PASSWORD", "--agent", agents[0].id]],
    [["token", "create", "--name", "ci", "--role", "operator", "--domain", world.domainId]],
  ] as [string[], string?][]) {
    const res = await ep(args, { env, input });
    if (res.code !== 0) throw new Error(`ep ${args.join(" ")}: ${res.stderr}`);
  }
});

afterAll(async () => {
  await t?.close();
  home.cleanup();
});

describe("names, not ids", () => {
  it(
    "an agent enrolled without a name is <runtime>-<n>, " + "the lowest n free on its node; a given name is kept",
    async () => {
      const { agents } = await t.client(AgentService).listAgents({ domainId: world.domainId });
      const byId = new Map(agents.map((a) => [a.id, a.name]));
      expect(world.agentIds.map((id) => byId.get(id))).toEqual([
        "shell-1",
        "shell-2",
        "reviewer",
        "shell-3",
        "shell-1",
        "vendorB-1",
      ]);
    },
  );

  it("the main commands' default tables and event lines show names and no agt_/dom_/ses_/msn_ ids", async () => {
    const commands = [
      ["domain", "ls"],
      ["mission", "ls"],
      ["mission", "ls", "--domain", "demo"],
      ["task", "ls", "--mission", "first mission"],
      ["agent", "ls"],
      ["node", "ls"],
      ["approvals", "ls"],
      ["secret", "ls"],
      ["token", "ls"],
      ["events", "tail", "--since", "0", "--limit", "12"],
    ];
    const outputs: Record<string, string> = {};
    for (const args of commands) {
      const res = await ep(args, { env });
      expect(res.code, `ep ${args.join(" ")}: ${res.stderr}`).toBe(0);
      expect(res.stdout, `ep ${args.join(" ")}`).not.toMatch(IDS);
      outputs[args.slice(0, 2).join(" ")] = res.stdout;
    }
    expect(outputs["mission ls"]).toMatch(/first mission\s+demo/);
    expect(outputs["task ls"]).toMatch(/say hi\s+succeeded.*shell-1/);
    expect(outputs["agent ls"]).toMatch(/shell-1\s+demo\s+w1/);
    expect(outputs["node ls"]).toMatch(/w1\s+\S+\s+demo/);
    expect(outputs["approvals ls"]).toContain('session "release chat"');
    expect(outputs["secret ls"]).toMatch(/DB_PASSWORD\s+demo\s+\d+\s+shell-1/);
    expect(outputs["token ls"]).toMatch(/ci\s+operator\s+demo/);
    expect(outputs["events tail"]).toContain("by shell-1");
    // a detail view names its subject's id on its first line (that is where one finds it), and
    // everything else by name
    for (const args of [
      ["mission", "get", "first mission"],
      ["agent", "get", "reviewer", "--domain", "demo"],
    ]) {
      const res = await ep(args, { env });
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toMatch(/^id\s+(msn|agt)_/);
      expect(res.stdout.split("\n").slice(1).join("\n"), `ep ${args.join(" ")}`).not.toMatch(IDS);
      expect(res.stdout).toMatch(/domain\s+demo/);
    }
    const task = (await ep(["task", "ls", "--mission", "first mission", "--json"], { env })).json().tasks[0];
    const get = await ep(["task", "get", task.id], { env });
    expect(get.stdout).not.toMatch(IDS);
    expect(get.stdout).toMatch(/agent\s+shell-1/);
    expect(get.stdout).toMatch(/mission\s+first mission/);
    // ep task watch's header (stderr) names the agent too
    const watch = await ep(["task", "watch", task.id], { env });
    expect(watch.code, watch.stderr).toBe(0);
    expect(watch.stderr).toContain("agent shell-1");
    expect(watch.stderr + watch.stdout).not.toMatch(IDS);
  });

  it("--json keeps the ids and --wide adds them beside the names", async () => {
    const json = (await ep(["agent", "ls", "--json"], { env })).json();
    expect(json.agents.map((a: { id: string }) => a.id)).toEqual(expect.arrayContaining(world.agentIds));
    expect(json.agents[0].domain_id).toBe(world.domainId);
    const wide = await ep(["agent", "ls", "--wide"], { env });
    expect(wide.stdout).toContain(world.agentIds[0]);
    expect(wide.stdout).toMatch(/shell-1\s+demo/);
    expect((await ep(["mission", "ls", "--wide"], { env })).stdout).toContain(world.missionId);
    expect((await ep(["domain", "ls", "--wide"], { env })).stdout).toContain(world.domainId);
    expect((await ep(["approvals", "ls", "--wide"], { env })).stdout).toContain(world.sessionId);
    expect((await ep(["approvals", "ls", "--json"], { env })).json().actions[0].session_id).toBe(world.sessionId);
  });

  it("ep daemon agent enroll without --name: the running epd's " +
    "agent is named by the tower and shown with its domain's name", async () => {
    const node = tempHome("ep-cli-names-epd-");
    const nodeFile = join(node.dir, "node.json");
    await registerNode(t.url, t.adminToken, nodeFile, "w3");
    const epd = await spawnEpd({ home: node.dir, nodeFile, backendUrl: t.url });
    try {
      const epdEnv = { ...env, EP_HOME: node.dir, EP_NODE_FILE: nodeFile };
      const first = await ep(["daemon", "agent", "enroll", "--domain", "demo", "--runtime", "shell"], { env: epdEnv });
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout).toMatch(/^name\s+shell-1$/m);
      expect(first.stdout).toMatch(/^domain\s+demo$/m);
      expect(first.stdout.split("\n").slice(1).join("\n")).not.toMatch(IDS);
      const second = await ep(["daemon", "agent", "enroll", "--domain", "demo", "--runtime", "shell", "--json"], {
        env: epdEnv,
      });
      expect(second.json().agent).toMatchObject({ name: "shell-2", domain_id: world.domainId });
    } finally {
      await epd.stop();
      node.cleanup();
    }
  }, 60_000);

  it("a pending action is approved by its id alone (the table shows no session id to copy)", async () => {
    const res = await ep(["approvals", "approve", world.actionId], { env });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(`action ${world.actionId} approved`);
    const again = await ep(["approvals", "approve", world.actionId], { env });
    expect(again.code).toBe(4);
    expect(again.stderr).toContain(`no pending action ${world.actionId}`);
    expect(again.stderr).toContain(`ep approvals approve <session> ${world.actionId}`);
  });
});
