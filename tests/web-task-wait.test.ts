// The console's task page says why a task waits (issue 38, point 4), in Debian's chromium against
// a real tower process and a real epd registered under this machine's hostname (as `ep up` does):
// a task in a domain with no agent says so, and the page's enroll button makes it run.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { localHostname } from "../tower/domain/work/task-wait.js";
import { CHROMIUM, ensureConsoleBuilt, launchChromium } from "./browser.js";
import {
  adminClient,
  registerNode,
  spawnEpd,
  spawnTowerProcess,
  type EpdProcess,
  type TowerProcess,
} from "./epd-harness.js";
import { tempHome } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const chromiumTool = optionalTool(CHROMIUM, { pkg: "chromium", suite: "web-task-wait" });

const home = tempHome("ep-web-wait-");
let tower: TowerProcess;
let epd: EpdProcess;
let ctx: BrowserContext;
let page: Page;
let profile = "";
const pageErrors: string[] = [];

describe.skipIf(chromiumTool.skip)("the console's task page says why a task waits", () => {
  beforeAll(async () => {
    chromiumTool.require();
    const [, t] = await Promise.all([ensureConsoleBuilt(), spawnTowerProcess(home.dir)]);
    tower = t;
    const nodeFile = join(home.dir, "node.json");
    await registerNode(tower.url, tower.adminToken, nodeFile, localHostname());
    epd = await spawnEpd({ home: home.dir, nodeFile, backendUrl: tower.url });
    profile = mkdtempSync(join(tmpdir(), "ep-chromium-"));
    ctx = await launchChromium(profile);
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
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it("a task in a domain with no agent says so, and the enroll button makes it run", async () => {
    const work = adminClient(tower, WorkService);
    const domainId = (await work.createDomain({ name: "fresh" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "from the forms" })).mission!.id;
    const taskId = (
      await work.createTask({
        missionId,
        title: "hello",
        runtime: Runtime.SHELL,
        input: { command: "echo hello from the enrolled agent" },
      })
    ).task!.id;

    await page.goto(`${tower.url}/ui/tasks/${taskId}`);
    const why = page.locator(".task-wait");
    await why.getByRole("heading", { name: "No agent serves this domain" }).waitFor({ timeout: 10_000 });
    expect(await why.innerText()).toContain(`no agent serves domain ${domainId}`);
    await why.getByRole("button", { name: `Enroll a shell agent on ${localHostname()}` }).click();

    await page.locator(".task-output").waitFor({ timeout: 20_000 });
    expect(await page.locator(".task-output").innerText()).toContain("hello from the enrolled agent");
    expect(await page.locator(".task-head .badge").innerText()).toBe("succeeded");
    expect(await page.locator(".task-wait").count()).toBe(0);
    const agents = (await adminClient(tower, AgentService).listAgents({ domainId })).agents;
    expect(agents.map((a) => a.name)).toEqual(["shell"]);
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
