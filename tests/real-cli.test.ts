// Issue 15: the real agent CLIs from npm (pinned in tests/real-cli/package.json, installed by
// .ci/run into tests/real-cli/node_modules) run through a real tower and epd against a fake LLM
// API (@copilotkit/aimock serving tests/real-cli/fixtures). The operator's only settings are the
// vendor's own: API key and base URL in runtimes.toml `env`, plus the CLI's own config file where
// the CLI needs one (codex's provider, gemini's auth type). Everything else is EP's defaults.
import { runtimeOf, statusWord } from "../test-support/words.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { ApprovalService, ApprovalStatus } from "../gen/ep/tower/v1/approvals_pb.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import { buildBinaries, registerNode, ROOT, spawnEpd, spawnTowerProcess, stopChild, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { openSse } from "./events-helpers.js";
import { freePort, tempHome, waitFor } from "./harness.js";

const CLI_DIR = join(ROOT, "tests", "real-cli");
const BIN = join(CLI_DIR, "node_modules", ".bin");
const NEEDED = ["claude", "codex", "gemini", "claude-code-acp", "llmock"];
const missing = NEEDED.filter((name) => !existsSync(join(BIN, name)));
const reason = `the real agent CLIs are not installed (missing ${missing.join(", ")} in tests/real-cli/node_modules; run: npm ci --prefix tests/real-cli)`;
if (missing.length > 0) {
  if (process.env.CI) console.log(`real agent CLIs: FAILING under CI: ${reason}`);
  else console.log(`real agent CLIs: skipping: ${reason}; under CI these tests fail instead`);
}
const skip = missing.length > 0 && !process.env.CI;

const home = tempHome("ep-real-cli-");
const userHome = join(home.dir, "user");
let llm: ChildProcess | undefined;
let llmUrl = "";
let tower: TowerProcess;
let epd: EpdProcess;
let work: ReturnType<typeof createClient<typeof WorkService>>;
let domainId = "";
let missionId = "";
let nodeId = "";
const cliEnv = () => ({ EP_HOME: home.dir, EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken });

/** runtimes.toml with nothing but each vendor's own settings (and, for ACP, which agent runs). */
function runtimesToml(acp: "claude-code-acp" | "gemini", acpSettings = ""): string {
  const anthropic = `ANTHROPIC_BASE_URL = "${llmUrl}"\nANTHROPIC_API_KEY = "test-key"\n`;
  const gemini = `GEMINI_API_KEY = "test-key"\nGOOGLE_GEMINI_BASE_URL = "${llmUrl}"\nGEMINI_MODEL = "gemini-2.5-flash"\n`;
  return [
    `[vendorA_code.env]\n${anthropic}`,
    `[vendorB.env]\nOPENAI_API_KEY = "test-key"\n`,
    `[vendorC.env]\n${gemini}`,
    acp === "gemini"
      ? `[vendorA_agent_acp]\ncommand = "gemini"\nargs = ["--acp"]\n${acpSettings}[vendorA_agent_acp.env]\n${gemini}`
      : `[vendorA_agent_acp]\n${acpSettings}[vendorA_agent_acp.env]\n${anthropic}`,
  ].join("\n");
}

/** codex's provider: the fake API over HTTP (it speaks the Responses API, not codex's websocket). */
const codexConfig = (provider = "") =>
  `model_provider = "fake"\n[model_providers.fake]\nname = "fake"\nbase_url = "${llmUrl}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\nsupports_websockets = false\n${provider}`;
const geminiSettings = (general?: Record<string, unknown>) => ({ ...(general ? { general } : {}), security: { auth: { selectedType: "gemini-api-key" } } });

beforeAll(async () => {
  if (missing.length > 0) throw new Error(reason);
  assertBuilt();
  await buildBinaries();
  const port = await freePort();
  llmUrl = `http://127.0.0.1:${port}`;
  llm = spawn(join(BIN, "llmock"), ["-p", String(port), "-h", "127.0.0.1", "-f", join(CLI_DIR, "fixtures")], { stdio: ["ignore", "pipe", "pipe"] });
  let llmLog = "";
  llm.stdout!.on("data", (d: Buffer) => (llmLog += d.toString()));
  llm.stderr!.on("data", (d: Buffer) => (llmLog += d.toString()));
  await waitFor(async () => {
    if (llm!.exitCode !== null) throw new Error(`aimock exited: ${llmLog}`);
    return (await fetch(`${llmUrl}/__aimock/journal`).catch(() => undefined))?.ok === true;
  }, 15_000);

  // the CLIs' own config files, where they need one: codex's provider (the fake API speaks the
  // Responses API over HTTP, not its websocket), gemini's auth type
  mkdirSync(join(userHome, ".codex"), { recursive: true });
  writeFileSync(join(userHome, ".codex", "config.toml"), codexConfig());
  mkdirSync(join(userHome, ".gemini"), { recursive: true });
  writeFileSync(join(userHome, ".gemini", "settings.json"), JSON.stringify(geminiSettings()));

  tower = await spawnTowerProcess(home.dir);
  const nodeFile = join(home.dir, "node.json");
  nodeId = (await registerNode(tower.url, tower.adminToken, nodeFile)).nodeId;
  mkdirSync(join(home.dir, "epd"), { recursive: true, mode: 0o700 });
  writeFileSync(join(home.dir, "epd", "runtimes.toml"), runtimesToml("claude-code-acp"));
  epd = await spawnEpd({ home: home.dir, nodeFile, backendUrl: tower.url, env: { HOME: userHome, PATH: `${BIN}:${process.env.PATH}` } });

  const transport = createConnectTransport({ baseUrl: tower.url, httpVersion: "1.1", interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))] });
  work = createClient(WorkService, transport);
  domainId = (await work.createDomain({ name: "real-cli-domain" })).domain!.id;
  missionId = (await work.createMission({ domainId, title: "real clis" })).mission!.id;
  for (const runtime of ["vendorA_code", "vendorB", "vendorC", "vendorA_agent_acp"]) await epd.call("agent.enroll", { domainId, runtime, name: `real-${runtime}` });
}, 120_000);

