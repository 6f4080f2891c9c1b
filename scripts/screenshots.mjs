#!/usr/bin/env node
// Takes screenshots of the web console (dark and light, desktop and 375 px) against a real
// in-process tower seeded with sample work, into docs/screenshots/. Needs chromium
// (EP_CHROMIUM, default /usr/bin/chromium). Usage: node scripts/screenshots.mjs
import { build as esbuild } from "esbuild";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outDir = join(root, "docs", "screenshots");
const seeded = { reviewTask: "" };

// the console, fresh
const { build: viteBuild } = await import("vite");
await viteBuild({ configFile: join(root, "web", "vite.config.ts"), logLevel: "warn" });

// the test harness and the shared chromium launch (TypeScript) bundled into dist/ so they find
// node_modules and the migrations
const harnessFile = join(root, "dist", "screenshots-harness.mjs");
const browserFile = join(root, "dist", "screenshots-browser.mjs");
await esbuild({
  entryPoints: {
    "screenshots-harness": join(root, "tests", "harness.ts"),
    "screenshots-browser": join(root, "tests", "browser.ts"),
  },
  outdir: join(root, "dist"),
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  logLevel: "warning",
  banner: { js: "import { createRequire as __req } from 'node:module'; const require = __req(import.meta.url);" },
});
const { startTower } = await import(pathToFileURL(harnessFile).href);
const { CHROMIUM, launchChromium } = await import(pathToFileURL(browserFile).href);
if (!existsSync(CHROMIUM)) {
  console.error(`chromium not found at ${CHROMIUM}: apt-get install chromium, or set EP_CHROMIUM`);
  process.exit(1);
}

const t = await startTower();
const profile = mkdtempSync(join(tmpdir(), "ep-shots-"));
let ctx;
try {
  await seed(t);
  mkdirSync(outDir, { recursive: true });
  ctx = await launchChromium(profile, { viewport: { width: 1280, height: 800 } });
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  // the token form, as the admin whose token seeded the AI session (sessions belong to their caller)
  await page.goto(`${t.url}/ui/login`);
  await page.getByLabel("API token").fill(t.adminToken);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("navigation", { name: "Views" }).waitFor();

  const shots = [];
  const shoot = async (name, path, width, theme) => {
    await page.setViewportSize({ width, height: width < 500 ? 760 : 800 });
    await page.evaluate((th) => localStorage.setItem("ep.theme", th), theme);
    await page.goto(`${t.url}${path}`);
    await page.getByRole("navigation", { name: "Views" }).waitFor();
    await page.waitForLoadState("networkidle").catch(() => undefined);
    await page.waitForTimeout(400);
    const file = join(outDir, `${name}-${theme}${width < 500 ? "-375" : ""}.png`);
    await page.screenshot({ path: file });
    shots.push(file);
  };
  for (const theme of ["dark", "light"]) {
    await shoot("console", "/ui/", 1280, theme);
    await shoot("missions", "/ui/missions", 1280, theme);
    await shoot("agents", "/ui/agents", 1280, theme);
    await shoot("approvals", "/ui/approvals", 1280, theme);
    await shoot("console", "/ui/", 375, theme);
    await shoot("missions", "/ui/missions", 375, theme);
    if (seeded.reviewTask) {
      await shoot("task", `/ui/tasks/${seeded.reviewTask}`, 1280, theme);
      await shoot("task", `/ui/tasks/${seeded.reviewTask}`, 375, theme);
    }
  }
  if (!seeded.reviewTask)
    throw new Error("the sample agent task was not claimed by the reviewer: no task page screenshot");
  // the login page (logged out)
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.evaluate(() => localStorage.setItem("ep.theme", "dark"));
  await page.goto(`${t.url}/ui/missions`);
  await page.getByRole("button", { name: "Log out" }).click();
  await page.getByLabel("API token").waitFor();
  await page.screenshot({ path: join(outDir, "login-dark.png") });
  shots.push(join(outDir, "login-dark.png"));
  console.log(shots.map((f) => f.slice(root.length + 1)).join("\n"));
} finally {
  await ctx?.close();
  await t.close();
  rmSync(profile, { recursive: true, force: true });
  rmSync(harnessFile, { force: true });
}

