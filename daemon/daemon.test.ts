// The daemon assembled in-process against a real tower on a loopback port: wake-ups from the
// link, the poll that covers a lost wake-up, and graceful shutdown.
import { statusWord } from "../test-support/words.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../common/log.js";
import { startTower, type TestTower } from "../tests/harness.js";
import { NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { jsonRpcCall } from "./mgmt/client.js";
import { createDaemon, type Daemon } from "./daemon.js";
import { createWorktree, finishWorktree } from "./worker/workspace.js";
import { waitFor } from "../test-support/wait.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function setup(opts: { pollMs: number; drop?: boolean | (() => boolean); takeTasks?: boolean; env?: Record<string, string>; graceMs?: number; linkBackoff?: { initialMs?: number; maxMs?: number }; beforeStart?: (home: string) => Promise<void> }) {
  const t: TestTower = await startTower();
  cleanups.push(() => t.close());
  const home = mkdtempSync(join(tmpdir(), "epd-inproc-"));
  cleanups.push(() => rmSync(home, { recursive: true, force: true }));
  const reg = await t.client(NodeService).registerNode({ hostname: "w1" });
  const work = t.client(WorkService);
  const domainId = (await work.createDomain({ name: `d${Math.random()}` })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  let dropped = 0;
  const kinds: string[] = [];
  await opts.beforeStart?.(home);
  const daemon: Daemon = await createDaemon({
    identity: { node_id: reg.node!.id, hostname: "w1", token: reg.token, tower_url: t.url },
    backendUrl: t.url,
    log: silentLogger,
    env: { EP_HOME: home, PATH: process.env.PATH, ...opts.env },
    pollMs: opts.pollMs,
    shutdownGraceMs: opts.graceMs,
    linkBackoff: opts.linkBackoff,
    takeTasks: opts.takeTasks,
    dropLinkMessage: (m) => (kinds.push(m.kind), (typeof opts.drop === "function" ? opts.drop() : opts.drop === true) && m.kind === "task_ready" ? (dropped++, true) : false),
  });
  await daemon.start();
  cleanups.push(() => daemon.close());
  await jsonRpcCall(daemon.sockets.mgmt, "agent.enroll", { domainId, runtime: "shell" });
  const claimedAt = async (taskId: string) => {
    const ev = (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 })).filter((e) => e.taskId === taskId);
    const created = ev.find((e) => e.name === "task.created");
    const claimed = ev.find((e) => e.name === "task.claimed");
    return created && claimed ? Date.parse(claimed.createdAt) - Date.parse(created.createdAt) : undefined;
  };
  const waitDone = async (taskId: string, ms = 10_000) => {
    const end = Date.now() + ms;
    for (;;) {
      const task = (await work.getTask({ taskId })).task!;
      if (task.status === TaskStatus.SUCCEEDED || task.status === TaskStatus.FAILED) return task;
      if (Date.now() > end) throw new Error(`task ${taskId} is ${task.status}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await new Promise((r) => setTimeout(r, 100)); // the link's hello
  return { t, work, daemon, nodeId: reg.node!.id, missionId, claimedAt, waitDone, dropped: () => dropped, kinds };
}

describe("daemon wake-ups", () => {
  it("a task_ready on the link gets a task claimed in milliseconds, long before the poll", async () => {
    const s = await setup({ pollMs: 60_000 });
    expect(s.daemon.link.state()).toBe("connected");
    const task = (await s.work.createTask({ missionId: s.missionId, title: "x", runtime: Runtime.SHELL, input: { command: "true" } })).task!;
    await s.waitDone(task.id, 3000);
    expect(await s.claimedAt(task.id)).toBeLessThan(500);
  });

  it("takes pushed work by default (EP_TAKE_TASKS=1), claims after each wake-up with 0; another value is refused at start", async () => {
    const pushed = await setup({ pollMs: 60_000 });
    await pushed.waitDone((await pushed.work.createTask({ missionId: pushed.missionId, title: "p", runtime: Runtime.SHELL, input: { command: "true" } })).task!.id, 3000);
    expect(pushed.kinds).toContain("task");
    // and says so (ep daemon status)
    expect(await jsonRpcCall<{ takeTasks: boolean }>(pushed.daemon.sockets.mgmt, "daemon.status")).toMatchObject({ takeTasks: true });
    const woken = await setup({ pollMs: 60_000, env: { EP_TAKE_TASKS: "0" } });
    await woken.waitDone((await woken.work.createTask({ missionId: woken.missionId, title: "w", runtime: Runtime.SHELL, input: { command: "true" } })).task!.id, 3000);
    expect(woken.kinds).toContain("task_ready");
    expect(woken.kinds).not.toContain("task");
    expect(await jsonRpcCall<{ takeTasks: boolean }>(woken.daemon.sockets.mgmt, "daemon.status")).toMatchObject({ takeTasks: false });
    await expect(setup({ pollMs: 60_000, env: { EP_TAKE_TASKS: "sometimes" } })).rejects.toThrow(/EP_TAKE_TASKS must be 1 or 0/);
  });

  it("a lost task_ready costs at most one poll, and never a restart", async () => {
    // a daemon that claims on task_ready (no pushed work): the wake-ups are what is lost
    const s = await setup({ pollMs: 700, drop: true, takeTasks: false });
    for (let i = 0; i < 3; i++) {
      const task = (await s.work.createTask({ missionId: s.missionId, title: `lost ${i}`, runtime: Runtime.SHELL, input: { command: "echo ok" } })).task!;
      const done = await s.waitDone(task.id, 3000);
      expect(statusWord(done.status)).toBe("succeeded");
      expect(await s.claimedAt(task.id)).toBeLessThanOrEqual(700 + 300);
    }
    expect(s.dropped()).toBeGreaterThanOrEqual(3);
  });

  it("work queued while the link was down is claimed after the relink, also by an agent busy at that moment", async () => {
    let away = false;
    const s = await setup({ pollMs: 60_000, drop: () => away, linkBackoff: { initialMs: 50, maxMs: 50 } });
    const slow = (await s.work.createTask({ missionId: s.missionId, title: "slow", runtime: Runtime.SHELL, input: { command: "sleep 1.5" } })).task!;
    for (let i = 0; i < 100 && (await s.work.getTask({ taskId: slow.id })).task!.status !== TaskStatus.RUNNING; i++) await new Promise((r) => setTimeout(r, 20));
    // the link goes away: the wake-ups for what is submitted meanwhile never reach the daemon
    away = true;
    const queued: string[] = [];
    for (let i = 0; i < 2; i++) queued.push((await s.work.createTask({ missionId: s.missionId, title: `q${i}`, runtime: Runtime.SHELL, input: { command: "true" } })).task!.id);
    for (let i = 0; i < 100 && s.dropped() < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(s.dropped()).toBe(2);
    away = false;
    expect(s.t.tower.services.fleet.send(s.nodeId, { kind: "close" })).toBe(true);
    for (let i = 0; i < 100 && s.daemon.link.connects() < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(s.daemon.link.connects()).toBe(2);
    // relinked while the only agent is still busy: it claims the backlog once its run ends
    expect(statusWord((await s.work.getTask({ taskId: slow.id })).task!.status)).toBe("running");
    for (const id of queued) expect(statusWord((await s.waitDone(id, 5000)).status)).toBe("succeeded");
    expect(s.dropped()).toBe(2);
  });

  it("SIGTERM-style close waits for a running task, then fails what outlives the grace so it can run again", async () => {
    const s = await setup({ pollMs: 60_000, graceMs: 300 });
    const task = (await s.work.createTask({ missionId: s.missionId, title: "slow", runtime: Runtime.SHELL, input: { command: "sleep 30" } })).task!;
    for (let i = 0; i < 100 && (await s.work.getTask({ taskId: task.id })).task!.status !== TaskStatus.RUNNING; i++) await new Promise((r) => setTimeout(r, 30));
    await s.daemon.close();
    const after = (await s.work.getTask({ taskId: task.id })).task!;
    expect(statusWord(after.status)).toBe("queued");
    expect(after.result?.error).toMatch(/shut down/);
    expect(s.daemon.worker.running()).toHaveLength(0);
  });
});

describe("daemon worktree gc", () => {
  it("collects a kept worktree past its workspace's keep_failed, and run directories untouched for a week, without anyone asking", async () => {
    let kept = "";
    let repo = "";
    let work = "";
    await setup({
      pollMs: 200,
      beforeStart: async (home) => {
        // a failed run's worktree, kept, in a workspace whose keep_failed is 0
        repo = join(home, "repo");
        mkdirSync(repo);
        const git = (...args: string[]) => execFileSync("git", ["-c", "user.email=t@ep", "-c", "user.name=t", ...args], { cwd: repo });
        git("init", "-q");
        git("commit", "-q", "--allow-empty", "-m", "first");
        const epd = join(home, "epd");
        mkdirSync(epd, { recursive: true, mode: 0o700 });
        writeFileSync(join(epd, "workspaces.toml"), `[app]\npath = "${repo}"\nkeep_failed = "0m"\n`);
        const { record } = await createWorktree(epd, "tsk_old", { repo: "app" }, new Date());
        await finishWorktree(epd, record, false, "failed", new Date());
        kept = record.path;
        // run directories: one last changed eight days ago, one today
        work = join(epd, "work");
        mkdirSync(join(work, "tsk_stale"), { recursive: true });
        mkdirSync(join(work, "tsk_fresh"), { recursive: true });
        const eightDaysAgo = new Date(Date.now() - 8 * 86_400_000);
        utimesSync(join(work, "tsk_stale"), eightDaysAgo, eightDaysAgo);
      },
    });
    expect(kept).not.toBe("");
    await waitFor(async () => !existsSync(kept), 10_000);
    await waitFor(async () => !existsSync(join(work, "tsk_stale")), 10_000);
    expect(existsSync(join(work, "tsk_fresh"))).toBe(true);
    expect(execFileSync("git", ["worktree", "list"], { cwd: repo, encoding: "utf8" })).not.toContain("tsk_old");
  });
});