afterAll(async () => {
  await epd?.stop();
  await tower?.stop();
  if (llm) await stopChild(llm, "SIGTERM");
  home.cleanup();
});

async function runTask(runtime: string, prompt: string, onCreated?: (id: string) => Promise<void>): Promise<{ id: string; status: string; output: string; error: string }> {
  const id = (await work.createTask({ missionId, title: prompt.slice(0, 40), runtime: runtimeOf(runtime), input: { prompt }, maxAttempts: 1 })).task!.id;
  await onCreated?.(id);
  let task = (await work.getTask({ taskId: id })).task!;
  await waitFor(async () => {
    task = (await work.getTask({ taskId: id })).task!;
    return ["succeeded", "failed", "cancelled"].includes(statusWord(task.status));
  }, 90_000, 100);
  const result = task.result;
  return { id, status: statusWord(task.status), output: result?.output ?? "", error: result?.error ?? "" };
}

describe.skipIf(skip)("the real agent CLIs through epd", () => {
  it("claude (vendorA_code): the fixture's reply is the output; usage and cost reach ep task get", async () => {
    const r = await runTask("vendorA_code", "ep-real-cli: reply hello");
    expect(r.status, r.error + epd.stderr().slice(-2000)).toBe("succeeded");
    expect(r.output).toBe("hello from the fixture");
    const got = await ep(["task", "get", r.id, "--json"], { env: cliEnv() });
    const usage = got.json().task.result.usage;
    expect(usage).toMatchObject({ input_tokens: "1200", output_tokens: "34" });
    expect(usage.cost_usd).toBeGreaterThan(0);
    expect(usage.model).not.toBe("");
  }, 120_000);

  it("codex (vendorB) and gemini (vendorC) succeed with the fixture's reply", async () => {
    const [codex, gemini] = await Promise.all([runTask("vendorB", "ep-real-cli: reply hello"), runTask("vendorC", "ep-real-cli: reply hello")]);
    expect(codex.status, codex.error).toBe("succeeded");
    expect(codex.output).toBe("hello from the fixture");
    expect(gemini.status, gemini.error).toBe("succeeded");
    expect(gemini.output).toBe("hello from the fixture");
  }, 120_000);

  it("claude calls EP's MCP tool list_domains on its first, immediate reply", async () => {
    const r = await runTask("vendorA_code", "ep-real-cli: list the domains");
    expect(r.status, r.error).toBe("succeeded");
    expect(r.output).toBe("the tool saw real-cli-domain");
  }, 120_000);

  it("claude's API error is the task's error, without the 'success' subtype", async () => {
    const r = await runTask("vendorA_code", "ep-real-cli: provoke an api error");
    expect(r.status).toBe("failed");
    expect(r.error).toMatch(/^vendorA_code: /);
    expect(r.error).toContain("the fixture refuses this request");
    expect(r.error).not.toContain("success");
  }, 120_000);

  it("claude-code-acp (vendorA_agent_acp) answers with the fixture's reply", async () => {
    const r = await runTask("vendorA_agent_acp", "ep-real-cli: reply hello");
    expect(r.status, r.error + epd.stderr().slice(-2000)).toBe("succeeded");
    expect(r.output).toContain("hello from the fixture");
  }, 120_000);

  it("an ACP agent's API error carries the agent's own message", async () => {
    const r = await runTask("vendorA_agent_acp", "ep-real-cli: provoke an api error");
    expect(r.status).toBe("failed");
    expect(r.error).toMatch(/^vendorA_agent_acp: /);
    expect(r.error).toContain("the fixture refuses this request");
  }, 120_000);

  it("the mission's usage is the sum of its tasks', split by agent", async () => {
    const tasks = (await work.listTasks({ missionId, limit: 1000 })).tasks;
    const usages = tasks.map((t) => t.result?.usage).filter((u) => u !== undefined);
    expect(usages.length).toBeGreaterThanOrEqual(4); // claude twice, codex, gemini at least
    const mission = (await ep(["mission", "get", missionId, "--json"], { env: cliEnv() })).json();
    const sum = (f: (u: (typeof usages)[number]) => number) => usages.reduce((a, u) => a + f(u), 0);
    expect(Number(mission.usage.input_tokens)).toBe(sum((u) => Number(u.inputTokens)));
    expect(Number(mission.usage.output_tokens)).toBe(sum((u) => Number(u.outputTokens)));
    expect(mission.usage.cost_usd).toBeCloseTo(sum((u) => u.costUsd), 6);
    expect(mission.usage.cost_usd).toBeGreaterThan(0);
    const byAgent = mission.usage_by_agent as { usage: { input_tokens: string } }[];
    expect(byAgent.reduce((a, x) => a + Number(x.usage.input_tokens), 0)).toBe(Number(mission.usage.input_tokens));
  }, 120_000);

  it("gemini --acp (vendorA_agent_acp) answers with the fixture's reply", async () => {
    writeFileSync(join(home.dir, "epd", "runtimes.toml"), runtimesToml("gemini"));
    const reload = await ep(["node", "reload", nodeId, "--json"], { env: cliEnv() });
    expect(reload.code, reload.stderr).toBe(0);
    const r = await runTask("vendorA_agent_acp", "ep-real-cli: reply hello");
    expect(r.status, r.error + epd.stderr().slice(-2000)).toBe("succeeded");
    expect(r.output).toContain("hello from the fixture");
  }, 120_000);

  it('permission = "ask": claude-code-acp\'s Bash call waits for a person; approving runs it, rejecting and a timeout go on without it', async () => {
    writeFileSync(join(home.dir, "epd", "runtimes.toml"), runtimesToml("claude-code-acp", 'permission = "ask"\npermission_timeout_seconds = 5\n'));
    const reload = await ep(["node", "reload", nodeId, "--json"], { env: cliEnv() });
    expect(reload.code, reload.stderr).toBe(0);
    const sse = await openSse(`${tower.url}/events/stream?type=approval`, { authorization: `Bearer ${tower.adminToken}` });
    try {
      /** the pending request for task `id`, as `ep approvals ls --json` shows it */
      const pendingFor = async (id: string) => {
        let found: Record<string, any> | undefined;
        await waitFor(async () => {
          const ls = await ep(["approvals", "ls", "--json"], { env: cliEnv() });
          found = (ls.json().approvals as Record<string, any>[]).find((a) => a.task_id === id);
          return found !== undefined;
        }, 60_000, 200).catch(async (err: Error) => {
          const t = (await work.getTask({ taskId: id })).task!;
          throw new Error(`${err.message}: no approval for task ${id} (${t.status}: ${t.result?.error ?? ""} ${t.result?.output ?? ""}); epd: ${epd.stderr().slice(-3000)}`);
        });
        return found!;
      };
      const decide = (args: string[]) => async (id: string) => {
        const a = await pendingFor(id);
        expect(a).toMatchObject({ kind: "permission", tool: "Bash", status: "pending", arguments: { command: "touch ep-marker && echo ep-tool-output-42" } });
        const r = await ep(["approvals", ...args.slice(0, 1), a.id, ...args.slice(1)], { env: cliEnv() });
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toMatch(new RegExp(`^approval ${a.id} ${args[0] === "approve" ? "approved" : "rejected"}`));
      };
      const approved = await runTask("vendorA_agent_acp", "ep-real-cli: ask to run a tool", decide(["approve"]));
      expect(approved.status, approved.error + epd.stderr().slice(-2000)).toBe("succeeded");
      expect(approved.output).toContain("the tool ran");

      // claude-code-acp answers a refusal by ending its turn (deny with interrupt): the run ends
      // without the tool, and without asking the model again
      const rejected = await runTask("vendorA_agent_acp", "ep-real-cli: ask to run a tool", decide(["reject", "--reason", "not today"]));
      expect(rejected.status, rejected.error).toBe("succeeded");
      expect(rejected.output).not.toContain("the tool ran");

      // nobody decides: after permission_timeout_seconds the tower expires the request, the agent hears no
      let expiredId = "";
      const timedOut = await runTask("vendorA_agent_acp", "ep-real-cli: ask to run a tool", async (id) => void (expiredId = (await pendingFor(id)).id));
      expect(timedOut.status, timedOut.error).toBe("succeeded");
      expect(timedOut.output).not.toContain("the tool ran");
      const shown = await ep(["approvals", "ls", "--json"], { env: cliEnv() });
      expect(shown.json().approvals).toEqual([]);

      // every request and decision was on the stream, in order
      await waitFor(() => sse.messages.filter((m) => m.data.includes("permission.decided")).length >= 3, 10_000);
      const events = sse.messages.map((m) => JSON.parse(m.data)).filter((e) => e.name?.startsWith("permission."));
      expect(events.map((e) => `${e.name}:${e.status}`)).toEqual([
        "permission.requested:pending",
        "permission.decided:approved",
        "permission.requested:pending",
        "permission.decided:rejected",
        "permission.requested:pending",
        "permission.decided:expired",
      ]);
      expect(events.at(-1).payload.approval_id).toBe(expiredId);
    } finally {
      sse.close();
    }
  }, 180_000);

  it('permission = "ask" for claude -p (vendorA_code): its permission prompt tool asks a person; approving runs the tool, rejecting makes claude go on without it', async () => {
    writeFileSync(join(home.dir, "epd", "runtimes.toml"), runtimesToml("claude-code-acp") + '\n[vendorA_code]\npermission = "ask"\npermission_timeout_seconds = 5\n');
    const reload = await ep(["node", "reload", nodeId, "--json"], { env: cliEnv() });
    expect(reload.code, reload.stderr).toBe(0);
    const decide = (args: string[]) => async (id: string) => {
      let found: Record<string, any> | undefined;
      await waitFor(async () => {
        found = ((await ep(["approvals", "ls", "--json"], { env: cliEnv() })).json().approvals as Record<string, any>[]).find((a) => a.task_id === id);
        return found !== undefined;
      }, 60_000, 200).catch(async (err: Error) => {
        const t = (await work.getTask({ taskId: id })).task!;
        throw new Error(`${err.message}: no approval for task ${id} (${t.status}: ${t.result?.error ?? ""} ${t.result?.output ?? ""}); epd: ${epd.stderr().slice(-3000)}`);
      });
      expect(found).toMatchObject({ kind: "permission", tool: "Bash", status: "pending", arguments: { command: "touch ep-marker && echo ep-tool-output-42" } });
      expect(found!.options.map((o: { kind: string }) => o.kind)).toEqual(["allow_once", "allow_always", "reject_once"]);
      const r = await ep(["approvals", ...args.slice(0, 1), found!.id, ...args.slice(1)], { env: cliEnv() });
      expect(r.code, r.stderr).toBe(0);
    };
    const approved = await runTask("vendorA_code", "ep-real-cli: ask to run a tool", decide(["approve"]));
    expect(approved.status, approved.error + epd.stderr().slice(-2000)).toBe("succeeded");
    expect(approved.output).toBe("the tool ran");
    const rejected = await runTask("vendorA_code", "ep-real-cli: ask to run a tool", decide(["reject", "--reason", "not today"]));
    expect(rejected.status, rejected.error).toBe("succeeded");
    expect(rejected.output).toBe("the tool did not run");
    // nobody decides: after permission_timeout_seconds the request expires and claude hears no
    const timedOut = await runTask("vendorA_code", "ep-real-cli: ask to run a tool");
    expect(timedOut.status, timedOut.error).toBe("succeeded");
    expect(timedOut.output).toBe("the tool did not run");
    const transport = createConnectTransport({ baseUrl: tower.url, httpVersion: "1.1", interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))] });
    const asked = (await createClient(ApprovalService, transport).listApprovals({ taskId: timedOut.id })).approvals;
    expect(asked.map((a) => [a.status, a.reason])).toEqual([[ApprovalStatus.EXPIRED, "nobody decided before the timeout"]]);
  }, 180_000);
});