/** Sample work: a domain, missions with tasks in several states, a node with agents, an AI session. */
async function seed(t) {
  const call = async (method, path, body, token) => {
    const res = await t.api(method, path, body, token);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const rpc = (service, method, body, token) => call("POST", `/ep.tower.v1.${service}/${method}`, body, token);
  const { domain } = await call("POST", "/domains", { name: "acme" });
  const { mission: release } = await call("POST", `/domains/${domain.id}/m`, { title: "Release 2.0" });
  const { mission: docs } = await call("POST", `/domains/${domain.id}/m`, { title: "Docs refresh" });
  const { node } = await rpc("NodeService", "RegisterNode", { hostname: "build-01" });
  const { node: node2, token: node2Token } = await rpc("NodeService", "RegisterNode", { hostname: "gpu-02" });
  const { agent: builder } = await rpc("AgentService", "EnrollAgent", {
    domainId: domain.id,
    runtime: "shell",
    name: "builder",
    nodeId: node.id,
  });
  const { agent: reviewer } = await rpc("AgentService", "EnrollAgent", {
    domainId: domain.id,
    runtime: "vendorA_code",
    name: "reviewer",
    nodeId: node2.id,
  });
  await rpc("AgentService", "EnrollAgent", {
    domainId: domain.id,
    runtime: "muxhost_hosted",
    name: "pairing",
    nodeId: node2.id,
  });
  const task = (missionId, title, extra = {}) =>
    call("POST", `/work/missions/${missionId}/tasks`, {
      title,
      description: "",
      claim_policy: "first_claim",
      priority: 0,
      ...extra,
    });
  const t1 = (await task(release.id, "Build release artifacts", { priority: 5 })).task;
  const t2 = (await task(release.id, "Run integration tests", { priority: 3 })).task;
  const t3 = (await task(release.id, "Publish changelog", { priority: 1 })).task;
  await task(release.id, "Tag the release");
  const claim = async (agentId) => (await rpc("WorkService", "ClaimTask", { agentId })).task;
  const a = await claim(builder.id);
  await rpc("WorkService", "StartTask", { taskId: a.id, agentId: builder.id });
  await rpc("WorkService", "CompleteTask", {
    taskId: a.id,
    agentId: builder.id,
    result: { output: "ok", exitCode: 0 },
  });
  const b = await claim(builder.id);
  await rpc("WorkService", "StartTask", { taskId: b.id, agentId: builder.id });
  await rpc("WorkService", "FailTask", {
    taskId: b.id,
    agentId: builder.id,
    result: { error: "2 tests failed", exitCode: 1 },
  });
  const c = await claim(builder.id);
  await rpc("WorkService", "StartTask", { taskId: c.id, agentId: builder.id });
  void [t1, t2, t3];
  await rpc("WorkService", "ReportProgress", {
    taskId: c.id,
    agentId: builder.id,
    frames: [
      { kind: "text", text: "$ ./scripts/changelog.sh --since v1.9.0" },
      { kind: "text", text: "collecting 42 merged pull requests" },
      { kind: "text", text: "writing CHANGELOG.md" },
    ],
  });
  // an agent's task, finished: transcript with tool calls, output, usage and cost
  const review = (
    await task(release.id, "Review the release notes", {
      priority: 10,
      runtime: "vendorA_code",
      input: { prompt: "Review CHANGELOG.md for v2.0 and list what is missing." },
    })
  ).task;
  const r = await claim(reviewer.id);
  if (r?.id === review.id) {
    await rpc("WorkService", "StartTask", { taskId: r.id, agentId: reviewer.id });
    await rpc("WorkService", "ReportProgress", {
      taskId: r.id,
      agentId: reviewer.id,
      frames: [
        { kind: "status", text: "session started (claude-sonnet-4)" },
        { kind: "text", text: "I'll read the changelog and compare it with the merged pull requests." },
        { kind: "tool", text: "Read CHANGELOG.md", data: { phase: "call", tool: "Read" } },
        { kind: "tool", text: "tool result: 212 lines", data: { phase: "result" } },
        { kind: "tool", text: "Bash git log --oneline v1.9.0..HEAD | wc -l", data: { phase: "call", tool: "Bash" } },
        { kind: "tool", text: "tool result: 42", data: { phase: "result" } },
        {
          kind: "text",
          text:
            "Two entries lack their pull request links, and the " +
            "breaking change to the claim API is not called out.",
        },
      ],
    });
    await rpc("WorkService", "CompleteTask", {
      taskId: r.id,
      agentId: reviewer.id,
      result: {
        output:
          "Missing from CHANGELOG.md for v2.0:\n- links for #481 and #502\n- a " +
          "'Breaking changes' section for the claim API (first_claim is now the default)",
        exitCode: 0,
        usage: {
          inputTokens: 18240,
          outputTokens: 1312,
          cachedInputTokens: 12000,
          costUsd: 0.0731,
          model: "claude-sonnet-4",
        },
      },
    });
    seeded.reviewTask = r.id;
  }
  await call("POST", `/domains/${domain.id}/m/${docs.id}/t`, {
    title: "Write the console guide",
    status: "in_progress",
  });
  await call("POST", `/domains/${domain.id}/m/${docs.id}/t`, { title: "Screenshots for the README" });
  await rpc(
    "AgentService",
    "UpdateAgentState",
    { agentId: reviewer.id, state: "busy", reason: "reviewing" },
    node2Token,
  );
  // the AI console, when this tower has it
  const s = await t.api("POST", "/ep.tower.v1.AiService/CreateSession", { title: "Release checks" });
  if (s.status === 200) {
    const sessionId = s.body.session.id;
    await rpc("AiService", "SubmitTurn", { sessionId, content: "list missions" });
    await rpc("AiService", "SubmitTurn", { sessionId, content: "show tasks of mission Release 2.0" });
    await rpc("AiService", "SubmitTurn", { sessionId, content: 'create mission "Hotfix 2.0.1" in domain acme' });
  } else {
    console.warn(`no AI service on this tower (${s.status}): the console screenshots show an empty transcript`);
  }
}
