// Issue 20, part 1: a task naming a git repository runs in a worktree of its own. Real git
// repositories made here, the built tower and epd, the shell runtime, the built `ep` CLI.
import { statusWord } from "../test-support/words.js";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { beforeAll, describe, expect, it } from "vitest";
import { AgentService as LocalAgentService } from "../gen/ep/daemon/v1/mgmt_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { createMgmtTransport } from "../daemon/mgmt/client.js";
import { adminClient, buildBinaries, epdFor, towerWithMission, type TowerSetup } from "./epd-harness.js";
import { buildCli, runEp } from "./fleet-harness.js";
import { useCleanups, waitFor } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const cleanup = useCleanups();

beforeAll(async () => {
  await Promise.all([buildBinaries(), buildCli()]);
}, 120_000);

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.email=t@ep", "-c", "user.name=t", ...args], { cwd, encoding: "utf8" });

/** A repository with one commit: greeting.txt and a package script the setup can run. */
function makeRepo(dir: string): string {
  mkdirSync(dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  writeFileSync(join(dir, "greeting.txt"), "hello\n");
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "first");
  return dir;
}

async function waitTask(s: TowerSetup, taskId: string) {
  let status = "";
  await waitFor(
    async () =>
      ["succeeded", "failed", "cancelled"].includes(
        (status = statusWord((await s.work.getTask({ taskId })).task!.status)),
      ),
    30_000,
  ).catch(() => {
    throw new Error(`task ${taskId} stayed ${status}`);
  });
  return (await s.work.getTask({ taskId })).task!;
}

async function shellAgents(s: TowerSetup, n: number) {
  const epd = await epdFor(s, cleanup);
  const local = createClient(LocalAgentService, createMgmtTransport(epd.mgmt));
  for (let i = 0; i < n; i++) await local.enroll({ domainId: s.domainId, runtime: "shell", name: `sh${i}` });
  return epd;
}

