// The console's task page (issue 17) in Debian's chromium, against a real tower process and a
// real epd running shell tasks: progress frames arrive live and the output follows; Cancel and
// Retry act with the API's rules. The shell tasks wait on gate files the test creates, so
// "running" is a state the test controls rather than a timing it hopes for.
import { statusWord } from "../test-support/words.js";
import type { Client } from "@connectrpc/connect";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { CHROMIUM, ensureConsoleBuilt, launchChromium } from "./browser.js";
import { adminClient, ROOT, startTowerAndEpd, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, waitFor } from "./harness.js";
import { optionalTool } from "./optional-tools.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const chromiumTool = optionalTool(CHROMIUM, { pkg: "chromium", suite: "web-task-page" });

const home = tempHome("ep-task-page-");
const gates = mkdtempSync(join(tmpdir(), "ep-gates-"));
let tower: TowerProcess;
let epd: EpdProcess;
let ctx: BrowserContext;
let page: Page;
let profile: string;
let work: Client<typeof WorkService>;
let missionId = "";
const pageErrors: string[] = [];

/** A shell task that prints, waits for `gate` to exist, prints again and ends with `code`. */
function gated(gate: string, code = 0): string {
  return (
    `echo "warming up"; echo "step one of two"; while [ ! -e ${join(gates, gate)} ` +
    `]; do sleep 0.05; done; echo "step two of two"; echo "all done"; exit ${code}`
  );
}

async function submit(title: string, command: string, maxAttempts = 3): Promise<string> {
  return (await work.createTask({ missionId, title, runtime: Runtime.SHELL, input: { command }, maxAttempts })).task!
    .id;
}

async function status(id: string): Promise<string> {
  return statusWord((await work.getTask({ taskId: id })).task!.status);
}

