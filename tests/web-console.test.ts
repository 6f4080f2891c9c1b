// The web console in a real browser (Debian's chromium driven by playwright-core) against a
// real in-process tower serving the built console at /ui/.
import { AgentState, ClaimPolicy } from "../gen/ep/tower/v1/resources_pb.js";
import { create } from "@bufbuild/protobuf";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { CreateTaskRequestSchema, WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHROMIUM, ensureConsoleBuilt, launchChromium } from "./browser.js";
import { ROOT, startTower, waitFor, type TestTower } from "./harness.js";
import { optionalTool } from "./optional-tools.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const chromiumTool = optionalTool(CHROMIUM, { pkg: "chromium", suite: "web-console" });

describe("console bundle", () => {
  it("loads at most 200 KB of gzipped JavaScript up front", async () => {
    await ensureConsoleBuilt();
    const html = readFileSync(join(ROOT, "dist", "web", "index.html"), "utf8");
    // what index.html loads before the app runs: module scripts and their preloads
    const initial = [
      ...html.matchAll(
        /<(?:script[^>]*type="module"[^>]*src|link[^>]*rel="modulepreload"[^>]*href)="\/ui\/([^"]+\.js)"/g,
      ),
    ].map((m) => m[1]);
    expect(initial.length).toBeGreaterThan(0);
    const gzipped = initial.reduce(
      (sum, f) => sum + gzipSync(readFileSync(join(ROOT, "dist", "web", f)), { level: 9 }).length,
      0,
    );
    expect(gzipped).toBeLessThanOrEqual(200 * 1024);
  }, 60_000);
});

let t: TestTower;
let ctx: BrowserContext;
let page: Page;
let profile: string;
const dialogs: string[] = [];
const pageErrors: string[] = [];

async function loginTicket(): Promise<string> {
  const res = await t.client(AuthService).createTicket({ purpose: "login" });
  return res.ticket;
}

async function setup(name: string) {
  const d = await t.api("POST", "/domains", { name });
  expect(d.status).toBe(201);
  const m = await t.api("POST", `/domains/${d.body.domain.id}/m`, { title: `${name} mission` });
  expect(m.status).toBe(201);
  return {
    domainId: d.body.domain.id as string,
    missionId: m.body.mission.id as string,
    missionTitle: `${name} mission`,
  };
}

async function tab(name: "Console" | "Missions" | "Agents" | "Approvals" | "Webhooks") {
  await page
    .getByRole("navigation", { name: "Views" })
    .getByRole("link", { name: new RegExp(`^${name}`) })
    .click();
}

const missionCard = (title: string) =>
  page.locator("article.mission", { has: page.getByRole("heading", { name: title, exact: true }) });

