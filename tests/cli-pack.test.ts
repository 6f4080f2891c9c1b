// The published package: `npm pack`, then `npm install -g` of the tarball into a fresh prefix gives
// working ep, epd and ep-tower, and its native modules load. Needs `npm run build` first (dist/ is
// what ships).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { assertBuilt } from "./cli-helpers.js";
import { ROOT, tempHome } from "./harness.js";

/**
 * better-sqlite3's install script (`prebuild-install || node-gyp rebuild`) first looks for a
 * prebuilt binary in a local folder (npm_config_better_sqlite3_local_prebuilds): it is offered the
 * one `npm ci` built for this checkout, so the install still runs the package's own script but does
 * not spend a minute compiling SQLite again. Named for the version and Node ABI it was built for;
 * when the install resolves another version the name does not match and the script compiles, as it
 * does for a user. node-pty has no such hook and is compiled as before.
 */
function localPrebuilds(dir: string): Record<string, string> {
  const pkg = join(ROOT, "node_modules", "better-sqlite3");
  if (!existsSync(join(pkg, "build", "Release", "better_sqlite3.node"))) return {};
  const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")) as { version: string };
  const folder = join(dir, "prebuilds");
  mkdirSync(folder);
  const name =
    `better-sqlite3-v${version}-node-v${process.versions.modules}-` + `${process.platform}-${process.arch}.tar.gz`;
  const tar = spawnSync("tar", ["-czf", join(folder, name), "-C", pkg, "build/Release/better_sqlite3.node"], {
    encoding: "utf8",
  });
  expect(tar.status, tar.stderr).toBe(0);
  return { npm_config_better_sqlite3_local_prebuilds: folder };
}

/** Loads the installed package's better-sqlite3 and node-pty from its own node_modules and uses each once. */
const LOAD_NATIVE = `
const r = require("node:module").createRequire(process.argv[1] + "/package.json");
const db = new (r("better-sqlite3"))(":memory:");
console.log("sqlite " + db.prepare("select sqlite_version() as v").get().v);
const p = r("node-pty").spawn("/bin/sh", ["-c", "echo pty-ok"], {});
let out = "";
p.onData((d) => (out += d));
p.onExit(({ exitCode }) => (console.log(out.trim()), process.exit(exitCode)));
`;

describe("npm pack → npm install -g", () => {
  it("installs working ep, epd and ep-tower from the tarball", () => {
    assertBuilt();
    const tmp = tempHome("ep-cli-pack-");
    // the installed prefix is about 250 MB: removing it takes over 30 s on a loaded machine
    onTestFinished(() => tmp.cleanup(), 180_000);
    const dir = tmp.dir;
    const pack = spawnSync("npm", ["pack", "--pack-destination", dir], { cwd: ROOT, encoding: "utf8" });
    expect(pack.status, pack.stderr).toBe(0);
    const tarball = join(dir, readdirSync(dir).find((f) => f.endsWith(".tgz"))!);
    const prefix = join(dir, "prefix");
    // dependencies come from the npm cache that `npm ci` filled (network only for what is missing)
    const install = spawnSync(
      "npm",
      ["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", tarball],
      {
        encoding: "utf8",
        timeout: 400_000,
        env: { ...process.env, ...localPrebuilds(dir) },
      },
    );
    expect(install.status, install.stderr).toBe(0);
    const installed = join(prefix, "lib", "node_modules", "ep");
    // wabt (5.5 MB) is a dev dependency: the build, tests and benchmarks compile WAT; the default
    // booster ships compiled, so nothing the package runs needs it
    expect(existsSync(join(installed, "node_modules", "wabt")), "wabt installed with the package").toBe(false);
    const native = spawnSync(process.execPath, ["-e", LOAD_NATIVE, installed], { encoding: "utf8", timeout: 20_000 });
    expect(native.status, native.stderr).toBe(0);
    expect(native.stdout).toMatch(/^sqlite \d+\.\d+\.\d+\npty-ok\n$/);
    const bin = join(prefix, "bin");
    for (const [name, expected] of [
      ["ep", /^ep \d+\.\d+\.\d+/],
      ["epd", /^epd \d+\.\d+\.\d+/],
      ["ep-tower", /^ep-tower \d+\.\d+\.\d+/],
    ] as const) {
      const r = spawnSync(join(bin, name), ["--version"], { encoding: "utf8" });
      expect(r.status, `${name}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(expected);
    }
    const help = spawnSync(join(bin, "ep"), ["agent", "cron", "list", "--help"], { encoding: "utf8" });
    expect(help.stdout).toContain("Example:");
    // the installed ep points the daemon unit at the installed epd
    const home = join(dir, "home");
    const unit = spawnSync(join(bin, "ep"), ["daemon", "up", "--unit-only", "--json"], {
      encoding: "utf8",
      env: { ...process.env, EP_HOME: home, XDG_CONFIG_HOME: join(dir, "config") },
    });
    expect(unit.status, unit.stderr).toBe(0);
    const text = readFileSync(JSON.parse(unit.stdout).unit, "utf8");
    expect(text).toContain(`${realpathSync(join(installed, "bin"))}/epd.js run`);
  }, 600_000);
});
