// The daemon assembled in-process against a real tower on a loopback port: work assigned over the
// link, an assignment lost with the link given back and run after the relink, and graceful shutdown.
import { statusWord } from "../test-support/words.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../common/log.js";
import { startTower, type TestTower } from "./harness.js";
import { NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { jsonRpcCall } from "../daemon/mgmt/client.js";
import { createDaemon, type Daemon } from "../daemon/daemon.js";
import { createWorktree, finishWorktree } from "../daemon/worker/workspace.js";
import { waitFor } from "../test-support/wait.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function setup(opts: {
  pollMs: number;
  drop?: () => boolean;
  env?: Record<string, string>;
  graceMs?: number;
  linkBackoff?: { initialMs?: number; maxMs?: number };
  beforeStart?: (home: string) => Promise<void>;
}) {
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
    dropLinkMessage: (m) => (
      kinds.push(m.command.case ?? ""), opts.drop?.() && m.command.case === "assign" ? (dropped++, true) : false
    ),
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
    let status = TaskStatus.UNSPECIFIED;
    await waitFor(async () => {
      status = (await work.getTask({ taskId })).task!.status;
      return status === TaskStatus.SUCCEEDED || status === TaskStatus.FAILED;
    }, ms).catch(() => {
      throw new Error(`task ${taskId} is ${statusWord(status)}`);
    });
    return (await work.getTask({ taskId })).task!;
  };
  await waitFor(() => daemon.link.connects() >= 1); // the link's hello
  /**
   * The daemon's link dropped and reopened: a link opened with the node's token replaces it on the
   * tower, and the daemon links again (replacing that one in turn).
   */
  const relink = async () => {
    const before = daemon.link.connects();
    const ac = new AbortController();
    const other = (async () => {
      try {
        for await (const _ of t
          .client(NodeService, reg.token)
          .link({ attachSecret: "s".repeat(32), version: "test" }, { signal: ac.signal }));
      } catch {
        // aborted
      }
    })();
    await waitFor(() => daemon.link.connects() > before, 5000);
    ac.abort();
    await other;
  };
  return {
    t,
    work,
    daemon,
    nodeId: reg.node!.id,
    missionId,
    claimedAt,
    waitDone,
    dropped: () => dropped,
    kinds,
    relink,
  };
}

describe("daemon work over the link", () => {
  it("a task reaches the idle agent as an assignment on the link in milliseconds, long before the poll", async () => {
    const s = await setup({ pollMs: 60_000 });
    expect(s.daemon.link.state()).toBe("connected");
    const task = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "x",
        runtime: Runtime.SHELL,
        input: { command: "true" },
      })
    ).task!;
    await s.waitDone(task.id, 3000);
    expect(await s.claimedAt(task.id)).toBeLessThan(500);
    expect(s.kinds).toContain("assign");
  });

  it(
    "work queued while the agent was busy runs after a relink; an assignment " +
      "lost with the link goes back and runs after the relink, counted once",
    async () => {
      let away = false;
      const s = await setup({ pollMs: 60_000, drop: () => away, linkBackoff: { initialMs: 50, maxMs: 50 } });
      const slow = (
        await s.work.createTask({
          missionId: s.missionId,
          title: "slow",
          runtime: Runtime.SHELL,
          input: { command: "sleep 1.5" },
        })
      ).task!;
      await waitFor(async () => (await s.work.getTask({ taskId: slow.id })).task!.status === TaskStatus.RUNNING, 2000);
      const queued: string[] = [];
      for (let i = 0; i < 2; i++)
        queued.push(
          (
            await s.work.createTask({
              missionId: s.missionId,
              title: `q${i}`,
              runtime: Runtime.SHELL,
              input: { command: "true" },
            })
          ).task!.id,
        );
      // relinked while the only agent is busy: the lease it names keeps its run; the backlog waits for it
      await s.relink();
      expect(s.daemon.link.connects()).toBe(2);
      expect(statusWord((await s.work.getTask({ taskId: slow.id })).task!.status)).toBe("running");
      expect(statusWord((await s.waitDone(slow.id, 5000)).status)).toBe("succeeded");
      for (const id of queued) expect(statusWord((await s.waitDone(id, 5000)).status)).toBe("succeeded");
      // the link goes away with an assignment on it: the tower holds the task for the agent, the daemon never saw it
      away = true;
      const lost = (
        await s.work.createTask({
          missionId: s.missionId,
          title: "lost",
          runtime: Runtime.SHELL,
          input: { command: "true" },
        })
      ).task!;
      await waitFor(() => s.dropped() === 1, 5000);
      expect(statusWord((await s.work.getTask({ taskId: lost.id })).task!.status)).toBe("running");
      away = false;
      await s.relink();
      const done = await s.waitDone(lost.id, 5000);
      expect(statusWord(done.status)).toBe("succeeded");
      expect(done.attempts).toBe(1);
      expect(s.dropped()).toBe(1);
    },
  );

  it(
    "SIGTERM-style close waits for a running task, then " + "fails what outlives the grace so it can run again",
    async () => {
      const s = await setup({ pollMs: 60_000, graceMs: 300 });
      const task = (
        await s.work.createTask({
          missionId: s.missionId,
          title: "slow",
          runtime: Runtime.SHELL,
          input: { command: "sleep 30" },
        })
      ).task!;
      // running at the tower once it is handed over; wait until epd's run has it too
      await waitFor(() => s.daemon.worker.running().some((r) => r.taskId === task.id), 3000);
      await s.daemon.close();
      const after = (await s.work.getTask({ taskId: task.id })).task!;
      expect(statusWord(after.status)).toBe("queued");
      expect(after.result?.error).toMatch(/shut down/);
      expect(s.daemon.worker.running()).toHaveLength(0);
    },
  );
});

describe("daemon worktree gc", () => {
  it(
    "collects a kept worktree past its workspace's keep_failed, " +
      "and run directories untouched for a week, without anyone asking",
    async () => {
      let kept = "";
      let repo = "";
      let work = "";
      await setup({
        pollMs: 200,
        beforeStart: async (home) => {
          // a failed run's worktree, kept, in a workspace whose keep_failed is 0
          repo = join(home, "repo");
          mkdirSync(repo);
          const git = (...args: string[]) =>
            execFileSync("git", ["-c", "user.email=t@ep", "-c", "user.name=t", ...args], { cwd: repo });
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
    },
  );
});