describe.skipIf(chromiumTool.skip)("web console in chromium", () => {
  beforeAll(async () => {
    chromiumTool.require();
    await ensureConsoleBuilt();
    t = await startTower();
    profile = mkdtempSync(join(tmpdir(), "ep-chromium-"));
    ctx = await launchChromium(profile, { viewport: { width: 1280, height: 800 } });
    page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    page.on("pageerror", (err) => pageErrors.push(err.message));
  }, 60_000);

  afterAll(async () => {
    await ctx?.close();
    await t?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it("logs in with the one-time URL the tower prints, into an HttpOnly cookie", async () => {
    const ticket = await loginTicket();
    await page.goto(`${t.url}/ui/login#ticket=${ticket}`);
    await page.getByRole("navigation", { name: "Views" }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/ui/");
    expect(page.url()).not.toContain("ticket");
    const cookie = (await ctx.cookies(t.url)).find((c) => c.name === "ep_session");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });
    // scripts see no credential: not in document.cookie, nothing but the theme in localStorage
    expect(await page.evaluate(() => document.cookie)).not.toContain("ep_session");
    expect(await page.evaluate(() => Object.keys(localStorage).filter((k) => k !== "ep.theme"))).toEqual([]);
    // the ticket works once
    const again = await t.api("POST", "/auth/session", { ticket }, null);
    expect(again.status).toBeGreaterThanOrEqual(400);
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("composer-input");
  });

  it(
    "the chat says when it cannot read a task request and shows the phrasing " +
      "it understands, instead of proposing a task without its command (issue 38)",
    async () => {
      const domainId = (await t.client(WorkService).createDomain({ name: "chat-words" })).domain!.id;
      await t.client(WorkService).createMission({ domainId, title: "ui" });
      await tab("Console");
      const composer = page.getByLabel("Message the tower");
      await composer.fill("create a task in ui mission that runs echo hello from chat");
      await composer.press("Enter");
      const replies = page.locator(".msg-assistant");
      const reply = replies.filter({ hasText: "I could not read all of that" });
      await reply.waitFor({ timeout: 10_000 });
      const text = await reply.locator(".reply-text").innerText();
      expect(text).toContain("the command (echo hello from chat) is not in quotes");
      expect(text).toContain(
        'The phrasing I understand: submit task "Run tests" to mission Release with command "npm test"',
      );
      expect(text).toContain(
        'For yours: submit task "echo hello from chat" to mission ui with command "echo hello from chat"',
      );
      // nothing proposed: no tool call, no action card
      expect(await reply.locator(".tool-calls").count()).toBe(0);
      expect(await reply.locator("article").count()).toBe(0);
      // the phrasing it shows is one it reads whole: the task, with its command, is proposed
      await composer.fill('submit task "echo hello from chat" to mission ui with command "echo hello from chat"');
      await composer.press("Enter");
      const proposed = replies.filter({ hasText: 'Proposed: submit task "echo hello from chat" to mission ui' });
      await proposed.waitFor({ timeout: 10_000 });
      await proposed.getByText("proposed, needs approval").waitFor();
      expect(pageErrors).toEqual([]);
      // the tests after this one start in a session of their own
      await page.getByRole("button", { name: "New session" }).click();
      await expect.poll(() => page.locator(".msg-assistant").count(), { timeout: 10_000 }).toBe(0);
    },
  );

  it("shows a task created through the REST API live in the Missions tab", async () => {
    const { missionId, missionTitle } = await setup("live");
    await tab("Missions");
    await missionCard(missionTitle).waitFor();
    await page.evaluate(() => ((window as unknown as { __noReload: boolean }).__noReload = true));
    const created = await t.api("POST", `/work/missions/${missionId}/tasks`, {
      title: "compile the release",
      description: "",
      claim_policy: "first_claim",
      priority: 3,
    });
    expect(created.status).toBe(201);
    const row = missionCard(missionTitle).locator(`tr[data-task-id="${created.body.task.id}"]`);
    await row.waitFor({ timeout: 10_000 });
    expect(await row.innerText()).toContain("compile the release");
    expect(await row.innerText()).toContain("queued");
    // the Kind column says the kind, not the claim policy (that is in its tooltip)
    expect(await row.innerText()).toContain("claimable");
    expect(await row.innerText()).not.toContain("first_claim");
    expect(await page.evaluate(() => (window as unknown as { __noReload?: boolean }).__noReload)).toBe(true);
  });

  it("names the agent of a task in the Missions table (the id in its tooltip)", async () => {
    const { domainId, missionId, missionTitle } = await setup("names");
    const reg = await t.client(NodeService).registerNode({ hostname: "names-node" });
    const agent = (
      await t
        .client(AgentService)
        .enrollAgent({ domainId, runtime: Runtime.SHELL, name: "release-bot", nodeId: reg.node!.id })
    ).agent!;
    const created = await t.api("POST", `/work/missions/${missionId}/tasks`, {
      title: "tag it",
      claim_policy: "assigned",
      assignee_agent_id: agent.id,
      runtime: "shell",
      input: { command: "true" },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await page.reload();
    await tab("Missions");
    const row = missionCard(missionTitle).locator(`tr[data-task-id="${created.body.task.id}"]`);
    await row.waitFor({ timeout: 10_000 });
    await row.getByText("release-bot").waitFor({ timeout: 10_000 });
    expect(await row.innerText()).not.toContain(agent.id);
    expect(await row.getByText("release-bot").getAttribute("title")).toBe(agent.id);

    // the node runs it and reports usage: the row shows the cost, the mission the sum
    const claimed = await t.client(WorkService, reg.token).claimTask({ agentId: agent.id });
    expect(claimed.task?.id).toBe(created.body.task.id);
    await t.client(WorkService, reg.token).completeTask({
      taskId: claimed.task!.id,
      agentId: agent.id,
      result: {
        output: "tagged",
        usage: { inputTokens: 1200n, outputTokens: 340n, costUsd: 0.0123, model: "fake-model" },
      },
    });
    await row.getByText("$0.0123").waitFor({ timeout: 10_000 });
    expect(await missionCard(missionTitle).locator(".mission-usage").innerText()).toContain(
      "1,200 tokens in, 340 out · $0.0123",
    );
  });

  it("renders a task titled with HTML as text", async () => {
    const { missionId, missionTitle } = await setup("xss");
    await tab("Missions");
    const hostile = "<img src=x onerror=alert(1)>";
    const created = await t.api("POST", `/work/missions/${missionId}/tasks`, {
      title: hostile,
      description: "",
      claim_policy: "first_claim",
      priority: 0,
    });
    expect(created.status).toBe(201);
    const card = missionCard(missionTitle);
    await card.getByText(hostile, { exact: true }).waitFor({ timeout: 10_000 });
    expect(await card.locator("img").count()).toBe(0);
    await page.waitForTimeout(300);
    expect(dialogs).toEqual([]);
  });

  it("keeps the theme toggle's choice across a reload", async () => {
    await tab("Missions");
    const html = page.locator("html");
    expect(await html.getAttribute("data-theme")).toBe("dark");
    await page.getByRole("button", { name: "Switch to light theme" }).click();
    expect(await html.getAttribute("data-theme")).toBe("light");
    await page.reload();
    await page.getByRole("navigation", { name: "Views" }).waitFor();
    expect(await html.getAttribute("data-theme")).toBe("light");
    expect(await page.evaluate(() => ({ ...localStorage }))).toEqual({ "ep.theme": "light" });
    // the toggle sits in the header's top-right corner
    const box = (await page.getByRole("button", { name: "Switch to dark theme" }).boundingBox())!;
    expect(box.y).toBeLessThan(60);
    expect(box.x + box.width).toBeGreaterThan(1280 - 80);
    await page.getByRole("button", { name: "Switch to dark theme" }).click();
    expect(await html.getAttribute("data-theme")).toBe("dark");
  });

  it("shows a not-found page for an unknown console route, with a way back", async () => {
    await page.goto(`${t.url}/ui/nonexistent`);
    await page.getByRole("heading", { name: "Page not found" }).waitFor({ timeout: 10_000 });
    expect(await page.locator("main").textContent()).toContain("/ui/nonexistent");
    await page.getByRole("link", { name: "Back to the console" }).click();
    await page.getByRole("heading", { name: "Page not found" }).waitFor({ state: "detached" });
    expect(new URL(page.url()).pathname).toBe("/ui/");
  });

  it("shows the reconnect banner while the event stream is down and hides it after recovery", async () => {
    const { missionId, missionTitle } = await setup("outage");
    await tab("Missions");
    await missionCard(missionTitle).waitFor();
    const banner = page.locator("#stream-banner");
    expect(await banner.count()).toBe(0);
    const server = t.tower.app.server;
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    let taskId: string;
    try {
      await banner.waitFor({ state: "visible", timeout: 10_000 });
      expect(await banner.innerText()).toContain("reconnecting");
      // a task created while the console is cut off shows up once the stream is back
      const created = await t.tower.services.work.createTask(
        { subject: "test", role: "admin", via: "internal" },
        create(CreateTaskRequestSchema, {
          missionId,
          title: "made during the outage",
          claimPolicy: ClaimPolicy.FIRST_CLAIM,
        }),
      );
      taskId = created.task!.id;
    } finally {
      if (!server.listening) await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()));
    }
    await banner.waitFor({ state: "detached", timeout: 20_000 });
    await missionCard(missionTitle).locator(`tr[data-task-id="${taskId}"]`).waitFor({ timeout: 10_000 });
  });

  it(
    "lists agents by name with node, runtime, state from the node link " +
      "and the task each runs; supervise actions only for supervised agents",
    async () => {
      const { domainId, missionId } = await setup("fleet");
      const reg = await t.client(NodeService).registerNode({ hostname: "worker-7" });
      const agent = (
        await t.client(AgentService).enrollAgent({
          domainId,
          runtime: Runtime.SHELL,
          name: "nightly-builder",
          nodeId: reg.node!.id,
          supervised: true,
        })
      ).agent!;
      const adhoc = (
        await t
          .client(AgentService)
          .enrollAgent({ domainId, runtime: Runtime.VENDORB, name: "adhoc-coder", nodeId: reg.node!.id })
      ).agent!;
      await tab("Agents");
      const row = page.locator(`tr[data-agent-id="${agent.id}"]`);
      const adhocRow = page.locator(`tr[data-agent-id="${adhoc.id}"]`);
      await row.waitFor({ timeout: 10_000 });
      const text = await row.innerText();
      for (const part of ["nightly-builder", "worker-7", "Shell", "offline", "supervised", "just now"])
        expect(text).toContain(part);
      // the id once, in the name's tooltip and behind a copy button, not as text
      expect(text).not.toContain(agent.id);
      expect(await row.getByText("nightly-builder").getAttribute("title")).toBe(agent.id);
      expect(await adhocRow.innerText()).toContain("Codex");
      // the node is not linked: nothing can reach the agent, so its actions are disabled
      expect(await row.getByRole("button", { name: "Pause" }).isDisabled()).toBe(true);
      // an agent its node does not supervise offers no supervise actions at all
      expect(await adhocRow.getByRole("button", { name: /Restart|Pause|Resume/ }).count()).toBe(0);

      const ac = new AbortController();
      const received: { kind: string; agentId: string; op?: unknown }[] = [];
      const link = (async () => {
        try {
          for await (const msg of t
            .client(NodeService, reg.token)
            .link({ attachSecret: "s", version: "test" }, { signal: ac.signal })) {
            const c = msg.command;
            received.push({
              kind: c.case ?? "",
              agentId:
                c.case === "supervise" || c.case === "signal" || c.case === "assign" || c.case === "attach"
                  ? c.value.agentId
                  : "",
              op: c.case === "supervise" ? c.value.op : undefined,
            });
          }
        } catch {
          // aborted at the end of the test
        }
      })();
      try {
        await waitFor(() => t.tower.services.fleet.isLinked(reg.node!.id));
        // linked: the state is what the node reports, live
        await row.getByText("connected").waitFor({ timeout: 10_000 });
        await t
          .client(AgentService, reg.token)
          .updateAgentState({ agentId: agent.id, state: AgentState.BUSY, reason: "test" });
        await row.locator(".badge", { hasText: "busy" }).waitFor({ timeout: 10_000 });
        // the task it runs, linked to the task page
        const created = await t.api("POST", `/work/missions/${missionId}/tasks`, {
          title: "nightly build",
          claim_policy: "assigned",
          assignee_agent_id: agent.id,
          runtime: "shell",
          input: { command: "make" },
        });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        expect((await t.client(WorkService, reg.token).claimTask({ agentId: agent.id })).task?.id).toBe(
          created.body.task.id,
        );
        await row.getByRole("link", { name: "nightly build" }).waitFor({ timeout: 10_000 });
        expect(await row.getByRole("link", { name: "nightly build" }).getAttribute("href")).toBe(
          `/ui/tasks/${created.body.task.id}`,
        );
        await row.getByRole("button", { name: "Restart" }).click();
        await row.getByText("restart sent").waitFor({ timeout: 10_000 });
        await waitFor(() =>
          received.some((m) => m.kind === "supervise" && m.agentId === agent.id && m.op === "restart"),
        );
        // the tower refuses supervising an unsupervised agent, naming why
        const refused = await t
          .client(AgentService)
          .superviseAgent({ agentId: adhoc.id, op: "restart" })
          .catch((e: Error) => e);
        expect(String(refused)).toContain("not supervised by its node");
      } finally {
        ac.abort();
        await link;
      }
    },
  );

  it("logs out, and logs in again with a token", async () => {
    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByLabel("API token").waitFor();
    expect(await page.evaluate(async () => (await fetch("/auth/session")).status)).toBe(401);
    await page.getByLabel("API token").fill("ept_not-a-token");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").waitFor();
    await page.getByLabel("API token").fill(t.adminToken);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("navigation", { name: "Views" }).waitFor();
    expect(await page.evaluate(() => Object.keys(localStorage).filter((k) => k !== "ep.theme"))).toEqual([]);
  });

  describe("AI console", () => {
    async function ask(text: string) {
      await tab("Console");
      const box = page.getByLabel("Message the tower");
      await box.fill(text);
      await box.press("Enter");
    }

    it("answers 'list missions' with a table", async () => {
      const { missionTitle } = await setup("ai-list");
      await ask("list missions");
      const table = page.locator(".msg-assistant .vs-table table").last();
      await table.waitFor({ timeout: 15_000 });
      expect(await table.innerText()).toContain(missionTitle);
      // the domain column names the domain (its id in the tooltip); the id column keeps the mission id
      const domainCell = table.locator("tr", { hasText: missionTitle }).locator("td span[title^='dom_']");
      expect(await domainCell.innerText()).toBe("ai-list");
    });

    it("proposes a mission, approves it inline, and the Missions tab shows it without reload", async () => {
      await setup("launchpad");
      await ask('create mission "Launch plan" in domain launchpad');
      const approve = page
        .locator(".msg-assistant")
        .last()
        .getByRole("button", { name: /approve/i })
        .first();
      await approve.waitFor({ timeout: 15_000 });
      await page.evaluate(() => ((window as unknown as { __noReload: boolean }).__noReload = true));
      // by keyboard: focus the button, press Enter
      await approve.focus();
      await page.keyboard.press("Enter");
      await page.locator(".msg-assistant").last().getByText("approved").first().waitFor({ timeout: 15_000 });
      // the outcome, with a link to what was made
      const outcome = page.locator(".msg-assistant").last().locator(".action-outcome");
      await outcome.waitFor({ timeout: 10_000 });
      expect(await outcome.innerText()).toBe("Created mission Launch plan");
      await outcome.getByRole("link", { name: "Launch plan" }).click();
      expect(new URL(page.url()).pathname).toBe("/ui/missions");
      await missionCard("Launch plan").waitFor({ timeout: 10_000 });
      expect(await page.evaluate(() => (window as unknown as { __noReload?: boolean }).__noReload)).toBe(true);
    });

    it(
      "an approved task shows its outcome, linked to the task " +
        "page; no tool names or action ids; unquoted mission names",
      async () => {
        await setup("outcome");
        await ask('submit task "ui hello" to mission outcome mission with command "echo hi"');
        const reply = page.locator(".msg-assistant").last();
        await reply
          .getByRole("button", { name: /approve/i })
          .first()
          .click({ timeout: 15_000 });
        const outcome = reply.locator(".action-outcome");
        await outcome.waitFor({ timeout: 15_000 });
        expect(await outcome.innerText()).toBe("Submitted task ui hello");
        const shown = await reply.innerText();
        expect(shown, shown).not.toContain("submit_mesh_task");
        expect(shown).not.toMatch(/act_[0-9a-z]{6}/);
        expect(shown).toContain("Submit task");
        await outcome.getByRole("link", { name: "ui hello" }).click();
        await page.getByRole("heading", { name: "ui hello" }).waitFor({ timeout: 10_000 });
        expect(new URL(page.url()).pathname).toMatch(/^\/ui\/tasks\/tsk_/);
        // the session is named after its first question, not "New session"
        await tab("Console");
        const titles = await page
          .getByRole("navigation", { name: "Session history" })
          .locator(".session-title")
          .allInnerTexts();
        expect(titles).toContain("list missions");
        expect(titles).not.toContain("New session");
      },
    );

    it("rejects a proposal, and nothing is created", async () => {
      const { domainId } = await setup("sandbox");
      await ask('create mission "Never made" in domain sandbox');
      const reject = page
        .locator(".msg-assistant")
        .last()
        .getByRole("button", { name: /reject/i })
        .first();
      await reject.waitFor({ timeout: 15_000 });
      await reject.click();
      await page.locator(".msg-assistant").last().getByText("rejected").first().waitFor({ timeout: 15_000 });
      const missions = await t.api("GET", `/domains/${domainId}/m`);
      expect(missions.body.missions.map((m: { title: string }) => m.title)).not.toContain("Never made");
      await tab("Missions");
      await page.waitForTimeout(300);
      expect(await missionCard("Never made").count()).toBe(0);
    });

    it("lists pending actions with counts in the Approvals tab and decides them there", async () => {
      await setup("ai-queue");
      await ask('create mission "Queued one" in domain ai-queue');
      await page
        .locator(".msg-assistant")
        .last()
        .getByRole("button", { name: /approve/i })
        .first()
        .waitFor({ timeout: 15_000 });
      await tab("Approvals");
      const card = page.locator(".action-card", { hasText: "Queued one" });
      await card.waitFor({ timeout: 10_000 });
      expect(await page.getByRole("list", { name: "Action counts" }).innerText()).toMatch(/[1-9]\d* pending/);
      await card.getByRole("button", { name: "Approve" }).click();
      await card.waitFor({ state: "detached", timeout: 10_000 });
      await tab("Missions");
      await missionCard("Queued one").waitFor({ timeout: 10_000 });
    });
  });

  it("fits a 375 px wide screen without sideways scrolling", async () => {
    await page.setViewportSize({ width: 375, height: 740 });
    try {
      for (const name of ["Console", "Missions", "Agents", "Approvals", "Webhooks"] as const) {
        await tab(name);
        await page.waitForTimeout(150);
        expect(await page.evaluate(() => document.documentElement.scrollWidth), name).toBeLessThanOrEqual(375);
      }
      await tab("Console");
      // long ids and summaries in the transcript wrap instead of pushing it sideways
      await page.locator(".msg-assistant").first().waitFor();
      expect(await page.locator(".transcript").evaluate((el) => el.scrollWidth - el.clientWidth)).toBeLessThanOrEqual(
        0,
      );
      const box = (await page.getByLabel("Message the tower").boundingBox())!;
      expect(box.y + box.height).toBeLessThanOrEqual(740);
      expect(box.width).toBeGreaterThan(200);
      expect(await page.getByRole("button", { name: /Switch to (light|dark) theme/ }).isVisible()).toBe(true);
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it("raised no page errors", () => {
    expect(pageErrors).toEqual([]);
  });
});
