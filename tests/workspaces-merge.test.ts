// Issue 34, point 5: a task's branch, its commits naming the task and agent, and `ep task merge`
// taking it into its base branch. Real git repositories, the built tower and epd (the node merges,
// asked over its link), the shell runtime doing the edits, the built `ep` CLI.
import { statusWord } from "../test-support/words.js";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentService as LocalAgentService } from "../gen/ep/daemon/v1/mgmt_pb.js";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { createMgmtTransport } from "../daemon/mgmt/client.js";
import {
  adminClient,
  buildBinaries,
  epdFor,
  towerWithMission,
  type EpdProcess,
  type TowerSetup,
} from "./epd-harness.js";
import { buildCli, runEp } from "./fleet-harness.js";
import { waitFor } from "./harness.js";
import { Role, Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const cleanups: (() => unknown)[] = [];
let s: TowerSetup;
let epd: EpdProcess;
let n = 0;

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.email=t@ep", "-c", "user.name=t", ...args], { cwd, encoding: "utf8" }).trim();

/** A repository on main with greeting.txt and notes.txt, main checked out. */
function makeRepo(): string {
  const dir = join(s.home, `repo${++n}`);
  mkdirSync(dir, { recursive: true });
  git(dir, "init", "-q", "-b", "main");
  writeFileSync(join(dir, "greeting.txt"), "hello\n");
  writeFileSync(join(dir, "notes.txt"), "notes\n");
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "first");
  return dir;
}

/** Runs a shell task in a worktree of `repo` and waits for it to end. */
async function runTask(title: string, command: string, repo: string, ref?: string) {
  const t = (
    await s.work.createTask({
      missionId: s.missionId,
      title,
      runtime: Runtime.SHELL,
      input: { command, workspace: { repo, ...(ref ? { ref } : {}) } },
    })
  ).task!;
  await waitFor(
    async () =>
      ["succeeded", "failed", "cancelled"].includes(statusWord((await s.work.getTask({ taskId: t.id })).task!.status)),
    30_000,
  );
  return (await s.work.getTask({ taskId: t.id })).task!;
}

const ep = (...args: string[]) => runEp(s.home, [...args, "--url", s.tower.url, "--token", s.tower.adminToken]);

beforeAll(async () => {
  await Promise.all([buildBinaries(), buildCli()]);
  s = await towerWithMission("ep-merge-", (fn) => cleanups.push(fn));
  mkdirSync(join(s.home, "epd"), { recursive: true, mode: 0o700 });
  epd = await epdFor(s, (fn) => cleanups.push(fn));
  await createClient(LocalAgentService, createMgmtTransport(epd.mgmt)).enroll({
    domainId: s.domainId,
    runtime: "shell",
    name: "sh0",
  });
}, 120_000);

