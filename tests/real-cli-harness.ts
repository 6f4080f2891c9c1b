// The real agent CLIs from npm (pinned in tests/real-cli/package.json, installed by .ci/run into
// tests/real-cli/node_modules) run through a real tower and epd against a fake LLM API
// (@copilotkit/aimock serving tests/real-cli/fixtures). The operator's only settings are the
// vendor's own: API key and base URL in runtimes.toml `env`, plus the CLI's own config file where
// the CLI needs one (codex's provider, gemini's auth type). Everything else is EP's defaults.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { homedir } from "node:os";
import { join } from "node:path";
import { Transform } from "node:stream";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { runtimeOf, statusWord } from "../test-support/words.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import {
  buildBinaries,
  registerNode,
  ROOT,
  spawnEpd,
  spawnTowerProcess,
  stopChild,
  type EpdProcess,
  type TowerProcess,
} from "./epd-harness.js";
import { freePort, waitFor } from "./harness.js";

const CLI_DIR = join(ROOT, "tests", "real-cli");
const BIN = join(CLI_DIR, "node_modules", ".bin");
const NEEDED = ["claude", "codex", "gemini", "claude-code-acp", "llmock"];
const missing = NEEDED.filter((name) => !existsSync(join(BIN, name)));
export const REAL_CLI_MISSING =
  `the real agent CLIs are not installed (missing ${missing.join(", ")} ` +
  `in tests/real-cli/node_modules; run: npm ci --prefix tests/real-cli)`;
if (missing.length > 0) {
  if (process.env.CI) console.log(`real agent CLIs: FAILING under CI: ${REAL_CLI_MISSING}`);
  else console.log(`real agent CLIs: skipping: ${REAL_CLI_MISSING}; under CI these tests fail instead`);
}
/** true when the tests must be skipped (not installed, outside CI) */
export const skipRealCli = missing.length > 0 && !process.env.CI;

export type AcpAgent = "claude-code-acp" | "gemini";

export interface RealCli {
  home: string;
  /** the user's HOME the CLIs run with */
  userHome: string;
  llmUrl: string;
  tower: TowerProcess;
  epd: EpdProcess;
  work: ReturnType<typeof createClient<typeof WorkService>>;
  events: ReturnType<typeof createClient<typeof EventService>>;
  domainId: string;
  missionId: string;
  nodeId: string;
  cliEnv(): Record<string, string>;
  /** runtimes.toml with nothing but each vendor's own settings, `extra` appended (tables of its own) */
  setRuntimes(acp: AcpAgent, opts?: { acpSettings?: string; claudeEnv?: string; extra?: string }): Promise<void>;
  runTask(
    runtime: string,
    prompt: string,
    opts?: { onCreated?: (id: string) => Promise<void>; input?: Record<string, unknown> },
  ): Promise<{ id: string; status: string; output: string; error: string }>;
  /** a git repository with one commit, in a folder of the user's own */
  repo(): string;
  /** the progress frames the task's run reported, as text */
  frames(taskId: string): Promise<string[]>;
  /**
   * every request the CLIs made of the fake API, as sent (aimock's own journal drops the tool kinds it does not speak,
   * e.g. codex's namespaces)
   */
  journal(): Promise<{ path: string; body: Record<string, unknown> }[]>;
  close(): Promise<void>;
}

export function runtimesToml(llmUrl: string, acp: AcpAgent, acpSettings = "", claudeEnv = ""): string {
  const anthropic = `ANTHROPIC_BASE_URL = "${llmUrl}"\nANTHROPIC_API_KEY = "test-key"\n`;
  const gemini =
    `GEMINI_API_KEY = "test-key"\nGOOGLE_GEMINI_BASE_URL ` + `= "${llmUrl}"\nGEMINI_MODEL = "gemini-2.5-flash"\n`;
  return [
    `[vendorA_code.env]\n${anthropic}${claudeEnv}`,
    `[vendorB.env]\nOPENAI_API_KEY = "test-key"\n`,
    `[vendorC.env]\n${gemini}`,
    acp === "gemini"
      ? `[vendorA_agent_acp]\ncommand = "gemini"\nargs = ["--acp"]\n${acpSettings}[vendorA_agent_acp.env]\n${gemini}`
      : `[vendorA_agent_acp]\n${acpSettings}[vendorA_agent_acp.env]\n${anthropic}`,
  ].join("\n");
}

/** codex's own config: the fake API as its provider, `provider` lines added to that table (its retry limits). */
export const codexConfig = (llmUrl: string, provider = "") =>
  `model = "gpt-5.1"\nmodel_provider = "fake"\n[model_providers.fake]\nname = "fake"\nbase_url = ` +
  `"${llmUrl}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\nsupports_websockets = false\n${provider}`;
