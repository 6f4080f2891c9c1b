import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { configDefaults, defineConfig } from "vitest/config";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/**
 * Files that run alone, one at a time, after the rest of the suite: what they judge is the
 * machine's time or memory (a rate, an RSS bound, a latency), or they load both cores themselves
 * and would starve a neighbour. Everything else runs in parallel first.
 */
const SERIAL = [
  "tests/delivery-restarts.test.ts", // tasks/s after restarts against the rate before: a load test
  "tests/slow-consumers.test.ts", // the tower's RSS against its baseline
  "tests/epd-output-memory.test.ts", // epd's peak RSS against its idle RSS
  "tests/real-cli*.test.ts", // the real agent CLIs: heavy processes, several at a time per test
  "tests/cli-pack.test.ts", // npm pack and npm install -g: compiles node-pty
];

// Vitest's default is one worker less than the cores (one worker on a 2-core machine); the files
// here mostly wait on child processes, so the parallel part runs at least two at a time.
// EP_TEST_WORKERS overrides it (EP_TEST_WORKERS=1 runs everything one file at a time).
const workers = Number(process.env.EP_TEST_WORKERS) || Math.max(2, availableParallelism() - 1);

export default defineConfig({
  // the console's own aliases (web/vite.config.ts), for its tests
  resolve: { alias: { "@gen": here("./gen"), "@common": here("./common") } },
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: {
          name: "parallel",
          include: ["{common,tower,daemon,cli,tests,web}/**/*.test.{ts,tsx}"],
          exclude: [...configDefaults.exclude, ...SERIAL],
          maxWorkers: workers,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "serial",
          include: SERIAL,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