describe.skipIf(skip)("the real agent CLIs when the model API fails (issue 34)", () => {
  beforeAll(async () => {
    // the vendors' own retry limits, kept small so a failing API ends the run in seconds: claude's
    // environment variable, codex's provider settings, gemini's settings.json
    writeFileSync(join(home.dir, "epd", "runtimes.toml"), runtimesToml("claude-code-acp").replace("[vendorA_code.env]\n", '[vendorA_code.env]\nCLAUDE_CODE_MAX_RETRIES = "3"\n'));
    writeFileSync(join(userHome, ".codex", "config.toml"), codexConfig("request_max_retries = 1\nstream_max_retries = 1\n"));
    writeFileSync(join(userHome, ".gemini", "settings.json"), JSON.stringify(geminiSettings({ maxAttempts: 2 })));
    const reload = await ep(["node", "reload", nodeId, "--json"], { env: cliEnv() });
    expect(reload.code, reload.stderr).toBe(0);
  }, 60_000);

  const transport = () => createConnectTransport({ baseUrl: tower.url, httpVersion: "1.1", interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))] });
  type Frame = { kind: string; text: string; data?: Record<string, unknown> };
  const framesOf = async (taskId: string): Promise<Frame[]> => {
    const page = await createClient(EventService, transport()).listEvents({ limit: 1000, filter: { taskId, types: ["progress"] } });
    return page.events.map((e) => e.payload as unknown as Frame);
  };
  const submit = async (runtime: string, prompt: string) =>
    (await work.createTask({ missionId, title: prompt.slice(0, 40), runtime: runtimeOf(runtime), input: { prompt }, maxAttempts: 1 })).task!.id;

  const ended = async (id: string) => {
    let task = (await work.getTask({ taskId: id })).task!;
    await waitFor(async () => ["succeeded", "failed", "cancelled"].includes(statusWord((task = (await work.getTask({ taskId: id })).task!).status)), 90_000, 100);
    return task;
  };

  /** The first retry frame of the task, and the task's status when the tower had it. */
  async function retryWhileRunning(id: string): Promise<{ frame: Frame; status: string }> {
    let frame: Frame | undefined;
    let status = "";
    await waitFor(async () => {
      frame = (await framesOf(id)).find((f) => f.kind === "status" && f.data?.retry === true);
      if (frame) status = statusWord((await work.getTask({ taskId: id })).task!.status);
      return frame !== undefined;
    }, 60_000, 100);
    return { frame: frame!, status };
  }

  it("claude: each retry of a 429 is a status frame while the task runs; the error is the upstream's", async () => {
    const id = await submit("vendorA_code", "ep-frames: upstream 429");
    // claude waits 0.5, 1 and 2 s between its three retries: the first frame comes seconds before the end
    const { frame, status } = await retryWhileRunning(id);
    expect(status).toBe("running");
    expect(frame).toMatchObject({ data: { attempt: 1, max_retries: 3, error_status: 429 } });
    expect(frame.text).toMatch(/^model API error 429, retry 1\/3 in /);
    const task = await ended(id);
    expect(statusWord(task.status)).toBe("failed");
    expect(task.result?.error).toContain("the fixture rate-limits you (429)");
  }, 120_000);

  it("gemini: its stderr 'Attempt 1 failed' is a status frame while the task runs; the error is the upstream's; stderr is its own kind", async () => {
    const id = await submit("vendorC", "ep-frames: upstream 500");
    // gemini waits about 5 s before its second (and last, maxAttempts = 2) attempt
    const { frame, status } = await retryWhileRunning(id);
    expect(status).toBe("running");
    expect(frame).toMatchObject({ text: "model API error 500, retry 1: the fixture is overloaded (500)", data: { attempt: 1, error_status: 500 } });
    const task = await ended(id);
    expect(statusWord(task.status)).toBe("failed");
    expect(task.result?.error).toBe("vendorC: HTTP 500: the fixture is overloaded (500)");
    const frames = await framesOf(id);
    expect(frames.some((f) => f.kind === "stderr" && f.text.startsWith("Attempt 1 failed with status 500"))).toBe(true);
    expect(frames.some((f) => f.kind === "text" && f.text.includes("Attempt 1 failed"))).toBe(false);
  }, 120_000);

  it("codex: a 500's retries are status frames and the error names the upstream status codex drops", async () => {
    const r = await runTask("vendorB", "ep-frames: upstream 500");
    expect(r.status).toBe("failed");
    expect(r.error).toMatch(/^vendorB: .*\(upstream HTTP 500 Internal Server Error, request id req-[\w-]+\)$/);
    const retries = (await framesOf(r.id)).filter((f) => f.kind === "status" && f.data?.retry === true);
    expect(retries.some((f) => f.data?.error_status === 500)).toBe(true);
    expect(retries.some((f) => f.data?.max_retries === 1)).toBe(true); // codex's own "Reconnecting... 1/1"
  }, 120_000);

  it("gemini's streamed pieces arrive as whole lines; usage names the model for codex and gemini", async () => {
    const [gemini, codex] = await Promise.all([runTask("vendorC", "ep-frames: stream words"), runTask("vendorB", "ep-real-cli: reply hello")]);
    expect(gemini.status, gemini.error).toBe("succeeded");
    // the fixture streams four characters at a time
    expect((await framesOf(gemini.id)).filter((f) => f.kind === "text").map((f) => f.text)).toEqual(["codeword pelican-773", "second line here"]);
    expect(codex.status, codex.error).toBe("succeeded");
    for (const [r, model] of [
      [gemini, "gemini-2.5-flash"],
      [codex, /\S/],
    ] as const) {
      const got = (await ep(["task", "get", r.id, "--json"], { env: cliEnv() })).json();
      expect(got.task.result.usage.model).toMatch(model);
    }
  }, 120_000);
});
