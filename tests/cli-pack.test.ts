// The published package: `npm pack`, then `npm install -g` of the tarball into a fresh prefix gives
// working ep, epd and ep-tower. Needs `npm run build` first (dist/ is what ships).
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { assertBuilt } from "./cli-helpers.js";
import { ROOT, tempHome } from "./harness.js";

describe("npm pack → npm install -g", () => {
  it("installs working ep, epd and ep-tower from the tarball", () => {
    assertBuilt();
    const tmp = tempHome("ep-cli-pack-");
    onTestFinished(() => tmp.cleanup()); // the installed prefix is about 250 MB
    const dir = tmp.dir;
    const pack = spawnSync("npm", ["pack", "--pack-destination", dir], { cwd: ROOT, encoding: "utf8" });
    expect(pack.status, pack.stderr).toBe(0);
    const tarball = join(dir, readdirSync(dir).find((f) => f.endsWith(".tgz"))!);
    const prefix = join(dir, "prefix");
    // dependencies come from the npm cache that `npm ci` filled (network only for what is missing)
    const install = spawnSync("npm", ["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", tarball], { encoding: "utf8", timeout: 400_000 });
    expect(install.status, install.stderr).toBe(0);
    const bin = join(prefix, "bin");
    for (const [name, expected] of [["ep", /^ep \d+\.\d+\.\d+/], ["epd", /^epd \d+\.\d+\.\d+/], ["ep-tower", /^ep-tower \d+\.\d+\.\d+/]] as const) {
      const r = spawnSync(join(bin, name), ["--version"], { encoding: "utf8" });
      expect(r.status, `${name}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(expected);
    }
    const help = spawnSync(join(bin, "ep"), ["agent", "cron", "list", "--help"], { encoding: "utf8" });
    expect(help.stdout).toContain("Example:");
    // the installed ep points the daemon unit at the installed epd
    const home = join(dir, "home");
    const unit = spawnSync(join(bin, "ep"), ["daemon", "up", "--unit-only", "--json"], { encoding: "utf8", env: { ...process.env, EP_HOME: home, XDG_CONFIG_HOME: join(dir, "config") } });
    expect(unit.status, unit.stderr).toBe(0);
    const text = readFileSync(JSON.parse(unit.stdout).unit, "utf8");
    expect(text).toContain(`${realpathSync(join(prefix, "lib", "node_modules", "ep", "bin"))}/epd.js run`);
  }, 600_000);
});
