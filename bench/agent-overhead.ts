// What EP adds to an agent CLI's run (issue 34): one one-turn prompt, run N rounds per CLI three ways,
// alternating within each round:
//   direct  the CLI spawned by this script with the command line EP's runtime would spawn for the
//           same task (daemon/runtimes `commandLine()`: argv, environment and runtimes.toml's env),
//           in a fresh directory, without EP's MCP server and without any confinement around it
//           (both are EP's overhead); timed from spawn to exit
//   api     the task created over REST (`POST /work/missions/{id}/tasks`), its `task.succeeded`
//           read from `/events/stream` (subscribed before the create); timed from the create to
//           the event
//   cli     `ep task submit --wait` (the built bin/ep.js) as a child process; timed wall
//
//   node scripts/run-ts.mjs bench/agent-overhead.ts [--runs 20] [--warmup 1] [--cli claude,codex,gemini] [--json]
//     [--ep <bin/ep.js of another build>]   (the cli path's `ep`; default this tree's bin/ep.js) [--trace]
//
// The CLIs are the real ones (tests/real-cli/node_modules: npm ci --prefix tests/real-cli) against
// the fake LLM API (llmock, tests/real-cli/fixtures), with runtimes.toml giving only keys and base
// URLs: the setting of tests/real-cli.test.ts (tests/real-cli-harness.ts), whose tower and epd are
// the bundled binaries as child processes. The confinement needs bubblewrap, as EP's default does.
// `npm run build` first (the cli path runs dist/). Besides the three paths it reports, for the api
// path, when the tower recorded each step (from the create: claimed, running, first progress frame)
// and, for the direct path, the CLI's first stdout line: where the difference goes.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { createSseParser } from "../common/sse.js";
import { createRuntimeRegistry } from "../daemon/runtimes/registry.js";
import { parseRuntimesConfig } from "../daemon/runtimes/runtimes-config.js";
import type { CommandLine } from "../daemon/runtimes/runtime.js";
import { parseJsonObject, type StreamParser } from "../daemon/runtimes/process-runtime.js";
import { createVendorACodeParser } from "../daemon/runtimes/vendor-a-code.js";
import { createVendorBParser } from "../daemon/runtimes/vendor-b.js";
import { createVendorCParser } from "../daemon/runtimes/vendor-c.js";
import { ROOT } from "../tests/epd-harness.js";
import { REAL_CLI_MISSING, runtimesToml, skipRealCli, startRealCli } from "../tests/real-cli-harness.js";
import { pct } from "./figures.js";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "20" },
    warmup: { type: "string", default: "1" },
    cli: { type: "string", default: "claude,codex,gemini" },
    json: { type: "boolean", default: false },
    ep: { type: "string" },
    // epd's log lines about each CLI's last api task, in ms from its create (epd logs at debug here)
    trace: { type: "boolean", default: false },
  },
});
/** each CLI's runtime and the parser epd reads its output with (it gets the child's environment) */
const RUNTIMES: Record<
  "claude" | "codex" | "gemini",
  { kind: string; parser: (env: Record<string, string>) => StreamParser }
> = {
  claude: { kind: "vendorA_code", parser: createVendorACodeParser },
  codex: { kind: "vendorB", parser: createVendorBParser },
  gemini: { kind: "vendorC", parser: createVendorCParser },
};
type Cli = keyof typeof RUNTIMES;
const RUNS = Number(values.runs);
const WARMUP = Number(values.warmup);
const clis = values.cli!.split(",").map((c) => c.trim());
for (const c of clis)
  if (!(c in RUNTIMES)) throw new Error(`--cli: unknown CLI '${c}' (known: ${Object.keys(RUNTIMES).join(", ")})`);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error(`--runs must be a positive integer (got ${values.runs})`);
if (!Number.isInteger(WARMUP) || WARMUP < 0)
  throw new Error(`--warmup must be a non-negative integer (got ${values.warmup})`);