/** gemini's own settings: the API key auth, and `general` settings (its retry limit). */
export const geminiSettings = (general?: Record<string, unknown>) =>
  JSON.stringify({ ...(general ? { general } : {}), security: { auth: { selectedType: "gemini-api-key" } } });

/** Starts the fake API, a tower and an epd with the four agent runtimes enrolled in one domain. */
export async function startRealCli(prefix: string): Promise<RealCli> {
  if (missing.length > 0) throw new Error(REAL_CLI_MISSING);
  assertBuilt();
  await buildBinaries();
  // both homes in a folder of the user's own: codex will not put its sandbox helpers, nor gemini
  // read a settings file, under a world-writable directory such as /tmp
  const base = join(homedir(), ".ep-test");
  mkdirSync(base, { recursive: true, mode: 0o700 });
  const home = {
    dir: mkdtempSync(join(base, prefix)),
    cleanup: () => rmSync(home.dir, { recursive: true, force: true }),
  };
  const userHome = mkdtempSync(join(base, `${prefix}user-`));
  const port = await freePort();
  const mockUrl = `http://127.0.0.1:${port}`;
  const llm: ChildProcess = spawn(
    join(BIN, "llmock"),
    ["-p", String(port), "-h", "127.0.0.1", "-f", join(CLI_DIR, "fixtures")],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let llmLog = "";
  llm.stdout!.on("data", (d: Buffer) => (llmLog += d.toString()));
  llm.stderr!.on("data", (d: Buffer) => (llmLog += d.toString()));
  await waitFor(async () => {
    if (llm.exitCode !== null) throw new Error(`aimock exited: ${llmLog}`);
    return (await fetch(`${mockUrl}/__aimock/journal`).catch(() => undefined))?.ok === true;
  }, 15_000);
  const recorder = await startRecorder(mockUrl);
  const llmUrl = recorder.url;

  // the CLIs' own config files, where they need one: codex's provider (the fake API speaks the
  // Responses API over HTTP, not its websocket; a model name gives codex its plain function
  // tools), gemini's auth type
  mkdirSync(join(userHome, ".codex"), { recursive: true });
  writeFileSync(join(userHome, ".codex", "config.toml"), codexConfig(llmUrl));
  mkdirSync(join(userHome, ".gemini"), { recursive: true });
  writeFileSync(join(userHome, ".gemini", "settings.json"), geminiSettings());

  const tower = await spawnTowerProcess(home.dir);
  const nodeFile = join(home.dir, "node.json");
  const nodeId = (await registerNode(tower.url, tower.adminToken, nodeFile)).nodeId;
  mkdirSync(join(home.dir, "epd"), { recursive: true, mode: 0o700 });
  writeFileSync(join(home.dir, "epd", "runtimes.toml"), runtimesToml(llmUrl, "claude-code-acp"));
  const epd = await spawnEpd({
    home: home.dir,
    nodeFile,
    backendUrl: tower.url,
    env: { HOME: userHome, PATH: `${BIN}:${process.env.PATH}` },
  });

  const transport = createConnectTransport({
    baseUrl: tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))],
  });
  const work = createClient(WorkService, transport);
  const events = createClient(EventService, transport);
  const domainId = (await work.createDomain({ name: "real-cli-domain" })).domain!.id;
  const missionId = (await work.createMission({ domainId, title: "real clis" })).mission!.id;
  for (const runtime of ["vendorA_code", "vendorB", "vendorC", "vendorA_agent_acp"])
    await epd.call("agent.enroll", { domainId, runtime, name: `real-${runtime}` });
  const cliEnv = () => ({ EP_HOME: home.dir, EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken });
  const repos: string[] = [];

  return {
    home: home.dir,
    userHome,
    llmUrl,
    tower,
    epd,
    work,
    events,
    domainId,
    missionId,
    nodeId,
    cliEnv,
    async setRuntimes(acp, opts = {}) {
      writeFileSync(
        join(home.dir, "epd", "runtimes.toml"),
        runtimesToml(llmUrl, acp, opts.acpSettings, opts.claudeEnv) + (opts.extra ? `\n${opts.extra}` : ""),
      );
      const reload = await ep(["node", "reload", nodeId, "--json"], { env: cliEnv() });
      if (reload.code !== 0) throw new Error(`ep node reload: ${reload.stderr}${reload.stdout}`);
    },
    async runTask(runtime, prompt, opts = {}) {
      const id = (
        await work.createTask({
          missionId,
          title: prompt.slice(0, 40),
          runtime: runtimeOf(runtime),
          input: { prompt, ...opts.input },
          maxAttempts: 1,
        })
      ).task!.id;
      await opts.onCreated?.(id);
      let task = (await work.getTask({ taskId: id })).task!;
      await waitFor(
        async () => {
          task = (await work.getTask({ taskId: id })).task!;
          return ["succeeded", "failed", "cancelled"].includes(statusWord(task.status));
        },
        90_000,
        100,
      );
      const result = task.result;
      return { id, status: statusWord(task.status), output: result?.output ?? "", error: result?.error ?? "" };
    },
    repo() {
      const dir = mkdtempSync(join(base, `${prefix}repo-`));
      const git = (...args: string[]) => execFileSync("git", ["-C", dir, ...args], { stdio: "pipe" });
      git("init", "-q", "-b", "main");
      writeFileSync(join(dir, "README.md"), "# a repository the agents work in\n");
      git("add", "README.md");
      git("-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "start");
      repos.push(dir);
      return dir;
    },
    async frames(taskId) {
      const res = await events.listEvents({ limit: 1000, filter: { types: ["progress"], taskId } });
      return res.events.map((e) => {
        const p = (e.payload ?? {}) as { kind?: string; text?: string; data?: unknown };
        return `${p.kind}: ${p.text ?? ""} ${JSON.stringify(p.data ?? {})}`;
      });
    },
    journal: async () => recorder.requests,
    async close() {
      await epd.stop();
      await tower.stop();
      await stopChild(llm, "SIGTERM");
      recorder.close();
      home.cleanup();
      for (const dir of [userHome, ...repos]) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The names of the tools a request offers the model, in every vendor's shape (codex's namespaces as `ns.name`). */
export function toolNames(body: Record<string, unknown>): string[] {
  const out: string[] = [];
  const walk = (tools: unknown, prefix: string) => {
    if (!Array.isArray(tools)) return;
    for (const t of tools as Record<string, unknown>[]) {
      if (Array.isArray(t.functionDeclarations)) walk(t.functionDeclarations, prefix);
      else if (t.type === "namespace") walk(t.tools, `${String(t.name)}.`);
      else {
        const name = (t.name ?? (t.function as { name?: unknown } | undefined)?.name) as string | undefined;
        if (name) out.push(prefix + name);
      }
    }
  };
  walk(body.tools, "");
  return out;
}

/**
 * codex offers MCP tools in namespaces and expects the model to call them with one
 * (`{"type": "function_call", "namespace": "mcp__ep", "name": "list_domains"}`); aimock's fixtures
 * cannot say so. A fixture's call to `mcp__ep.list_domains` becomes that, in the Responses stream.
 */
function namespacedCalls(): Transform {
  let rest = "";
  const fix = (line: string) => {
    if (!line.startsWith("data: ") || !line.includes('"function_call"')) return line;
    try {
      const event = JSON.parse(line.slice(6)) as { item?: { type?: string; name?: string; namespace?: string } };
      const item = event.item;
      if (item?.type !== "function_call" || !item.name?.includes(".")) return line;
      const at = item.name.lastIndexOf(".");
      item.namespace = item.name.slice(0, at);
      item.name = item.name.slice(at + 1);
      return `data: ${JSON.stringify(event)}`;
    } catch {
      return line;
    }
  };
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      const lines = (rest + chunk.toString("utf8")).split("\n");
      rest = lines.pop() ?? "";
      done(null, lines.map(fix).join("\n") + (lines.length ? "\n" : ""));
    },
    flush(done) {
      done(null, fix(rest));
    },
  });
}

/** A pass-through in front of the fake API that keeps each request's path and JSON body. */
async function startRecorder(
  target: string,
): Promise<{ url: string; requests: { path: string; body: Record<string, unknown> }[]; close(): void }> {
  const requests: { path: string; body: Record<string, unknown> }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      try {
        requests.push({
          path: req.url ?? "",
          body: raw.length ? (JSON.parse(raw.toString("utf8")) as Record<string, unknown>) : {},
        });
      } catch {
        requests.push({ path: req.url ?? "", body: {} });
      }
      const up = request(`${target}${req.url ?? ""}`, { method: req.method, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        if (req.url?.startsWith("/v1/responses")) r.pipe(namespacedCalls()).pipe(res);
        else r.pipe(res);
      });
      up.on("error", (err) => {
        res.writeHead(502);
        res.end(err.message);
      });
      up.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, requests, close: () => server.close() };
}

export { stopChild };