afterAll(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

describe("ep task merge", () => {
  it("fast-forwards the checked-out base; the agent's own commit is by the agent; ep task diff lists it", async () => {
    const repo = makeRepo();
    const t = await runTask("greet in french", `echo bonjour > greeting.txt && git commit -qam "say bonjour"`, repo);
    expect(statusWord(t.status)).toBe("succeeded");
    const ws = t.result!.workspace!;
    expect(ws.baseBranch).toBe("main");
    expect(ws.committed).toBe(true);
    expect(ws.commits.map((c) => [c.subject, c.author, c.byEpd])).toEqual([
      ["say bonjour", "EP agent sh0 <ep@localhost>", false],
    ]);

    const diff = await ep("task", "diff", t.id);
    expect(diff.stdout).toContain(
      `branch ep/${t.id} from main at ${ws.base.slice(0, 12)}, head ${ws.head.slice(0, 12)}`,
    );
    expect(diff.stdout).toMatch(
      /1 commit\(s\) on the branch:\n {2}\w{12} say bonjour {2}— EP agent sh0 <ep@localhost>\n/,
    );
    expect(diff.stdout).toContain(`merge it into main: ep task merge ${t.id}`);
    expect(diff.stdout).not.toContain("not committed");

    const merged = await ep("task", "merge", t.id);
    expect(merged.stderr).toBe("");
    expect(merged.code).toBe(0);
    expect(merged.stdout).toBe(
      `merged ep/${t.id} into main (fast-forward): main is now ${ws.head.slice(0, 12)} ` +
        `(was ${ws.base.slice(0, 12)}); files updated in ${repo}\n`,
    );
    expect(git(repo, "rev-parse", "main")).toBe(ws.head);
    expect(readFileSync(join(repo, "greeting.txt"), "utf8")).toBe("bonjour\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
    // again: nothing to do
    const again = await ep("task", "merge", t.id, "--json");
    expect(again.json()).toMatchObject({ outcome: "already_merged", into: "main", tip: ws.head });
    const events = (await s.events.listEvents({ limit: 1000 } as never)).events.filter(
      (e) => e.taskId === t.id && e.name === "workspace.merged",
    );
    expect(events.map((e) => e.payload?.outcome)).toEqual(["fast_forward", "already_merged"]);
  }, 60_000);

  it("makes a merge commit when main moved on; epd's commit of the " +
    "leftovers names the task and agent, by the configured author", async () => {
    const repo = makeRepo();
    writeFileSync(
      join(s.home, "epd", "workspaces.toml"),
      `[app]\npath = "${repo}"\nref = "main"\nauthor = "{agent} via EP <bots@example.com>"\n`,
    );
    const t = await runTask("shout the greeting", "echo HELLO > greeting.txt", "app");
    expect(statusWord(t.status)).toBe("succeeded");
    const ws = t.result!.workspace!;
    expect(ws.committed).toBe(false);
    expect(ws.commits.map((c) => [c.subject, c.author, c.byEpd])).toEqual([
      [`ep: shout the greeting (task ${t.id}, agent sh0)`, "sh0 via EP <bots@example.com>", true],
    ]);
    expect(git(repo, "log", "-1", "--format=%B", ws.head)).toBe(
      `ep: shout the greeting (task ${t.id}, agent sh0)\n\nWhat the run left uncommitted ` +
        `when it ended, committed by epd.\n\nEP-Task: ${t.id}\nEP-Agent: ${t.claimedBy}`,
    );
    expect((await ep("task", "diff", t.id, "--stat")).stdout).toContain("(epd: what the run left uncommitted)");

    // someone else moves main meanwhile, in another file; main is not checked out
    writeFileSync(join(repo, "notes.txt"), "more notes\n");
    git(repo, "commit", "-qam", "notes");
    git(repo, "checkout", "-q", "--detach");
    const previous = git(repo, "rev-parse", "main");
    const res = (await ep("task", "merge", t.id, "--json")).json() as Record<string, string>;
    expect(res).toMatchObject({
      outcome: "merge_commit",
      into: "main",
      branch: `ep/${t.id}`,
      merged: ws.head,
      previous,
      checkout: "",
    });
    expect(git(repo, "rev-parse", "main")).toBe(res.tip);
    expect(git(repo, "log", "-1", "--format=%P", "main")).toBe(`${previous} ${ws.head}`);
    expect(git(repo, "log", "-1", "--format=%an <%ae>|%s", "main")).toBe(
      `sh0 via EP <bots@example.com>|Merge ep/${t.id} into main: shout the greeting (task ${t.id})`,
    );
    expect(git(repo, "show", "main:greeting.txt")).toBe("HELLO");
    expect(git(repo, "show", "main:notes.txt")).toBe("more notes");
  }, 60_000);

  it("refuses a conflict, naming the files (exit 5), and leaves the repository as it was", async () => {
    const repo = makeRepo();
    const t = await runTask("greet in spanish", "echo hola > greeting.txt", repo);
    writeFileSync(join(repo, "greeting.txt"), "hi\n");
    git(repo, "commit", "-qam", "a person greets too");
    const before = git(repo, "rev-parse", "main");
    const res = await ep("task", "merge", t.id, "--json");
    expect(res.code).toBe(5);
    expect(res.json()).toMatchObject({
      error: {
        code: "merge_refused",
        details: { reason: "conflict", files: ["greeting.txt"], into: "main", branch: `ep/${t.id}` },
      },
    });
    expect(res.stderr).toContain(
      `ep: ep/${t.id} does not merge cleanly into main: 1 conflicting file(s): greeting.txt; nothing changed`,
    );
    expect(git(repo, "rev-parse", "main")).toBe(before);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(existsSync(join(repo, ".git", "MERGE_HEAD"))).toBe(false);
    expect(readFileSync(join(repo, "greeting.txt"), "utf8")).toBe("hi\n");
    const refused = (await s.events.listEvents({ limit: 1000 } as never)).events.filter(
      (e) => e.taskId === t.id && e.name === "workspace.merge_refused",
    );
    expect(refused.map((e) => e.payload?.reason)).toEqual(["conflict"]);
  }, 60_000);

  it("refuses while the base's checkout has uncommitted changes, and keeps them", async () => {
    const repo = makeRepo();
    const t = await runTask("add to notes", "echo agent >> notes.txt", repo);
    writeFileSync(join(repo, "greeting.txt"), "half-edited\n");
    const res = await ep("task", "merge", t.id);
    expect(res.code).toBe(5);
    expect(res.stderr).toContain(
      `main is checked out in ${repo} with uncommitted changes ` +
        `(greeting.txt); commit or stash them, then merge again; nothing changed`,
    );
    expect(readFileSync(join(repo, "greeting.txt"), "utf8")).toBe("half-edited\n");
    expect(git(repo, "rev-parse", "main")).toBe(t.result!.workspace!.base);
    // --into another branch, which is not checked out, goes ahead
    git(repo, "branch", "release", "main");
    expect((await ep("task", "merge", t.id, "--into", "release", "--json")).json()).toMatchObject({
      outcome: "fast_forward",
      into: "release",
    });
    expect(git(repo, "show", "release:notes.txt")).toBe("notes\nagent");
  }, 60_000);

  it("refuses what cannot be merged with clear errors: an unknown " +
    "task, one without a workspace, one that failed, a viewer", async () => {
    const unknown = await ep("task", "merge", "tsk_nope");
    expect([unknown.code, unknown.stderr]).toEqual([4, expect.stringContaining("ep: task tsk_nope does not exist")]);
    const plain = (
      await s.work.createTask({
        missionId: s.missionId,
        title: "plain",
        runtime: Runtime.SHELL,
        input: { command: "true" },
      })
    ).task!;
    await waitFor(
      async () => statusWord((await s.work.getTask({ taskId: plain.id })).task!.status) === "succeeded",
      30_000,
    );
    const noWs = await ep("task", "merge", plain.id);
    expect([noWs.code, noWs.stderr]).toEqual([
      5,
      expect.stringContaining(
        `task ${plain.id} ran without a workspace (no input.workspace): there is no branch to merge`,
      ),
    ]);
    const failed = await runTask("breaks", "echo x > greeting.txt; exit 3", makeRepo());
    const res = await ep("task", "merge", failed.id, "--json");
    expect(res.code).toBe(5);
    expect(res.json()).toMatchObject({
      error: {
        code: "task_not_mergeable",
        message: `task ${failed.id} is failed; only a succeeded task's branch is merged`,
      },
    });
    // a base taken from a commit, not a branch: the branch to merge into must be named
    const repo = makeRepo();
    const detached = await runTask("from a commit", "echo later > notes.txt", repo, git(repo, "rev-parse", "main"));
    expect(detached.result!.workspace!.baseBranch).toBe("");
    const unnamed = await ep("task", "merge", detached.id);
    expect([unnamed.code, unnamed.stderr]).toEqual([
      2,
      expect.stringContaining("was not taken from a branch; name the branch to merge into"),
    ]);
    expect((await ep("task", "merge", detached.id, "--into", "main", "--json")).json()).toMatchObject({
      outcome: "fast_forward",
      into: "main",
    });
    const viewer = (await adminClient(s.tower, AuthService).createToken({ name: "watcher", role: Role.VIEWER })).secret;
    const denied = await runEp(s.home, ["task", "merge", failed.id, "--url", s.tower.url, "--token", viewer]);
    expect([denied.code, denied.stderr]).toEqual([
      3,
      expect.stringContaining("role viewer may not call WorkService/MergeTask (admin, operator may)"),
    ]);
  }, 60_000);

  it("says the node is not connected when epd is away (exit 7), and nothing is merged", async () => {
    const repo = makeRepo();
    const t = await runTask("late merge", "echo later > greeting.txt", repo);
    await epd.stop();
    const res = await ep("task", "merge", t.id);
    expect(res.code).toBe(7);
    expect(res.stderr).toMatch(/ep: node nod_\w+ is not connected; task tsk_\w+'s branch was not merged/);
    expect(res.stderr).toContain("hint: the node that ran the task must be connected ('ep node ls')");
    expect(git(repo, "rev-parse", "main")).toBe(t.result!.workspace!.base);
  }, 60_000);
});
