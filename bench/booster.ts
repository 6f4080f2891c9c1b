// Per-call latency the planner booster adds to an MCP tool call, against a no-booster
// baseline measured in the same run (the same call path minus the booster).
//
// Run (Node 20 has no TypeScript loader, so bundle first):
//   npx esbuild bench/booster.ts --bundle --platform=node --format=esm --packages=external \
//     --outfile=dist/bench/booster.mjs && node dist/bench/booster.mjs [--calls 20000]
//
// Target (issue 7): the booster adds <= 0.2 ms p50 per tool call.
import { hrtime } from "node:process";
import { silentLogger } from "../common/log.js";
import { loadBooster, loadBoosterFromBytes, type Booster } from "../daemon/booster/booster.js";
import { loadSchemaPack, validatePayload } from "../daemon/booster/schema-pack.js";
import { compileWat } from "../test-support/wat-compiler.js";

const callsArg = process.argv.indexOf("--calls");
const CALLS = callsArg > 0 ? Number(process.argv[callsArg + 1]) : 20_000;
const WARMUP = 2_000;
const TARGET_P50_MS = 0.2;

const SMALL = {
  domain_id: "dom_01HZX3",
  title: "Rotate the staging certificates",
  description: "Before Friday",
  priority: 2,
};
const LARGE = { ...SMALL, input: { notes: "x".repeat(16 * 1024) } };

interface Stats {
  p50: number;
  p99: number;
  mean: number;
}

function stats(samples: Float64Array): Stats {
  const sorted = Float64Array.from(samples).sort();
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { p50: at(0.5), p99: at(0.99), mean: sorted.reduce((a, b) => a + b, 0) / sorted.length };
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Times `calls` runs of fn, one sample per call, in milliseconds. With `gapMs` the calls
 * are spaced out, so the booster's thread has gone to sleep before each one (the common
 * case in a daemon, where tool calls arrive one by one).
 */
function measure(fn: (i: number) => void, calls = CALLS, gapMs = 0): Stats {
  for (let i = 0; i < Math.min(WARMUP, calls); i++) fn(i);
  const samples = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    if (gapMs > 0) Atomics.wait(pause, 0, 0, gapMs);
    const t0 = hrtime.bigint();
    fn(i);
    samples[i] = Number(hrtime.bigint() - t0) / 1e6;
  }
  return stats(samples);
}

// What the daemon does per call besides the booster: serialize the request it is about to
// send. The baseline keeps that so the difference is the booster alone.
let sink = 0;
function baselineCall(tool: string, args: unknown): void {
  sink += JSON.stringify({ tool, arguments: args }).length;
}

function boosterCall(booster: Booster, tool: string, args: unknown): void {
  const v = booster.validate(tool, args);
  if (v.verdict !== "allow") throw new Error(`unexpected verdict ${v.verdict}`);
  baselineCall(tool, args);
}

const fmt = (ms: number) => `${(ms * 1000).toFixed(1).padStart(7)} µs`;

async function main(): Promise<void> {
  const embedded = await loadBooster(undefined, { log: silentLogger });
  const allowAll = await loadBoosterFromBytes(
    await compileWat(`(module (memory (export "memory") 1)
      (func (export "alloc") (param i32) (result i32) (i32.const 1024))
      (func (export "validate") (param i32 i32) (result i32) (i32.const 0)))`),
    "allow-all",
    { log: silentLogger },
  );
  const pack = loadSchemaPack(undefined, silentLogger);

  const rows: Array<[string, Stats]> = [];
  const spaced = Math.max(100, Math.round(CALLS / 10));
  for (const [label, args, calls, gapMs] of [
    ["small payload (110 B), back to back", SMALL, CALLS, 0],
    ["large payload (16 KiB), back to back", LARGE, CALLS, 0],
    [`small payload, ${spaced} calls 1 ms apart`, SMALL, spaced, 1],
  ] as const) {
    const base = measure(() => baselineCall("create_mission", args), calls, gapMs);
    rows.push([`${label}: baseline (no booster)`, base]);
    rows.push([
      `${label}: + embedded booster`,
      measure(() => boosterCall(embedded, "create_mission", args), calls, gapMs),
    ]);
    rows.push([
      `${label}: + allow-all booster`,
      measure(() => boosterCall(allowAll, "create_mission", args), calls, gapMs),
    ]);
    rows.push([
      `${label}: + schema pack + embedded booster`,
      measure(
        () => {
          if (validatePayload(pack, "create_mission", args)) throw new Error("payload rejected");
          boosterCall(embedded, "create_mission", args);
        },
        calls,
        gapMs,
      ),
    ]);
  }
  await embedded.close();
  await allowAll.close();

  console.log(
    `booster bench: ${CALLS} calls per row (spaced rows: ${spaced}) after up to ` +
      `${WARMUP} warm-up calls, node ${process.version}, ${process.platform}/${process.arch}`,
  );
  console.log(`${"row".padEnd(72)} ${"p50".padStart(10)} ${"p99".padStart(10)} ${"mean".padStart(10)}`);
  for (const [name, s] of rows) console.log(`${name.padEnd(72)} ${fmt(s.p50)} ${fmt(s.p99)} ${fmt(s.mean)}`);

  let failed = false;
  for (let i = 0; i < rows.length; i += 4) {
    const base = rows[i][1];
    for (const [name, s] of rows.slice(i + 1, i + 4)) {
      const added = s.p50 - base.p50;
      const ok = added <= TARGET_P50_MS;
      failed ||= !ok;
      console.log(
        `added p50 ${name.padEnd(72)} ${fmt(added)}  (p99 ` +
          `${fmt(s.p99 - base.p99).trim()})  ${ok ? "ok" : "OVER TARGET"}`,
      );
    }
  }
  console.log(`target: added p50 <= ${TARGET_P50_MS * 1000} µs per call — ${failed ? "FAILED" : "met"}`);
  if (sink < 0) console.log(sink);
  process.exitCode = failed ? 1 : 0;
}

await main();