describe.skipIf(chromiumTool.skip)("the console's task page", () => {
  beforeAll(async () => {
    chromiumTool.require();
    // an ACP agent (the SDK-built stand-in for claude-code-acp) whose tool requests go before a person
    const askingAgent = () => {
      mkdirSync(join(home.dir, "epd"), { recursive: true, mode: 0o700 });
      writeFileSync(
        join(home.dir, "epd", "runtimes.toml"),
        `[vendorA_agent_acp]\ncommand = ` +
          `${JSON.stringify(join(ROOT, "daemon", "runtimes", "fixtures", "claude-code-acp"))}\npermission ` +
          `= "ask"\n`,
      );
    };
    const [, started] = await Promise.all([
      ensureConsoleBuilt(),
      startTowerAndEpd(home.dir, { beforeEpd: askingAgent }),
    ]);
    ({ tower, epd } = started);
    work = adminClient(tower, WorkService);
    const domainId = (await work.createDomain({ name: "pages" })).domain!.id;
    missionId = (await work.createMission({ domainId, title: "page tour" })).mission!.id;
    await epd.call("agent.enroll", { domainId, runtime: "shell", name: "sheller" });
    await epd.call("agent.enroll", { domainId, runtime: "vendorA_agent_acp", name: "asker" });

    profile = mkdtempSync(join(tmpdir(), "ep-chromium-"));
    ctx = await launchChromium(profile, { viewport: { width: 1280, height: 900 } });
    page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on("pageerror", (err) => pageErrors.push(err.message));
    const ticket = (await adminClient(tower, AuthService).createTicket({ purpose: "login" })).ticket;
    await page.goto(`${tower.url}/ui/login#ticket=${ticket}`);
    await page.getByRole("navigation", { name: "Views" }).waitFor();
  }, 90_000);

  afterAll(async () => {
    await ctx?.close();
    await epd?.stop();
    await tower?.stop();
    home.cleanup();
    rmSync(gates, { recursive: true, force: true });
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it("opens from the Missions table and shows progress live, then the output", async () => {
    const id = await submit("live log", gated("live"));
    await waitFor(async () => (await status(id)) === "running", 15_000);
    await page
      .getByRole("navigation", { name: "Views" })
      .getByRole("link", { name: /^Missions/ })
      .click();
    await page.getByRole("link", { name: "live log" }).click();
    expect(new URL(page.url()).pathname).toBe(`/ui/tasks/${id}`);
    await page.getByRole("heading", { name: "live log" }).waitFor();
    const frames = page.getByRole("list", { name: "Progress frames" });
    // replayed: what the task printed before the page opened
    await frames.getByText("step one of two").waitFor({ timeout: 10_000 });
    expect(await page.locator(".task-head .badge").innerText()).toBe("running");
    expect(await page.locator(".facts").innerText()).toContain("sheller");
    expect(await page.locator(".facts").innerText()).toContain("Shell");
    // live: what it prints while the page is open, without a reload
    await page.evaluate(() => ((window as unknown as { __noReload: boolean }).__noReload = true));
    writeFileSync(join(gates, "live"), "");
    await frames.getByText("step two of two").waitFor({ timeout: 10_000 });
    await page.locator(".task-output").waitFor({ timeout: 10_000 });
    expect(await page.locator(".task-output").innerText()).toContain("all done");
    expect(await page.locator(".task-head .badge").innerText()).toBe("succeeded");
    expect(await page.evaluate(() => (window as unknown as { __noReload?: boolean }).__noReload)).toBe(true);
    // frames arrive once each, in order
    const texts = await frames.locator(".frame-body").allInnerTexts();
    const mine = texts.filter((t) => /step|warming|all done/.test(t));
    expect(mine).toEqual(["warming up", "step one of two", "step two of two", "all done"]);
  }, 60_000);

  it("folds the runtime's stderr lines into a closed disclosure that opens on a click (issue 34)", async () => {
    // the pauses keep the two pipes in order: before, the two stderr lines, after
    const id = await submit(
      "noisy",
      `echo "before"; sleep 0.3; echo "warn one" >&2; echo "warn two" >&2; sleep 0.3; echo "after"`,
    );
    await waitFor(async () => (await status(id)) === "succeeded", 15_000);
    await page.goto(`${tower.url}/ui/tasks/${id}`);
    const frames = page.getByRole("list", { name: "Progress frames" });
    await frames.getByText("after").waitFor({ timeout: 10_000 });
    const folded = frames.locator(".stderr-lines");
    expect(await folded.count()).toBe(1);
    expect(await folded.locator("summary").innerText()).toBe("2 stderr lines");
    expect(await frames.getByText("warn one").isVisible()).toBe(false);
    await folded.locator("summary").click();
    await frames.getByText(/warn one\s+warn two/).waitFor({ state: "visible", timeout: 5_000 });
    expect(await frames.locator(".frame-body").allInnerTexts()).toEqual(["before", "after"]);
  }, 60_000);

  it("misses no frame committed between the page's first read and its live feed's start", async () => {
    const id = await submit("late feed", gated("late"));
    await waitFor(async () => (await status(id)) === "running", 15_000);
    // hold the page's live feed back until the task has printed the rest and ended: those frames
    // are after what the first replay read and before the point the feed starts from
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await page.route("**/events/stream**", async (route) => {
      await held;
      await route.continue();
    });
    try {
      await page.goto(`${tower.url}/ui/tasks/${id}`);
      const frames = page.getByRole("list", { name: "Progress frames" });
      await frames.getByText("step one of two").waitFor({ timeout: 10_000 });
      writeFileSync(join(gates, "late"), "");
      await waitFor(async () => (await status(id)) === "succeeded", 15_000);
      expect(await frames.getByText("step two of two").count()).toBe(0);
      release();
      await frames.getByText("all done").waitFor({ timeout: 10_000 });
      await expect.poll(() => page.locator(".task-head .badge").innerText(), { timeout: 10_000 }).toBe("succeeded");
      const mine = (await frames.locator(".frame-body").allInnerTexts()).filter((t) => /step|warming|all done/.test(t));
      expect(mine).toEqual(["warming up", "step one of two", "step two of two", "all done"]);
    } finally {
      release();
      await page.unroute("**/events/stream**");
    }
  }, 60_000);

  it("cancels a running task from its page", async () => {
    const id = await submit("to cancel", gated("never"));
    await waitFor(async () => (await status(id)) === "running", 15_000);
    await page.goto(`${tower.url}/ui/tasks/${id}`);
    await page.getByRole("list", { name: "Progress frames" }).getByText("step one of two").waitFor({ timeout: 10_000 });
    await page.getByRole("button", { name: "Cancel" }).click();
    await page.getByText("Cancelled.").waitFor();
    await waitFor(async () => (await status(id)) === "cancelled", 10_000);
    await expect.poll(() => page.locator(".task-head .badge").innerText(), { timeout: 10_000 }).toBe("cancelled");
    // its progress shows what it printed, so the output section does not say "No output." (issue 38)
    const outputSection = page.getByRole("region", { name: "Output" });
    await outputSection
      .getByText("No final output: it was cancelled before it reported one. What it printed is in the progress above.")
      .waitFor({ timeout: 10_000 });
    expect(await outputSection.innerText()).not.toContain("No output.");
    // a cancelled task offers Retry, no longer Cancel
    expect(await page.getByRole("button", { name: "Cancel" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Retry" }).count()).toBe(1);
  }, 60_000);

  it("retries a failed task from its page; the run goes again", async () => {
    const id = await submit("to retry", "echo 'trying'; exit 3", 1);
    await waitFor(async () => (await status(id)) === "failed", 15_000);
    await page.goto(`${tower.url}/ui/tasks/${id}`);
    await page.locator(".task-error").waitFor({ timeout: 10_000 });
    expect(await page.locator(".task-error").innerText()).toMatch(/exit|code 3/);
    expect(await page.locator(".facts").innerText()).toContain("1 of 1");
    // one attempt: no divider, and the run's real duration (a shell echo runs in milliseconds)
    expect(await page.locator(".attempt-divider").count()).toBe(0);
    expect(await page.locator(".task-ran").innerText()).toMatch(/^ · ran \d+ ms$/);
    await page.getByRole("button", { name: "Retry" }).click();
    await page.getByText("Queued again.").waitFor();
    // it runs again (and fails again): a second "trying" frame arrives live
    await expect
      .poll(async () => await page.getByRole("list", { name: "Progress frames" }).getByText("trying").count(), {
        timeout: 15_000,
      })
      .toBe(2);
    await waitFor(async () => (await status(id)) === "failed", 15_000);
    // each attempt under its own divider, with how it ended and how long it ran (issue 38)
    const frames = page.getByRole("list", { name: "Progress frames" });
    await expect
      .poll(() => frames.getByRole("separator").allInnerTexts(), { timeout: 10_000 })
      .toEqual([
        expect.stringMatching(/^Attempt 1 · failed · ran \d+ ms$/),
        expect.stringMatching(/^Attempt 2 · failed · ran \d+ ms$/),
      ]);
    const order = await frames
      .locator("li")
      .evaluateAll((lis) =>
        lis
          .map((li) =>
            li.getAttribute("role") === "separator"
              ? li.textContent!.slice(0, 9)
              : li.textContent!.includes("trying")
                ? "trying"
                : "",
          )
          .filter(Boolean),
      );
    expect(order).toEqual(["Attempt 1", "trying", "Attempt 2", "trying"]);
    // the final state, not the button's note: "Queued again." is gone once the retry failed
    await expect.poll(() => page.locator(".task-head .badge").innerText(), { timeout: 10_000 }).toBe("failed");
    await expect.poll(() => page.getByText("Queued again.").count(), { timeout: 10_000 }).toBe(0);
    expect(await page.locator(".task-ran").innerText()).toMatch(/^ · ran \d+ ms$/);
  }, 60_000);

  it("approving an agent's tool request in the Approvals tab lets its run go on (issue 20)", async () => {
    const id = (
      await work.createTask({
        missionId,
        title: "asks first",
        runtime: Runtime.VENDORA_AGENT_ACP,
        input: { prompt: "write the notes [real]" },
      })
    ).task!.id;
    await page
      .getByRole("navigation", { name: "Views" })
      .getByRole("link", { name: /^Approvals/ })
      .click();
    const card = page.getByRole("article", { name: /^Permission edit: Write .*notes\.txt/ });
    await card.waitFor({ timeout: 20_000 });
    expect(await card.innerText()).toContain(id);
    expect(await card.innerText()).toMatch(/Paths: .*notes\.txt/);
    // the tab's badge counts it
    expect(
      await page
        .getByRole("navigation", { name: "Views" })
        .getByRole("link", { name: /^Approvals/ })
        .innerText(),
    ).toMatch(/1/);
    // the agent waits: still running while nobody decides
    expect(await status(id)).toBe("running");
    await card.getByRole("button", { name: "Allow once" }).click();
    await waitFor(async () => (await status(id)) === "succeeded", 20_000);
    await expect.poll(() => page.getByRole("article", { name: /^Permission / }).count(), { timeout: 10_000 }).toBe(0);
    // the agent was told yes: its run reports the allowed tool call
    await page.goto(`${tower.url}/ui/tasks/${id}`);
    const frames = page.getByRole("list", { name: "Progress frames" });
    await frames.getByText(/permission for edit approved by/).waitFor({ timeout: 10_000 });
    await frames.getByText(/permission allow: Write/).waitFor({ timeout: 10_000 });
  }, 60_000);

  it("a run whose agent was refused a tool: an amber 'succeeded with " +
    "1 refusal', the refusal as a frame and in Denials (issue 34)", async () => {
    const id = (
      await work.createTask({
        missionId,
        title: "refused by a person",
        runtime: Runtime.VENDORA_AGENT_ACP,
        input: { prompt: "write the refused notes [real]" },
      })
    ).task!.id;
    await page.goto(`${tower.url}/ui/approvals`);
    const card = page.getByRole("article", { name: /^Permission edit: Write .*notes\.txt/ });
    await card.waitFor({ timeout: 20_000 });
    await card.getByRole("button", { name: "Reject" }).click();
    await waitFor(async () => (await status(id)) === "succeeded", 20_000);
    await page.goto(`${tower.url}/ui/tasks/${id}`);
    const badge = page.locator(".task-head .badge");
    await expect.poll(() => badge.innerText(), { timeout: 10_000 }).toBe("succeeded with 1 refusal");
    expect(await badge.getAttribute("class")).toContain("badge-warn");
    const denials = page.getByRole("region", { name: /^Denials/ });
    await denials.waitFor();
    const entry = await denials.locator(".denial").innerText();
    expect(entry).toContain("a person");
    expect(entry).toMatch(/edit\s*\S*notes\.txt/);
    expect(entry).toContain('not allowed under permission = "ask"');
    const frame = page.getByRole("list", { name: "Progress frames" }).locator(".frame-denial");
    await frame.waitFor();
    expect(await frame.innerText()).toMatch(/^REFUSED\s*refused \(person\): edit /i);
    // the Missions table says it too
    await page
      .getByRole("navigation", { name: "Views" })
      .getByRole("link", { name: /^Missions/ })
      .click();
    const row = page.locator("tr", { has: page.getByRole("link", { name: "refused by a person" }) });
    await expect.poll(() => row.locator(".badge").innerText(), { timeout: 10_000 }).toBe("succeeded with 1 refusal");
  }, 60_000);

  it("shows a workspace task's changed files and patch (issue 20)", async () => {
    const repo = join(gates, "repo");
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.email=t@ep", "-c", "user.name=t", ...args], { cwd: repo, encoding: "utf8" });
    mkdirSync(repo);
    git("init", "-q", "-b", "main");
    writeFileSync(join(repo, "app.txt"), "one\ntwo\n");
    git("add", ".");
    git("commit", "-q", "-m", "first");
    const id = (
      await work.createTask({
        missionId,
        title: "edit the app",
        runtime: Runtime.SHELL,
        input: { command: "printf 'one\\n2\\n' > app.txt; echo new > added.txt", workspace: { repo } },
      })
    ).task!.id;
    await waitFor(async () => (await status(id)) === "succeeded", 20_000);
    await page.goto(`${tower.url}/ui/tasks/${id}`);
    const files = page.getByRole("table", { name: "Changed files" });
    await files.waitFor({ timeout: 10_000 });
    const rows = await files.locator("tbody tr").allInnerTexts();
    expect(rows.map((r) => r.replace(/\s+/g, " ").trim()).sort()).toEqual(["added.txt +1 −0", "app.txt +1 −1"]);
    const patch = await page.getByLabel("Patch").innerText();
    expect(patch).toContain("+2");
    expect(patch).toContain("-two");
    expect(await page.locator(".workspace-change").innerText()).toContain(`ep/${id}`);
    // the added line is colored as an addition
    expect(await page.locator(".diff-add", { hasText: "+new" }).count()).toBe(1);
  }, 60_000);

  it("creates a domain, a mission and a task from forms, " +
    "with the API's messages on the fields; the task runs", async () => {
    await page.goto(`${tower.url}/ui/missions`);
    await page.getByRole("button", { name: "New domain" }).click();
    const domainForm = page.getByRole("form", { name: "New domain" });
    await domainForm.getByRole("button", { name: "Create domain" }).click();
    // the API's own message, on the field it names
    const nameError = domainForm.locator('[data-field="name"] .field-error');
    await nameError.waitFor();
    expect(await nameError.innerText()).toMatch(/empty|required/);
    await domainForm.getByLabel("Name").fill("formed");
    await domainForm.getByRole("button", { name: "Create domain" }).click();
    await domainForm.waitFor({ state: "detached" });
    const domainId = (await work.listDomains({})).domains.find((d) => d.name === "formed")!.id;
    await epd.call("agent.enroll", { domainId, runtime: "shell", name: "form-runner" });

    await page.getByRole("button", { name: "New mission" }).click();
    const missionForm = page.getByRole("form", { name: "New mission" });
    await missionForm.getByLabel("Domain").selectOption({ label: "formed" });
    await missionForm.getByLabel("Title").fill("made in forms");
    await missionForm.getByRole("button", { name: "Create mission" }).click();
    await missionForm.waitFor({ state: "detached" });
    const card = page.locator("article.mission", {
      has: page.getByRole("heading", { name: "made in forms", exact: true }),
    });
    await card.waitFor();

    await card.getByRole("button", { name: "New task in made in forms" }).click();
    const taskForm = page.getByRole("form", { name: "New task" });
    await taskForm.getByLabel("Title").fill("form task");
    await taskForm.getByLabel("Runtime").selectOption({ label: "Shell" });
    await taskForm.getByRole("button", { name: "Submit task" }).click();
    const commandError = taskForm.locator('[data-field="input"] .field-error');
    await commandError.waitFor();
    expect(await commandError.innerText()).toContain("input.command");
    await taskForm.getByLabel("Command").fill("echo from the form");
    await taskForm.getByRole("button", { name: "Submit task" }).click();
    // it lands on the new task's page and runs there
    await page.waitForURL(/\/ui\/tasks\/tsk_/);
    await page.getByRole("heading", { name: "form task" }).waitFor();
    await page.locator(".task-output").waitFor({ timeout: 15_000 });
    expect(await page.locator(".task-output").innerText()).toContain("from the form");
    await expect.poll(() => page.locator(".task-head .badge").innerText(), { timeout: 10_000 }).toBe("succeeded");
    expect(await page.locator(".facts").innerText()).toContain("form-runner");
  }, 60_000);

  it("says so for a task that does not exist, with a way back", async () => {
    await page.goto(`${tower.url}/ui/tasks/tsk_doesnotexist`);
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").innerText()).toContain("tsk_doesnotexist");
    await page.getByRole("link", { name: "Back to missions" }).click();
    await page.getByRole("heading", { name: "Missions" }).waitFor();
  }, 30_000);

  it("raised no page errors", () => {
    expect(pageErrors).toEqual([]);
  });
});
