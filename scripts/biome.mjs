// Runs the Biome CLI of package.json's devDependencies (the binary of this platform's
// @biomejs/cli-* package, which npm installs from the lock file) with the tree's biome.json.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";

/** Runs `biome …args` in the current folder; returns its exit status. */
export function biome(args, opts = {}) {
  let bin;
  try {
    bin = createRequire(import.meta.url).resolve("@biomejs/biome/bin/biome");
  } catch {
    console.error("biome is not installed: run `npm ci` (it is a devDependency, @biomejs/biome)");
    return 1;
  }
  return spawnSync(process.execPath, [bin, ...args], { stdio: "inherit", ...opts }).status ?? 1;
}