if (skipRealCli) throw new Error(REAL_CLI_MISSING);
const EP_BIN = values.ep ?? join(ROOT, "bin", "ep.js");
if (values.ep ? !existsSync(values.ep) : !existsSync(join(ROOT, "dist", "cli", "main.js")))
  throw new Error(
    values.ep ? `--ep: no such file ${values.ep}` : "run 'npm run build' first: the cli path runs dist/cli/main.js",
  );

const PROMPT = "ep-real-cli: reply hello";
const REPLY = "hello from the fixture";
const log = (line: string) => (values.json ? process.stderr : process.stdout).write(`${line}\n`);
const load0 = loadavg();
log(`load average at start: ${load0.map((l) => l.toFixed(2)).join(" ")} (${cpus().length} cores)`);

// the setting of tests/real-cli*.test.ts: the fake API (behind the harness's recorder), a tower,
// an epd with the agent runtimes enrolled, runtimes.toml with keys and base URLs only
const rc = await startRealCli("ep-bench-agent-overhead-");
const { tower, epd, missionId, work } = rc;
const toml = runtimesToml(rc.llmUrl, "claude-code-acp");
/** the environment epd runs with (tests/real-cli-harness.ts), and so what its runs start from */
const epdEnv = {
  HOME: rc.userHome,
  PATH: `${join(ROOT, "tests", "real-cli", "node_modules", ".bin")}:${process.env.PATH}`,
};
process.on("exit", () => {
  for (const c of [epd.child, tower.child]) if (c.exitCode === null) c.kill("SIGKILL");
});

// ---- the event stream, subscribed once before any create: each task's steps as they arrive
const steps = new Map<string, Map<string, number>>();
const waiters = new Map<string, () => void>();
const stream = new AbortController();
{
  const res = await fetch(`${tower.url}/events/stream?type=matrix,progress&mission_id=${missionId}`, {
    headers: { accept: "text/event-stream", authorization: `Bearer ${tower.adminToken}` },
    signal: stream.signal,
  });
  if (!res.ok || !res.body) throw new Error(`/events/stream: HTTP ${res.status}`);
  void (async () => {
    const parser = createSseParser();
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      const at = performance.now();
      for (const m of parser.push(decoder.decode(chunk, { stream: true }))) {
        if (!m.id || !m.data) continue;
        const e = JSON.parse(m.data) as { name: string; task_id: string; type: string };
        const seen = steps.get(e.task_id) ?? new Map<string, number>();
        steps.set(e.task_id, seen);
        const name = e.type === "progress" ? "first frame" : e.name;
        if (!seen.has(name)) seen.set(name, at);
        if (["task.succeeded", "task.failed", "task.cancelled"].includes(e.name)) waiters.get(e.task_id)?.();
      }
    }
  })().catch((err: Error) => {
    if (!stream.signal.aborted) throw err;
  });
}

// ---- the three paths
interface Sample {
  ms: number;
  /** api: the task, and the wall clock at its create (for --trace) */
  task?: { id: string; createdAtMs: number };
  /** api: ms from the create to each step; direct: to the first stdout line */
  steps?: Record<string, number>;
}

/** The command line EP's runtime spawns for this prompt, read from daemon/runtimes (no MCP config, no confinement). */
function directLine(kind: string, cwd: string): CommandLine {
  const registry = createRuntimeRegistry(parseRuntimesConfig(toml, "runtimes.toml"));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, ...epdEnv }))
    if (v !== undefined && !k.startsWith("EP_")) env[k] = v;
  const spec = {
    taskId: "tsk_direct",
    agentId: "agt_direct",
    prompt: PROMPT,
    input: { prompt: PROMPT },
    cwd,
    env,
    onFrame() {},
  };
  const line = registry.get(kind).commandLine?.(spec);
  if (!line) throw new Error(`runtime ${kind} has no command line to run directly`);
  if ("failed" in line) throw new Error(`runtime ${kind}: ${line.failed.error}`);
  return line;
}

