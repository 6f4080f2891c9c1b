// Bundles the interactive console with Ink, React and the Connect clients inlined into
// dist/cli/tui.js: loading Ink from node_modules file by file costs more than node's own start.
// `ep` loads dist/cli/tui.js when present, else the split chunk from scripts/build.mjs.
// Run after scripts/build.mjs: node cli/build-tui.mjs
import { build } from "esbuild";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const stubDir = join(root, "node_modules", ".cache", "ep-tui");
mkdirSync(stubDir, { recursive: true });
// Ink imports React DevTools only when DEV=true; the release console never does
const stub = join(stubDir, "devtools-stub.js");
writeFileSync(stub, "export default { connectToDevTools() {} };\n");

await build({
  entryPoints: { tui: join(root, "cli", "tui", "run.tsx") },
  outdir: join(root, "dist", "cli"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  minify: true,
  // the tower client is a separate chunk, loaded after the first frame
  splitting: true,
  chunkNames: "tui-chunks/[name]-[hash]",
  jsx: "automatic",
  alias: { "react-devtools-core": stub },
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "warning",
  banner: {
    js:
      "import { createRequire as __epCreateRequire } from 'node:module'; " +
      "const require = __epCreateRequire(import.meta.url);",
  },
});
