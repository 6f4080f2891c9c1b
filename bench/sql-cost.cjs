// The CPU each SQLite statement costs this process, by statement (issue 40's breakdown):
//   node -r ./bench/sql-cost.cjs scripts/run-ts.mjs bench/<bench>.ts …
// Wraps better-sqlite3's Statement run/all/get with process.cpuUsage() around each call (~2 µs
// of its own per call: compare figures only between runs that both carry it). A bench that knows
// its windows calls globalThis.__epSqlCost.start() and .stop() (bench/pipeline.ts does, per set);
// otherwise the whole run is counted and printed to stderr at exit.
"use strict";
const Database = require(require.resolve("better-sqlite3", { paths: [process.cwd()] }));
const proto = Object.getPrototypeOf(new Database(":memory:").prepare("SELECT 1"));
const stats = new Map();
let on = true;
let windowed = false;
for (const m of ["run", "all", "get"]) {
  const orig = proto[m];
  proto[m] = function (...args) {
    if (!on) return orig.apply(this, args);
    const c0 = process.cpuUsage();
    try {
      return orig.apply(this, args);
    } finally {
      const c = process.cpuUsage(c0);
      const key = `${m} ${this.source.replace(/\s+/g, " ").slice(0, 120)}`;
      const s = stats.get(key) ?? { calls: 0, us: 0 };
      s.calls++;
      s.us += c.user + c.system;
      stats.set(key, s);
    }
  };
}
/** The statements counted since start(), costliest first, per `n` (tasks): [calls/n, CPU ms/n, statement]. */
function table(n) {
  return [...stats.entries()]
    .sort((a, b) => b[1].us - a[1].us)
    .map(([k, s]) => `${(s.calls / n).toFixed(3).padStart(8)} ${(s.us / 1000 / n).toFixed(4).padStart(8)}  ${k}`);
}
globalThis.__epSqlCost = {
  start() {
    windowed = true;
    stats.clear();
    on = true;
  },
  stop(n) {
    on = false;
    return ["   calls  cpu ms  (per task)", ...table(n)].join("\n");
  },
};
process.on("exit", () => {
  if (!windowed && stats.size) process.stderr.write(`sql cost, pid ${process.pid}, whole run (calls, cpu ms):\n${table(1).join("\n")}\n`);
});
