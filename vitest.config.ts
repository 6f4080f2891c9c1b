import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{common,tower,daemon,cli,tests,web}/**/*.test.{ts,tsx}"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
