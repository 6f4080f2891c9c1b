// Bundles each entry point with esbuild; dependencies stay external (node_modules).
import { build } from "esbuild";
import { existsSync } from "node:fs";

const entries = {
  "tower/main": "tower/main.ts",
  "daemon/main": "daemon/main.ts",
  "cli/main": "cli/main.ts",
};
const entryPoints = Object.fromEntries(Object.entries(entries).filter(([, f]) => existsSync(f)));

await build({
  entryPoints,
  outdir: "dist",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: "linked",
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
  logLevel: "warning",
  banner: { js: "import { createRequire as __epCreateRequire } from 'node:module'; const require = __epCreateRequire(import.meta.url);" },
});

// The web console (web/ → dist/web, served at /ui/), built by Vite's JS API.
if (existsSync("web/vite.config.ts")) {
  const { build: viteBuild } = await import("vite");
  await viteBuild({ configFile: "web/vite.config.ts", logLevel: "warn" });
}

// The interactive console bundled with Ink inlined (dist/cli/tui.js), for a fast first frame.
await import("../cli/build-tui.mjs");
