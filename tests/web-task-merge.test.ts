// The console's Changes section merges a task's branch (issue 34, point 5), in Debian's chromium
// against a real tower process and a real epd running shell tasks in worktrees of a real git
// repository: Merge fast-forwards main; a conflicting branch is refused with its files listed.
import { statusWord } from "../test-support/words.js";
import type { Client } from "@connectrpc/connect";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { CHROMIUM, ensureConsoleBuilt, openConsole } from "./browser.js";
import { adminClient, startTowerAndEpd, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, waitFor } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const chromiumTool = optionalTool(CHROMIUM, { pkg: "chromium", suite: "web-task-merge" });

const home = tempHome("ep-task-merge-");
const repo = join(home.dir, "repo");
let tower: TowerProcess;
let epd: EpdProcess;
let ctx: BrowserContext;
let page: Page;
let profile: string;
let work: Client<typeof WorkService>;
let missionId = "";
let pageErrors: string[] = [];

const git = (...args: string[]) =>
  execFileSync("git", ["-c", "user.email=t@ep", "-c", "user.name=t", ...args], { cwd: repo, encoding: "utf8" }).trim();

/** A shell task editing the repository in its worktree; its id once it succeeded. */
async function edit(title: string, command: string): Promise<string> {
  const id = (
    await work.createTask({ missionId, title, runtime: Runtime.SHELL, input: { command, workspace: { repo } } })
  ).task!.id;
  await waitFor(async () => statusWord((await work.getTask({ taskId: id })).task!.status) === "succeeded", 20_000);
  return id;
}

describe.skipIf(chromiumTool.skip)("the console's Merge action", () => {
  beforeAll(async () => {
    chromiumTool.require();
    mkdirSync(repo, { recursive: true });
    git("init", "-q", "-b", "main");
    writeFileSync(join(repo, "greeting.txt"), "hello\n");
    git("add", ".");
    git("commit", "-q", "-m", "first");
    const [, started] = await Promise.all([ensureConsoleBuilt(), startTowerAndEpd(home.dir)]);
    ({ tower, epd } = started);
    work = adminClient(tower, WorkService);
    const domainId = (await work.createDomain({ name: "merges" })).domain!.id;
    missionId = (await work.createMission({ domainId, title: "merge tour" })).mission!.id;
    await epd.call("agent.enroll", { domainId, runtime: "shell", name: "editor" });
    profile = mkdtempSync(join(tmpdir(), "ep-chromium-"));
    ({ ctx, page, pageErrors } = await openConsole(
      tower.url,
      (await adminClient(tower, AuthService).createTicket({ purpose: "login" })).ticket,
      profile,
    ));
  }, 90_000);

  afterAll(async () => {
    await ctx?.close();
    await epd?.stop();
    await tower?.stop();
    home.cleanup();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it("merges a succeeded task's branch into main from its Changes section", async () => {
    const id = await edit("greet in french", "echo bonjour > greeting.txt");
    const head = (await work.getTask({ taskId: id })).task!.result!.workspace!.head;
    await page.goto(`${tower.url}/ui/tasks/${id}`);
    const changes = page.locator(".workspace-change");
    await changes.waitFor({ timeout: 10_000 });
    expect(await page.getByRole("list", { name: "Commits" }).innerText()).toContain(
      `ep: greet in french (task ${id}, agent editor)`,
    );
    await changes.getByRole("button", { name: "Merge into main" }).click();
    const done = changes.getByRole("status");
    await done.waitFor({ timeout: 35_000 });
    expect(await done.innerText()).toBe(
      `Merged into main (fast-forward): main is now ${head.slice(0, 12)} (main was ` +
        `${git("rev-parse", `${head}~1`).slice(0, 12)}; files updated in ${repo}).`,
    );
    expect(git("rev-parse", "main")).toBe(head);
    expect(readFileSync(join(repo, "greeting.txt"), "utf8")).toBe("bonjour\n");
    expect(pageErrors).toEqual([]);
  }, 60_000);

  it("shows a refused merge with the conflicting files, and main stays as it was", async () => {
    const id = await edit("greet in spanish", "echo hola > greeting.txt");
    writeFileSync(join(repo, "greeting.txt"), "hi\n");
    git("commit", "-qam", "a person greets");
    const before = git("rev-parse", "main");
    await page.goto(`${tower.url}/ui/tasks/${id}`);
    const changes = page.locator(".workspace-change");
    await changes.getByRole("button", { name: "Merge into main" }).click();
    const alert = changes.getByRole("alert");
    await alert.waitFor({ timeout: 35_000 });
    expect(await alert.innerText()).toContain(
      `Not merged: ep/${id} does not merge cleanly into main: 1 conflicting file(s): greeting.txt; nothing changed`,
    );
    expect(await changes.getByRole("list", { name: "Conflicting files" }).innerText()).toBe("greeting.txt");
    expect(git("rev-parse", "main")).toBe(before);
    expect(git("status", "--porcelain")).toBe("");
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
