// Builds the console into dist/web, served by the tower at /ui/ (tower/edges/ui/).
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  root: here("."),
  base: "/ui/",
  publicDir: here("./public"),
  resolve: { alias: { "@gen": here("../gen"), "@common": here("../common") } },
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir: here("../dist/web"),
    emptyOutDir: true,
    target: "es2022",
    // the tower's CSP allows no inline script, so no injected polyfill
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    chunkSizeWarningLimit: 600,
  },
  logLevel: "warn",
});
