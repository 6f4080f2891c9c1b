// Runs buf (lint, generate) at a pinned version through npx. buf is not a
// devDependency because its npm package lists optional per-platform binaries that
// not every registry mirror carries, which makes `npm ci` refuse the lock file.
import { spawnSync } from "node:child_process";

export const BUF_VERSION = "1.75.0";

const args = process.argv.slice(2);
const res = spawnSync("npx", ["--yes", `@bufbuild/buf@${BUF_VERSION}`, ...args], { stdio: "inherit" });
process.exit(res.status ?? 1);
