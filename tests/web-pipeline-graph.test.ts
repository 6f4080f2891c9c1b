// Issue 40 in Debian's chromium: the console's Missions page draws a pipeline's steps as a graph
// (dagre's layout), each step with its state, and the states change live as the steps run —
// against a real tower process and a real epd running the shell steps. The steps wait on gate
// files the test creates, so "running" and "waiting" are states the test controls.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { CHROMIUM, ensureConsoleBuilt, launchChromium } from "./browser.js";
import { adminClient, startTowerAndEpd, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const chromiumTool = optionalTool(CHROMIUM, { pkg: "chromium", suite: "web-pipeline-graph" });

const home = tempHome("ep-pipeline-graph-");
const gates = mkdtempSync(join(tmpdir(), "ep-gates-"));
let tower: TowerProcess;
let epd: EpdProcess;
let ctx: BrowserContext;
let page: Page;
let profile: string;
const pageErrors: string[] = [];

const gated = (gate: string, code = 0) =>
  `while [ ! -e ${join(gates, gate)} ]; do sleep 0.05; done; echo ${gate}; exit ${code}`;

describe.skipIf(chromiumTool.skip)("the console's pipeline graph", () => {
  beforeAll(async () => {
    chromiumTool.require();
    const [, started] = await Promise.all([ensureConsoleBuilt(), startTowerAndEpd(home.dir)]);
    ({ tower, epd } = started);
    profile = mkdtempSync(join(tmpdir(), "ep-chromium-"));
    ctx = await launchChromium(profile, { viewport: { width: 1280, height: 900 } });
    page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on("pageerror", (err) => pageErrors.push(err.message));
    const ticket = (await adminClient(tower, AuthService).createTicket({ purpose: "login" })).ticket;
    await page.goto(`${tower.url}/ui/login#ticket=${ticket}`);
    await page.getByRole("navigation", { name: "Views" }).waitFor();
  }, 90_000);

  afterAll(async () => {
    // a gated step left running (a failed expectation) ends before epd stops
    for (const g of ["build", "test"]) writeFileSync(join(gates, g), "");
    await ctx?.close();
    await epd?.stop();
    await tower?.stop();
    home.cleanup();
    rmSync(gates, { recursive: true, force: true });
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it("draws the steps and their arrows, and each step's state changes live", async () => {
    const work = adminClient(tower, WorkService);
    const domainId = (await work.createDomain({ name: "graph" })).domain!.id;
    // two agents: lint runs beside the gated test
    for (const name of ["one", "two"]) await epd.call("agent.enroll", { domainId, runtime: "shell", name });
    const source = [
      'name = "release train"',
      "[[step]]",
      'name = "build"',
      `command = "${gated("build")}"`,
      "[[step]]",
      'name = "test"',
      'depends_on = ["build"]',
      `command = "${gated("test")}"`,
      "[[step]]",
      'name = "lint"',
      'depends_on = ["build"]',
      'command = "echo lint"',
      "[[step]]",
      'name = "ship"',
      'depends_on = ["test", "lint"]',
      'command = "echo ship"',
    ].join("\n");
    const { steps } = await work.runPipeline({ domainId, source });
    const id = Object.fromEntries(steps.map((s) => [s.step, s.id]));

    await page
      .getByRole("navigation", { name: "Views" })
      .getByRole("link", { name: /^Missions/ })
      .click();
    await page.evaluate(() => ((window as unknown as { __noReload: boolean }).__noReload = true));
    const graph = page.getByRole("figure", { name: "Steps of release train" });
    await graph.waitFor({ timeout: 15_000 });
    const node = (step: string) => graph.locator(`.pipeline-node[data-task-id="${id[step]}"]`);
    const state = (step: string) => node(step).getAttribute("data-status");
    const until = async (step: string, want: string) => {
      await page.waitForFunction(
        ([sel, w]) => document.querySelector(sel!)?.getAttribute("data-status") === w,
        [`.pipeline-node[data-task-id="${id[step]}"]`, want] as const,
        { timeout: 20_000 },
      );
    };
    expect(await graph.locator(".pipeline-node").count()).toBe(4);
    expect(await graph.locator(".pipeline-edge").count()).toBe(4);
    expect(await graph.locator(`.pipeline-edge[data-from="${id.build}"][data-to="${id.test}"]`).count()).toBe(1);
    expect(await graph.locator(`.pipeline-edge[data-from="${id.lint}"][data-to="${id.ship}"]`).count()).toBe(1);
    // laid out left to right: a step is right of the steps it waits for
    const xOf = async (step: string) => (await node(step).boundingBox())!.x;
    expect(await xOf("build")).toBeLessThan(await xOf("test"));
    expect(await xOf("test")).toBeLessThan(await xOf("ship"));
    await until("build", "running");
    expect(await node("ship").getAttribute("aria-label")).toBe("ship: waiting, waiting on test, lint");
    expect(await state("test")).toBe("waiting");

    writeFileSync(join(gates, "build"), "");
    await until("build", "succeeded");
    await until("lint", "succeeded");
    await until("test", "running");
    expect(await node("ship").getAttribute("aria-label")).toBe("ship: waiting, waiting on test");
    writeFileSync(join(gates, "test"), "");
    await until("ship", "succeeded");
    expect(await node("ship").locator(".pipeline-status").textContent()).toBe("succeeded");
    // all of it live: the page never reloaded
    expect(await page.evaluate(() => (window as unknown as { __noReload?: boolean }).__noReload)).toBe(true);
    // a step opens its task page
    await node("ship").click();
    expect(new URL(page.url()).pathname).toBe(`/ui/tasks/${id.ship}`);
    expect(pageErrors).toEqual([]);
  }, 90_000);
});
