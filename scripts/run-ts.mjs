// Runs a TypeScript file (a bench or a script) on Node 20: bundles it with esbuild
// (dependencies stay external) into a temp file next to it and imports it.
import { build } from "esbuild";
import { rmSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [file, ...args] = process.argv.slice(2);
if (!file) {
  console.error("usage: node scripts/run-ts.mjs <file.ts> [args…]");
  process.exit(2);
}
const out = join(dirname(resolve(file)), `.${basename(file, ".ts")}.${process.pid}.mjs`);
await build({
  entryPoints: [file],
  outfile: out,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  logLevel: "warning",
  banner: {
    js:
      "import { createRequire as __epCreateRequire } from 'node:module'; " +
      "const require = __epCreateRequire(import.meta.url);",
  },
});
process.argv = [process.argv[0], resolve(file), ...args];
const cleanup = () => rmSync(out, { force: true });
process.on("exit", cleanup);
await import(pathToFileURL(out).href);
