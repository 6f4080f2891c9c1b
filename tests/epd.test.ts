// The node daemon end to end: the built ep-tower and the built epd as child processes, real
// sockets, real runtimes (bash, the fake claude CLI, a real ACP agent on the SDK).
import { statusWord } from "../test-support/words.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import net from "node:net";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMgmtTransport } from "../daemon/mgmt/client.js";
import { processGone } from "../daemon/runtimes/process-group.js";
import { DaemonService, AgentService as LocalAgentService } from "../gen/ep/daemon/v1/mgmt_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { buildBinaries, spawnTowerProcess, epdFor, towerWithMission, type TowerSetup } from "./epd-harness.js";
import { tempHome, useCleanups, waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

function towerClients(url: string, token: string) {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
  });
  return { work: createClient(WorkService, transport), events: createClient(EventService, transport) };
}

const cleanup = useCleanups();

beforeAll(async () => {
  await buildBinaries();
}, 60_000);

type Setup = TowerSetup;
const setup = (towerEnv: Record<string, string> = {}) => towerWithMission("ep-epd-", cleanup, towerEnv);
const startEpd = (s: Setup, env: Record<string, string> = {}) => epdFor(s, cleanup, env);

async function waitTask(s: Setup, taskId: string, statuses: string[], timeoutMs = 15_000) {
  let last = "";
  await waitFor(async () => {
    last = statusWord((await s.work.getTask({ taskId })).task!.status);
    return statuses.includes(last);
  }, timeoutMs).catch(() => {
    throw new Error(`task ${taskId} stayed ${last}, wanted ${statuses.join("|")}`);
  });
  return (await s.work.getTask({ taskId })).task!;
}

async function progressOf(s: Setup, taskId: string) {
  const res = await s.events.listEvents({ types: ["progress"], limit: 1000 } as never);
  return res.events.filter((e) => e.taskId === taskId);
}

