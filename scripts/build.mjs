// Bundles each entry point with esbuild. The tower and epd share their chunks and load their
// dependencies from node_modules. The CLI is built on its own with the protocol libraries inlined
// (Connect, protobuf-es, the SSE and TOML parsers): node's loader spends more on their ~200 files
// than on compiling one bundle, and every `ep` command pays it (docs/PERFORMANCE.md, agent overhead).
import { build } from "esbuild";
import { existsSync } from "node:fs";

const common = {
  outdir: "dist",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: "linked",
  splitting: true,
  logLevel: "warning",
  banner: {
    js:
      "import { createRequire as __epCreateRequire } from 'node:module'; " +
      "const require = __epCreateRequire(import.meta.url);",
  },
};
const present = (entries) => Object.fromEntries(Object.entries(entries).filter(([, f]) => existsSync(f)));

await build({
  ...common,
  entryPoints: present({ "tower/main": "tower/main.ts", "daemon/main": "daemon/main.ts" }),
  packages: "external",
  chunkNames: "chunks/[name]-[hash]",
});

/** Packages the CLI bundle carries itself; the rest (Ink and React for the TUI fallback, ws) stay in node_modules. */
const CLI_INLINED = /^(@bufbuild\/protobuf|@connectrpc\/connect(-node)?|eventsource-parser|smol-toml)(\/|$)/;
await build({
  ...common,
  entryPoints: present({ "cli/main": "cli/main.ts" }),
  chunkNames: "cli/chunks/[name]-[hash]",
  plugins: [
    {
      name: "cli-externals",
      setup(b) {
        b.onResolve({ filter: /^[^./]/ }, (a) =>
          CLI_INLINED.test(a.path) || a.path.startsWith("node:") ? undefined : { path: a.path, external: true },
        );
      },
    },
  ],
});

// The web console (web/ → dist/web, served at /ui/), built by Vite's JS API.
if (existsSync("web/vite.config.ts")) {
  const { build: viteBuild } = await import("vite");
  await viteBuild({ configFile: "web/vite.config.ts", logLevel: "warn" });
}

// The interactive console bundled with Ink inlined (dist/cli/tui.js), for a fast first frame.
await import("../cli/build-tui.mjs");
