// The console's terminal in a real browser (Debian's chromium, playwright-core): the Agents tab
// opens an xterm.js terminal on a tmux-hosted shell through the in-process tower and a real epd,
// a command typed on the page runs in the pane and its output shows in the terminal.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFile } from "node:child_process";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { registerNode, spawnEpd, type EpdProcess } from "./epd-harness.js";
import { CHROMIUM, ensureConsoleBuilt, launchChromium } from "./browser.js";
import { startTower, tempHome, waitFor, type TestTower } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const chromiumTool = optionalTool(CHROMIUM, { pkg: "chromium", suite: "attach-console" });
const tmuxTool = optionalTool("tmux", { pkg: "tmux", suite: "attach-console" });
const SOCKET = `ep-attach-web-${process.pid}`;

let t: TestTower;
let home: { dir: string; cleanup(): void };
let epd: EpdProcess;
let ctx: BrowserContext;
let page: Page;
let profile: string;
let agentId: string;

describe.skipIf(chromiumTool.skip || tmuxTool.skip)("console terminal", () => {
  beforeAll(async () => {
    chromiumTool.require();
    tmuxTool.require();
    await ensureConsoleBuilt();
    home = tempHome("ep-attw-");
    t = await startTower({ home: home.dir });
    const nodeFile = join(home.dir, "node.json");
    await registerNode(t.url, t.adminToken, nodeFile);
    const domainId = (await t.client(WorkService).createDomain({ name: "web" })).domain!.id;
    mkdirSync(join(home.dir, "epd"), { recursive: true, mode: 0o700 });
    writeFileSync(
      join(home.dir, "epd", "agents.toml"),
      `[[agent]]
id = "web-shell"
runtime = "muxhost_hosted"
domain = "${domainId}"
command = ["bash", "--norc", "--noprofile"]
env = { PS1 = "web$ " }
`,
    );
    epd = await spawnEpd({
      home: home.dir,
      nodeFile,
      backendUrl: t.url,
      env: { EP_TMUX_SOCKET: SOCKET, EP_SUPERVISE_BACKEND: "process", EP_LOG_LEVEL: "warn" },
    });
    await waitFor(async () => (await t.client(AgentService).listAgents({ domainId })).agents.length === 1, 15_000);
    agentId = (await t.client(AgentService).listAgents({ domainId })).agents[0].id;
    profile = mkdtempSync(join(tmpdir(), "ep-chromium-"));
    ctx = await launchChromium(profile, { viewport: { width: 1280, height: 900 } });
    page = ctx.pages()[0] ?? (await ctx.newPage());
  }, 120_000);

  afterAll(async () => {
    await ctx?.close();
    await epd?.stop();
    await new Promise((r) => execFile("tmux", ["-L", SOCKET, "kill-server"], r));
    await t?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    home?.cleanup();
  });

  it("opens a terminal from the Agents tab, types a command and shows its output", async () => {
    const ticket = (await t.client(AuthService).createTicket({ purpose: "login" })).ticket;
    await page.goto(`${t.url}/ui/login#ticket=${ticket}`);
    await page.getByRole("navigation", { name: "Views" }).waitFor();
    await page.goto(`${t.url}/ui/agents`);
    const row = page.locator(`tr[data-agent-id="${agentId}"]`);
    await row.getByRole("button", { name: "Terminal" }).click();
    const screen = page.locator(`[data-agent-terminal="${agentId}"]`);
    await page
      .locator("[data-terminal-status]")
      .filter({ hasText: /^connected$/ })
      .waitFor({ timeout: 15_000 });
    await screen.locator(".xterm-rows").filter({ hasText: "web$" }).waitFor({ timeout: 15_000 });
    await screen.click();
    await page.keyboard.type("echo console-$((6*7))");
    await page.keyboard.press("Enter");
    await screen.locator(".xterm-rows").filter({ hasText: "console-42" }).waitFor({ timeout: 15_000 });
    expect(await screen.locator(".xterm-rows").innerText()).toContain("console-42");
    // and it really ran in the pane
    const pane = await new Promise<string>((r) =>
      execFile("tmux", ["-L", SOCKET, "capture-pane", "-p", "-t", "=web-shell:"], (_e, out) => r(out)),
    );
    expect(pane).toContain("console-42");
  }, 60_000);
});