describe("workspaces", () => {
  it("two concurrent tasks edit the same file of one repository " +
    "in separate worktrees; each result has its own diff", async () => {
    const s = await towerWithMission("ep-ws-", cleanup);
    const repo = makeRepo(join(s.home, "repo"));
    await shellAgents(s, 2);
    // both run at once (each waits, up to 10 s, until the other has started) and write the same file
    const sync = join(s.home, "sync");
    mkdirSync(sync);
    const edit = (word: string) =>
      `touch ${sync}/${word}; for i in $(seq 200); do [ -e ${sync}/bonjour ] ` +
      `&& [ -e ${sync}/hola ] && { echo together; break; }; sleep 0.05; done; ` +
      `echo "${word}" > greeting.txt; git -c user.email=a@ep -c user.name=a commit -qam "${word}"; pwd`;
    const ta = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "a",
        runtime: Runtime.SHELL,
        input: { command: edit("bonjour"), workspace: { repo } },
      })
    ).task!;
    const tb = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "b",
        runtime: Runtime.SHELL,
        input: { command: edit("hola"), workspace: { repo } },
      })
    ).task!;
    const [ra, rb] = await Promise.all([waitTask(s, ta.id), waitTask(s, tb.id)]);
    expect([ra.status, rb.status].map(statusWord)).toEqual(["succeeded", "succeeded"]);
    expect([ra.result!.output, rb.result!.output]).toEqual([
      expect.stringContaining("together"),
      expect.stringContaining("together"),
    ]);
    const wa = ra.result!.workspace!;
    const wb = rb.result!.workspace!;
    expect(wa.branch).toBe(`ep/${ta.id}`);
    expect(wb.branch).toBe(`ep/${tb.id}`);
    expect(wa.base).toBe(git(repo, "rev-parse", "main").trim());
    expect(wa.committed && wb.committed).toBe(true);
    expect(wa.patch).toContain("+bonjour");
    expect(wa.patch).not.toContain("hola");
    expect(wb.patch).toContain("+hola");
    expect(wb.patch).not.toContain("bonjour");
    expect(wa.stat).toMatch(/greeting\.txt \| 2 \+-/);
    expect(wa.filesChanged).toBe(1);
    // each ran in its own worktree, now removed; the branches stay with the commits; main is untouched
    expect(ra.result!.output).toContain(join(s.home, "epd", "worktrees", ta.id));
    expect(rb.result!.output).toContain(join(s.home, "epd", "worktrees", tb.id));
    expect(existsSync(join(s.home, "epd", "worktrees", ta.id))).toBe(false);
    expect(git(repo, "show", `ep/${ta.id}:greeting.txt`)).toBe("bonjour\n");
    expect(git(repo, "show", `ep/${tb.id}:greeting.txt`)).toBe("hola\n");
    expect(git(repo, "show", "main:greeting.txt")).toBe("hello\n");

    // the diff on the CLI, plain when piped
    const diff = await runEp(s.home, ["task", "diff", ta.id, "--url", s.tower.url, "--token", s.tower.adminToken]);
    expect(diff.code).toBe(0);
    expect(diff.stdout).toContain(`branch ep/${ta.id}`);
    expect(diff.stdout).toContain("+bonjour");
    expect(diff.stdout).not.toContain("\x1b[");
    // the events
    const names = (await s.events.listEvents({ limit: 1000 } as never)).events
      .filter((e) => e.taskId === ta.id)
      .map((e) => e.name);
    expect(names).toEqual(expect.arrayContaining(["workspace.created", "workspace.removed"]));
  }, 90_000);

  it("keeps a failed run's worktree (ep workspace ls) until gc " +
    "collects it; a named workspace's setup output is progress", async () => {
    const s = await towerWithMission("ep-ws-", cleanup);
    const repo = makeRepo(join(s.home, "repo"));
    mkdirSync(join(s.home, "epd"), { recursive: true, mode: 0o700 });
    writeFileSync(
      join(s.home, "epd", "workspaces.toml"),
      `[app]\npath = "${repo}"\nref = "main"\nsetup = "echo preparing ` +
        `the worktree; echo ready > .setup-done"\nkeep_failed = "1h"\n`,
    );
    await shellAgents(s, 1);
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "fails",
        runtime: Runtime.SHELL,
        input: { command: "cat .setup-done; echo broken >> greeting.txt; exit 3", workspace: { repo: "app" } },
      })
    ).task!;
    const r = await waitTask(s, t.id);
    expect(statusWord(r.status)).toBe("failed");
    const w = r.result!.workspace!;
    expect(w.name).toBe("app");
    expect(w.committed).toBe(false);
    expect(w.patch).toContain("+broken");
    expect(w.patch).toContain("+ready"); // the setup's file is a new file in the change
    expect(w.worktree).toBe(join(s.home, "epd", "worktrees", t.id));
    expect(existsSync(w.worktree)).toBe(true);
    expect(r.result!.output).toContain("ready");

    const progress = (await s.events.listEvents({ types: ["progress"], limit: 1000 } as never)).events
      .filter((e) => e.taskId === t.id)
      .map((e) => String(e.payload?.text ?? ""));
    expect(progress).toContain("preparing the worktree");

    const ep = (...args: string[]) => runEp(s.home, [...args, "--json"]);
    const listed = JSON.parse((await ep("workspace", "ls")).stdout) as {
      worktrees: { task_id: string; state: string }[];
    };
    expect(listed.worktrees).toEqual([expect.objectContaining({ task_id: t.id, state: "kept" })]);
    // younger than keep_failed: gc leaves it; --all takes it
    expect(JSON.parse((await ep("workspace", "gc")).stdout)).toEqual({ removed: [] });
    const gc = JSON.parse((await ep("workspace", "gc", "--all")).stdout) as { removed: { task_id: string }[] };
    expect(gc.removed.map((x) => x.task_id)).toEqual([t.id]);
    expect(existsSync(w.worktree)).toBe(false);
    expect(git(repo, "worktree", "list")).not.toContain(t.id);
    expect(JSON.parse((await ep("workspace", "ls")).stdout)).toEqual({ worktrees: [] });
  }, 90_000);

  it("a profile agent naming a workspace in agents.toml runs each of its tasks in a worktree of it", async () => {
    const s = await towerWithMission("ep-ws-", cleanup);
    const repo = makeRepo(join(s.home, "repo"));
    const domain = (await s.work.getMission({ missionId: s.missionId })).mission!.domainId;
    mkdirSync(join(s.home, "epd"), { recursive: true, mode: 0o700 });
    writeFileSync(join(s.home, "epd", "workspaces.toml"), `[app]\npath = "${repo}"\n`);
    writeFileSync(
      join(s.home, "epd", "agents.toml"),
      `[[agent]]\nid = "fixer"\nruntime = "shell"\ndomain = "${domain}"\nworkspace = "app"\n`,
    );
    await epdFor(s, cleanup);
    await waitFor(
      async () =>
        (await adminClient(s.tower, AgentService).listAgents({ domainId: domain })).agents.some(
          (a) => a.name === "fixer",
        ),
      15_000,
    );
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "profile",
        runtime: Runtime.SHELL,
        input: { command: "echo fixed > greeting.txt" },
      })
    ).task!;
    const r = await waitTask(s, t.id);
    expect(statusWord(r.status)).toBe("succeeded");
    expect(r.result!.workspace).toMatchObject({ name: "app", branch: `ep/${t.id}`, filesChanged: 1 });
    expect(r.result!.workspace!.patch).toContain("+fixed");
    // the agent left its change uncommitted: epd saved it on the branch before removing the worktree
    const w = r.result!.workspace!;
    expect(w.committed).toBe(false);
    expect(w.head).not.toBe(w.base);
    expect(git(repo, "rev-parse", `ep/${t.id}`).trim()).toBe(w.head);
    expect(git(repo, "show", `ep/${t.id}:greeting.txt`)).toBe("fixed\n");
    expect(git(repo, "log", "-1", "--format=%s", `ep/${t.id}`).trim()).toBe(`ep: profile (task ${t.id}, agent fixer)`);
    expect(w.commits.map((c) => c.byEpd)).toEqual([true]);
  }, 60_000);

  it("fails a task whose workspace is not a repository, naming the field, and runs nothing", async () => {
    const s = await towerWithMission("ep-ws-", cleanup);
    await shellAgents(s, 1);
    const t = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "bad",
        runtime: Runtime.SHELL,
        input: { command: "touch ran", workspace: { repo: join(s.home, "nowhere") } },
      })
    ).task!;
    const r = await waitTask(s, t.id);
    expect(statusWord(r.status)).toBe("failed");
    expect(r.result!.error).toMatch(/input\.workspace\.repo: .*nowhere does not exist on this node/);
    expect(existsSync(join(s.home, "epd", "work", t.id, "ran"))).toBe(false);
    const named = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "bad",
        runtime: Runtime.SHELL,
        input: { command: "true", workspace: { repo: "unknown-name" } },
      })
    ).task!;
    expect((await waitTask(s, named.id)).result!.error).toMatch(
      /neither an absolute path nor a workspace named in workspaces\.toml/,
    );
  }, 60_000);
});
