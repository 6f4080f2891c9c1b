import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  // the console's own aliases (web/vite.config.ts), for its tests
  resolve: { alias: { "@gen": here("./gen"), "@common": here("./common") } },
  test: {
    include: ["{common,tower,daemon,cli,tests,web}/**/*.test.{ts,tsx}"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