describe("epd", () => {
  it("refuses to start without a node identity, naming the file", async () => {
    const { epd } = await buildBinaries();
    const h = tempHome();
    cleanup(() => h.cleanup());
    const { spawnSync } = await import("node:child_process");
    const missing = spawnSync(process.execPath, [epd, "run"], {
      env: { ...process.env, EP_HOME: h.dir, EP_NODE_FILE: join(h.dir, "nope.json") },
      encoding: "utf8",
    });
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/nope\.json does not exist; register this node with 'ep agent node register/);
    const { writeFileSync } = await import("node:fs");
    writeFileSync(join(h.dir, "bad.json"), '{"node_id":"nod_1"}');
    const bad = spawnSync(process.execPath, [epd, "run"], {
      env: { ...process.env, EP_HOME: h.dir, EP_NODE_FILE: join(h.dir, "bad.json") },
      encoding: "utf8",
    });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/field hostname is missing/);
    const v = spawnSync(process.execPath, [epd, "--version"], { encoding: "utf8" });
    expect(v.stdout).toMatch(/^epd \d+\.\d+\.\d+/);
    const gs = spawnSync(process.execPath, [epd, "get-secret", "X"], {
      env: { ...process.env, EP_SECRETS_SOCKET: join(h.dir, "none.sock"), EP_SECRETS_SESSION: "ses_x" },
      encoding: "utf8",
    });
    expect(gs.status).toBe(7);
  });

  it("enrolls through mgmt.sock and runs tasks through shell, the " +
    "claude CLI and an ACP agent, with progress reaching the tower", async () => {
    const s = await setup();
    const epd = await startEpd(s);
    const dir = join(s.home, "epd");
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(epd.mgmt).mode & 0o777).toBe(0o600);

    const shell = await epd.call<{ agent: { id: string } }>("agent.enroll", {
      domainId: s.domainId,
      runtime: "shell",
      name: "sh",
    });
    // the generated Connect client on the same socket
    const local = createClient(LocalAgentService, createMgmtTransport(epd.mgmt));
    const claude = await local.enroll({ domainId: s.domainId, runtime: "vendorA_code", name: "cl" });
    const acp = await local.enroll({ domainId: s.domainId, runtime: "vendorA_agent_acp", name: "acp" });
    expect((await local.list({})).agents.map((a) => a.name).sort()).toEqual(["acp", "cl", "sh"]);

    const t1 = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "shell",
        runtime: Runtime.SHELL,
        input: { command: 'echo "line one"; echo "session=$EP_SECRETS_SESSION"; echo "epd=$(command -v epd)"; pwd' },
      })
    ).task!;
    const t2 = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "claude",
        runtime: Runtime.VENDORA_CODE,
        input: { prompt: "add a greeting", claude: { model: "claude-test-model" } },
      })
    ).task!;
    const t3 = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "acp",
        runtime: Runtime.VENDORA_AGENT_ACP,
        input: { prompt: "say hello" },
      })
    ).task!;

    const r1 = await waitTask(s, t1.id, ["succeeded", "failed"]);
    expect(statusWord(r1.status)).toBe("succeeded");
    expect(r1.claimedBy).toBe(shell.agent.id);
    expect(r1.result!.exitCode).toBe(0);
    expect(r1.result!.output).toMatch(/line one/);
    expect(r1.result!.output).toMatch(/session=ses_\S{10,}/);
    expect(r1.result!.output).toContain(`epd=${join(dir, "bin", "epd")}`);
    expect(r1.result!.output).toContain(join(dir, "work", t1.id));

    const r2 = await waitTask(s, t2.id, ["succeeded", "failed"]);
    expect(statusWord(r2.status)).toBe("succeeded");
    expect(r2.claimedBy).toBe(claude.agent!.id);
    expect(r2.result!.output).toBe("Done: add a greeting");

    const r3 = await waitTask(s, t3.id, ["succeeded", "failed"]);
    expect(statusWord(r3.status), JSON.stringify(r3.result)).toBe("succeeded");
    expect(r3.claimedBy).toBe(acp.agent!.id);

    await waitFor(async () => (await progressOf(s, t1.id)).length >= 4);
    expect((await progressOf(s, t1.id)).map((e) => e.payload?.text)).toContain("line one");
    const frames2 = await progressOf(s, t2.id);
    expect(frames2.some((e) => e.payload?.kind === "tool")).toBe(true);
    expect(frames2.some((e) => e.payload?.kind === "text" && String(e.payload?.text).includes("Working on"))).toBe(
      true,
    );
    // the claude CLI was started with the task's --model and the daemon's `epd mcp` config
    const init = frames2.find((e) => e.payload?.kind === "status" && e.payload?.text === "session started");
    expect(init?.payload?.data).toMatchObject({
      model: "claude-test-model",
      mcp_servers: [{ name: "ep", status: "connected" }],
    });
    expect((await progressOf(s, t3.id)).length).toBeGreaterThan(0);

    // a failing command fails the task with its exit code and is final
    const t4 = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "fails",
        runtime: Runtime.SHELL,
        input: { command: "echo oops >&2; exit 3" },
      })
    ).task!;
    const r4 = await waitTask(s, t4.id, ["succeeded", "failed"]);
    expect(statusWord(r4.status)).toBe("failed");
    expect(r4.result!.exitCode).toBe(3);
    expect(r4.attempts).toBe(1);

    const status = createClient(DaemonService, createMgmtTransport(epd.mgmt));
    const st = await status.status({});
    expect(st.link).toBe("connected");
    expect(st.agents).toHaveLength(3);
    expect(existsSync(join(dir, "agents.json"))).toBe(true);
  }, 60_000);

  it("submit_mesh_task, claim_mesh_task and retry_mesh_task work through tool.run", async () => {
    const s = await setup();
    const epd = await startEpd(s);
    const submitted = await epd.call<{ result: { task: { id: string; status: string } } }>("tool.run", {
      tool: "submit_mesh_task",
      domainId: s.domainId,
      arguments: { mission_id: s.missionId, title: "via tool", runtime: "shell", input: { command: "exit 1" } },
    });
    const taskId = submitted.result.task.id;
    expect(submitted.result.task.status).toBe("queued");
    // an agent enrolled afterwards picks it up (the enroll wakes it)
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    await waitTask(s, taskId, ["failed"]);
    const retried = await epd.call<{ result: { task: { status: string } } }>("tool.run", {
      tool: "retry_mesh_task",
      domainId: s.domainId,
      arguments: { task_id: taskId },
    });
    expect(retried.result.task.status).toBe("queued");
    await waitTask(s, taskId, ["failed"]);
    await expect(
      epd.call("tool.run", { tool: "submit_mesh_task", domainId: s.domainId, arguments: { title: "x" } }),
    ).rejects.toMatchObject({ code: "invalid_argument", details: { field: "arguments.mission_id" } });
    await expect(epd.call("tool.run", { tool: "nope", arguments: {} })).rejects.toMatchObject({
      code: "tool_not_found",
    });
    // claim_mesh_task for an agent of this node (nothing queued: no task)
    const agents = await epd.call<{ agents: { id: string }[] }>("agent.list");
    const claimed = await epd.call<{ result: { task: unknown } }>("tool.run", {
      tool: "claim_mesh_task",
      domainId: s.domainId,
      arguments: { agent_id: agents.agents[0].id },
    });
    expect(claimed.result.task ?? null).toBeNull();
  }, 60_000);

  it("cancel kills the whole process group, leaving no orphans", async () => {
    const s = await setup();
    const epd = await startEpd(s);
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "hang",
        runtime: Runtime.SHELL,
        input: { command: 'sleep 300 & echo "grandchild $!"; sleep 301' },
      })
    ).task!;
    let grandchild = 0;
    await waitFor(async () => {
      const text = (await progressOf(s, t.id)).map((e) => String(e.payload?.text)).join("\n");
      grandchild = Number(/grandchild (\d+)/.exec(text)?.[1] ?? 0);
      return grandchild > 0;
    });
    const leader = (await epd.call<{ agents: { pid: number }[] }>("agent.list")).agents[0].pid;
    expect(leader).toBeGreaterThan(0);
    expect(processGone(grandchild)).toBe(false);
    await s.work.cancelTask({ taskId: t.id, reason: "test" });
    await waitFor(() => processGone(grandchild) && processGone(leader), 15_000);
    const after = await s.work.getTask({ taskId: t.id });
    expect(statusWord(after.task!.status)).toBe("cancelled");
    await waitFor(async () => (await epd.call<{ runningTasks: number }>("daemon.status")).runningTasks === 0);
  }, 60_000);

  it("kill -9 of epd mid-task: the lease expires, and the task runs once more after the restart", async () => {
    const s = await setup({ EP_LEASE_MS: "2000", EP_SWEEP_MS: "200" });
    let epd = await startEpd(s);
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    const marker = join(s.home, "first-run");
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "survives",
        runtime: Runtime.SHELL,
        input: {
          command:
            `if [ -e ${marker} ]; then echo second run; else touch ` +
            `${marker}; sleep 300 & echo "grandchild $!"; wait; fi`,
        },
      })
    ).task!;
    let grandchild = 0;
    await waitFor(async () => {
      const text = (await progressOf(s, t.id)).map((e) => String(e.payload?.text)).join("\n");
      grandchild = Number(/grandchild (\d+)/.exec(text)?.[1] ?? 0);
      return grandchild > 0;
    });
    await epd.kill9();
    const requeued = await waitTask(s, t.id, ["queued"], 10_000);
    expect(requeued.attempts).toBe(1);
    epd = await startEpd(s);
    const done = await waitTask(s, t.id, ["succeeded", "failed"]);
    expect(statusWord(done.status)).toBe("succeeded");
    expect(done.attempts).toBe(2);
    expect(done.result!.output).toMatch(/second run/);
    // the orphan the killed daemon left behind was ended by the new one
    await waitFor(() => processGone(grandchild));
  }, 60_000);

  it("a dropped stream (tower restart) is re-established and the running task still completes", async () => {
    const s = await setup();
    const epd = await startEpd(s);
    await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell" });
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "long",
        runtime: Runtime.SHELL,
        input: { command: "echo start; sleep 4; echo finished" },
      })
    ).task!;
    await waitTask(s, t.id, ["running"]);
    await s.tower.stop();
    const again = await spawnTowerProcess(s.home, {}, s.tower.port);
    cleanup(() => again.stop());
    const done = await waitTask(
      { ...s, ...towerClients(again.url, again.adminToken) },
      t.id,
      ["succeeded", "failed"],
      30_000,
    );
    expect(statusWord(done.status)).toBe("succeeded");
    expect(done.result!.output).toMatch(/finished/);
    // the outcome may get through as a unary call just before the link is back: wait for the link too
    await waitFor(() => epd.logs.filter((l) => l.msg === "link connected").length >= 2, 15_000);
    // and new work still flows over the new link
    const w = towerClients(again.url, again.adminToken).work;
    const t2 = (
      await w.createTask({
        missionId: s.missionId,
        title: "after",
        runtime: Runtime.SHELL,
        input: { command: "echo after" },
      })
    ).task!;
    await waitFor(async () => (await w.getTask({ taskId: t2.id })).task!.status === TaskStatus.SUCCEEDED, 15_000);
  }, 60_000);

  it("mgmt.sock answers JSON-RPC on a raw socket and keeps serving after 100 malformed lines", async () => {
    const s = await setup();
    const epd = await startEpd(s);
    const sock = net.connect(epd.mgmt);
    const lines: string[] = [];
    let buf = "";
    sock.on("data", (d) => {
      buf += d.toString();
      const parts = buf.split("\n");
      buf = parts.pop()!;
      lines.push(...parts);
    });
    await new Promise((r) => sock.once("connect", r));
    for (let i = 0; i < 100; i++)
      sock.write(
        i % 3 === 0
          ? `{"jsonrpc":"2.0","id":${i},"method":"nope.nope"}\n`
          : i % 3 === 1
            ? `garbage ${i}\n`
            : `{"jsonrpc":"2.0","id":${i},"method":"agent.enroll","params":{"runtime":7}}\n`,
      );
    sock.write('{"jsonrpc":"2.0","id":"last","method":"daemon.status"}\n');
    await waitFor(() => lines.length >= 101);
    sock.destroy();
    const parsed = lines.map((l) => JSON.parse(l));
    expect(parsed.slice(0, 100).every((p) => p.error)).toBe(true);
    expect(parsed.filter((p) => p.error?.code === -32700)).toHaveLength(33);
    expect(parsed.filter((p) => p.error?.code === -32601)).toHaveLength(34);
    expect(parsed.filter((p) => p.error?.code === -32602)).toHaveLength(33);
    expect(parsed[100]).toMatchObject({ id: "last", result: { link: "connected" } });
    // and the generated Connect client still works on the same socket
    const st = await createClient(DaemonService, createMgmtTransport(epd.mgmt)).status({});
    expect(st.nodeId).toMatch(/^nod_/);
    await expect(epd.call("agent.enroll", { domainId: "", runtime: "shell" })).rejects.toMatchObject({
      code: "invalid_argument",
      details: { field: "domain_id" },
    });
    await expect(epd.call("agent.enroll", { domainId: s.domainId, runtime: "bash" })).rejects.toMatchObject({
      details: { field: "runtime" },
    });
    await expect(epd.call("agent.enroll", { domainId: "dom_missing", runtime: "shell" })).rejects.toMatchObject({
      code: "domain_not_found",
    });
    await expect(epd.call("agent.signal", { target: "ghost", prompt: "hi" })).rejects.toMatchObject({
      code: "agent_not_found",
    });
  }, 60_000);
});

afterAll(() => undefined);
