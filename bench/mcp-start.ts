// How long a per-run `epd mcp` (the stdio MCP server vendorA_code's runs are configured with)
// takes to answer an agent: spawn → `initialize` answered → `tools/list` answered, against a
// real tower (bundled, child process). claude waits for it before its first turn, so this is
// part of bench/agent-overhead.ts's claude overhead (issue 34).
//   node scripts/run-ts.mjs bench/mcp-start.ts [--runs 10]
import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { buildBinaries, registerNode, spawnTowerProcess } from "../tests/epd-harness.js";
import { tempHome } from "../tests/harness.js";
import { pct } from "./figures.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "10" } } });
const RUNS = Number(values.runs);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error(`--runs must be a positive integer (got ${values.runs})`);
const load0 = loadavg()[0];
const home = tempHome("ep-bench-mcp-start-");
const tower = await spawnTowerProcess(home.dir);
const nodeFile = join(home.dir, "node.json");
await registerNode(tower.url, tower.adminToken, nodeFile);
const { epd } = await buildBinaries();

const rpc = (id: number | undefined, method: string, params?: object) =>
  `${JSON.stringify({ jsonrpc: "2.0", ...(id !== undefined ? { id } : {}), method, ...(params ? { params } : {}) })}\n`;

/** One server's start: ms to its initialize answer and to its tools/list answer. */
async function once(): Promise<{ initialize: number; toolsList: number }> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [epd, "mcp"], {
    env: { ...process.env, EP_NODE_FILE: nodeFile, EP_BASE_URL: tower.url, EP_HOME: home.dir },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const answers: number[] = [];
  let buf = "";
  await new Promise<void>((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`epd mcp exited ${code}`)));
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      buf += d;
      const lines = buf.split("\n");
      buf = lines.pop()!;
      for (const _ of lines) answers.push(performance.now() - t0);
      if (answers.length === 1 && lines.length)
        child.stdin.write(rpc(undefined, "notifications/initialized") + rpc(2, "tools/list"));
      if (answers.length >= 2) resolve();
    });
    child.stdin.write(
      rpc(1, "initialize", {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "bench", version: "0" },
      }),
    );
  });
  child.removeAllListeners("exit");
  child.kill();
  return { initialize: answers[0], toolsList: answers[1] };
}

const runs: { initialize: number; toolsList: number }[] = [];
await once(); // warm-up: the page cache
for (let i = 0; i < RUNS; i++) runs.push(await once());
console.log(
  JSON.stringify({
    runs: RUNS,
    initialize_ms: {
      p50: pct(
        runs.map((r) => r.initialize),
        50,
      ),
      p90: pct(
        runs.map((r) => r.initialize),
        90,
      ),
    },
    tools_list_ms: {
      p50: pct(
        runs.map((r) => r.toolsList),
        50,
      ),
      p90: pct(
        runs.map((r) => r.toolsList),
        90,
      ),
    },
    load_average_1m: { before: +load0.toFixed(2), after: +loadavg()[0].toFixed(2) },
  }),
);
await tower.stop();
home.cleanup();
process.exit(0);
