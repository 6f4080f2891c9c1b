// `npm test`: lint, build, typecheck, then the whole vitest suite; ends with one plain
// summary line ("Tests: N passed, N failed, N skipped") that any CI can read.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const run = (cmd, args, opts = {}) => spawnSync(cmd, args, { stdio: "inherit", ...opts }).status ?? 1;
const bin = (name) => join("node_modules", ".bin", name);

const started = Date.now();
// the layout and lint rules first (a few seconds): scripts/lint.mjs names each finding and the fix
if (run(process.execPath, ["scripts/lint.mjs"]) !== 0) process.exit(1);
if (run(process.execPath, ["scripts/build.mjs"]) !== 0) {
  console.error("build failed");
  process.exit(1);
}
if (run(bin("tsc"), ["--noEmit", "-p", "."]) !== 0) {
  console.error("typecheck failed");
  process.exit(1);
}
if (existsSync("web/tsconfig.json") && run(bin("tsc"), ["--noEmit", "-p", "web"]) !== 0) {
  console.error("typecheck of web/ failed");
  process.exit(1);
}
// bench/peers/ imports the peer job queues from its own node_modules (npm ci --prefix bench/peers)
if (existsSync("bench/peers/node_modules") && run(bin("tsc"), ["--noEmit", "-p", "bench/peers"]) !== 0) {
  console.error("typecheck of bench/peers/ failed");
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), "ep-vitest-"));
const report = join(dir, "report.json");
// Every temporary folder the tests make (homes, sockets, browser profiles) lands under one
// folder of this run, removed at the end unless EP_KEEP_TEST_TMP=1 (to look at a failure).
const scratch = join(dir, "t");
mkdirSync(scratch);
const status = run(
  bin("vitest"),
  ["run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...process.argv.slice(2)],
  {
    env: { ...process.env, TMPDIR: scratch },
  },
);
let passed = 0;
let failed = 0;
let skipped = 0;
let slowest = [];
if (existsSync(report)) {
  const r = JSON.parse(readFileSync(report, "utf8"));
  passed = r.numPassedTests ?? 0;
  failed = (r.numFailedTests ?? 0) + (r.numFailedTestSuites && !r.numFailedTests ? r.numFailedTestSuites : 0);
  skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  slowest = (r.testResults ?? [])
    .map((f) => ({ file: relative(process.cwd(), f.name), s: (f.endTime - f.startTime) / 1000 }))
    .filter((f) => Number.isFinite(f.s))
    .sort((a, b) => b.s - a.s)
    .slice(0, 10);
}
if (process.env.EP_KEEP_TEST_TMP === "1") console.log(`\ntest scratch kept in ${scratch}`);
else {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  } catch (err) {
    console.warn(`could not remove ${dir}: ${err.message}`);
  }
}
if (status !== 0 && failed === 0) failed = 1;
// where the time goes: the files that took longest (first test start to last test end)
if (slowest.length) {
  console.log("\nslowest files:");
  for (const f of slowest) console.log(`${f.s.toFixed(1).padStart(7)} s  ${f.file}`);
}
console.log(`\nsuite took ${Math.round((Date.now() - started) / 1000)} s`);
console.log(`Tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(status === 0 && failed === 0 && passed > 0 ? 0 : 1);