let dirs = 0;
async function direct(c: Cli): Promise<Sample> {
  const { kind } = RUNTIMES[c];
  const cwd = mkdtempSync(join(rc.home, `direct-${dirs++}-`));
  const line = directLine(kind, cwd);
  const t0 = performance.now();
  let first: number | undefined;
  const child = spawn(line.executable, line.args, {
    cwd,
    env: line.env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => {
    first ??= performance.now();
    out += d.toString();
  });
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => child.on("close", r));
  const ms = performance.now() - t0;
  // read as epd reads it: the vendor's stream parser says whether the run succeeded, and with what
  const parser = RUNTIMES[c].parser(line.env);
  for (const l of out.split("\n")) {
    const event = parseJsonObject(l);
    if (event) parser.event(event);
  }
  const outcome = parser.outcome();
  if (code !== 0 || !outcome.ok || outcome.output !== REPLY)
    throw new Error(`direct ${kind} exited ${code} without the reply: ${out.slice(-1500)} ${err.slice(-1500)}`);
  return { ms, steps: { "first stdout": (first ?? t0) - t0 } };
}

async function api(c: Cli): Promise<Sample> {
  const { kind } = RUNTIMES[c];
  const body = JSON.stringify({
    title: `${kind} over the API`,
    runtime: kind,
    input: { prompt: PROMPT },
    max_attempts: 1,
  });
  const createdAtMs = Date.now();
  const t0 = performance.now();
  const res = await fetch(`${tower.url}/work/missions/${missionId}/tasks`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${tower.adminToken}` },
    body,
  });
  const created = (await res.json()) as { task?: { id: string }; error?: unknown };
  if (!created.task) throw new Error(`create: ${res.status} ${JSON.stringify(created)}`);
  const id = created.task.id;
  const ended = new Promise<void>((r) => waiters.set(id, r));
  if (!steps.get(id)?.has("task.succeeded") && !steps.get(id)?.has("task.failed")) await ended;
  waiters.delete(id);
  const seen = steps.get(id)!;
  const end = seen.get("task.succeeded");
  if (end === undefined) {
    const t = (await work.getTask({ taskId: id })).task!;
    throw new Error(`api ${kind}: task ${id} did not succeed: ${t.result?.error} ${epd.stderr().slice(-2000)}`);
  }
  const at: Record<string, number> = {};
  for (const [name, when] of seen) at[name] = when - t0;
  return { ms: end - t0, steps: at, task: { id, createdAtMs } };
}

async function cli(c: Cli): Promise<Sample> {
  const { kind } = RUNTIMES[c];
  const args = [
    EP_BIN,
    "task",
    "submit",
    "--mission",
    missionId,
    `${kind} through the cli`,
    "--runtime",
    kind,
    "--prompt",
    PROMPT,
    "--max-attempts",
    "1",
    "--wait",
  ];
  const env = {
    ...process.env,
    EP_HOME: join(rc.home, "cli-home"),
    EP_BASE_URL: tower.url,
    EP_TOKEN: tower.adminToken,
  };
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const at: Record<string, number> = {};
  child.stdout!.on("data", (d: Buffer) => {
    out += d.toString();
    if (out.includes("submitted task")) at["submitted line"] ??= performance.now() - t0;
    if (out.includes(REPLY)) at["reply printed"] ??= performance.now() - t0;
  });
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => child.on("close", r));
  const ms = performance.now() - t0;
  if (code !== 0 || !out.includes(REPLY))
    throw new Error(`ep task submit --wait (${kind}) exited ${code}: ${out.slice(-2000)}`);
  return { ms, steps: at };
}

// ---- rounds: per CLI, each round runs the three paths one after the other
const PATHS = { direct, api, cli } as const;
type PathName = keyof typeof PATHS;
const samples: Record<string, Record<PathName, Sample[]>> = {};
const argv = Object.fromEntries(
  clis.map((c) => {
    const line = directLine(RUNTIMES[c as Cli].kind, rc.home);
    return [c, [line.executable.split("/").pop(), ...line.args].join(" ")];
  }),
);
for (const c of clis) log(`${c} directly: ${argv[c]}`);
for (const c of clis) {
  samples[c] = { direct: [], api: [], cli: [] };
  for (let round = 0; round < WARMUP + RUNS; round++) {
    for (const p of Object.keys(PATHS) as PathName[]) {
      const s = await PATHS[p](c as Cli);
      if (round >= WARMUP) samples[c][p].push(s);
    }
  }
  const m = (p: PathName) =>
    pct(
      samples[c][p].map((s) => s.ms),
      50,
    );
  log(`${c}: direct ${m("direct")} ms, api ${m("api")} ms, cli ${m("cli")} ms (medians of ${RUNS})`);
}
stream.abort();
const load1 = loadavg();

// ---- report
const stepMedians = (xs: Sample[]) => {
  const names = [...new Set(xs.flatMap((s) => Object.keys(s.steps ?? {})))];
  return Object.fromEntries(
    names.map((n) => [
      n,
      pct(
        xs.map((s) => s.steps?.[n]).filter((v): v is number => v !== undefined),
        50,
      ),
    ]),
  );
};
const report = Object.fromEntries(
  clis.map((c) => {
    const fig = (p: PathName) => ({
      p50: pct(
        samples[c][p].map((s) => s.ms),
        50,
      ),
      p90: pct(
        samples[c][p].map((s) => s.ms),
        90,
      ),
    });
    const f = { direct: fig("direct"), api: fig("api"), cli: fig("cli") };
    return [
      c,
      {
        direct_argv: argv[c],
        ...f,
        overhead_api_ms: +(f.api.p50 - f.direct.p50).toFixed(1),
        overhead_cli_over_api_ms: +(f.cli.p50 - f.api.p50).toFixed(1),
        api_steps_from_create_ms: stepMedians(samples[c].api),
        direct_steps_ms: stepMedians(samples[c].direct),
        cli_steps_ms: stepMedians(samples[c].cli),
      },
    ];
  }),
);
const result = {
  ep: EP_BIN,
  runs: RUNS,
  warmup: WARMUP,
  load_average: { start: load0.map((l) => +l.toFixed(2)), end: load1.map((l) => +l.toFixed(2)) },
  cores: cpus().length,
  clis: report,
};
if (values.json) console.log(JSON.stringify(result, null, 2));
else {
  log(`load average at end: ${load1.map((l) => l.toFixed(2)).join(" ")}`);
  log(
    "\n| CLI | direct p50 / p90 | API p50 / p90 | `ep task submit " +
      "--wait` p50 / p90 | EP overhead (API − direct) | CLI over API |",
  );
  log("|---|---|---|---|---|---|");
  for (const [c, r] of Object.entries(report)) {
    log(
      `| ${c} | ${r.direct.p50} / ${r.direct.p90} | ${r.api.p50} / ${r.api.p90} | ` +
        `${r.cli.p50} / ${r.cli.p90} | ${r.overhead_api_ms} | ${r.overhead_cli_over_api_ms} |`,
    );
  }
  log("\nmedian ms from the create (api) and from the spawn (direct, cli):");
  for (const [c, r] of Object.entries(report)) {
    log(
      `  ${c}: api ${JSON.stringify(r.api_steps_from_create_ms)}; direct ` +
        `${JSON.stringify(r.direct_steps_ms)}; cli ${JSON.stringify(r.cli_steps_ms)}`,
    );
  }
}
if (values.trace) {
  for (const c of clis) {
    const last = samples[c].api.at(-1)!.task!;
    log(`\n${c}: epd's log of ${last.id}, ms from its create:`);
    for (const l of epd.logs)
      if (l.task_id === last.id) log(`  +${Date.parse(String(l.ts)) - last.createdAtMs} ${String(l.msg)}`);
  }
}
await rc.close();
process.exit(0);
