// The built `ep` with a real epd: daemon up/status/logs/down without systemd, mgmt commands,
// the generated systemd unit, the booster record, and doctor's failing checks and --fix.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertBuilt, ep } from "./cli-helpers.js";
import { freePort, startTower, tempHome, type TestTower } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const systemdAnalyze = optionalTool("systemd-analyze", { pkg: "systemd", suite: "cli-daemon (systemd unit check)" });

let t: TestTower;
let home: string;
let env: Record<string, string>;

beforeAll(async () => {
  assertBuilt();
  home = tempHome("ep-cli-daemon-").dir;
  t = await startTower();
  env = {
    EP_HOME: home,
    EP_BASE_URL: t.url,
    EP_TOKEN: t.adminToken,
    EP_NODE_FILE: join(home, "node.json"),
    EP_NO_SYSTEMD: "1",
    EP_LOG_LEVEL: "debug",
  };
});
afterAll(async () => {
  await ep(["daemon", "down"], { env, timeoutMs: 60_000 }).catch(() => undefined);
  await t?.close();
});

describe("ep daemon and the mgmt commands with a real epd", () => {
  it("says clearly that the daemon is not running", async () => {
    const r = await ep(["agent", "cron", "list"], { env });
    expect(r.code).toBe(7);
    expect(r.stderr).toMatch(/ep: the daemon is not running: no socket at .*mgmt\.sock/);
    expect(r.stderr).toMatch(/hint: start it with 'ep daemon up'/);
    const st = await ep(["daemon", "status"], { env });
    expect(st.code).toBe(7);
  });

  it("starts epd detached, talks to it over mgmt.sock, shows its log and stops it", async () => {
    expect((await ep(["agent", "node", "register", "--hostname", "cli-node"], { env })).code).toBe(0);
    const up = await ep(["daemon", "up", "--json"], { env, timeoutMs: 30_000 });
    expect(up.code, up.stderr).toBe(0);
    const started = up.json();
    expect(started).toMatchObject({ manager: "process" });
    expect(readFileSync(join(home, "epd", "epd.pid"), "utf8").trim()).toBe(String(started.pid));
    expect(statSync(join(home, "epd.env")).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(home, "epd.env"), "utf8")).toContain(`EP_HOME=${home}`);

    const again = await ep(["daemon", "up"], { env });
    expect(again.stdout).toMatch(/already running/);

    const st = await ep(["daemon", "status", "--json"], { env });
    expect(st.code).toBe(0);
    expect(st.json()).toMatchObject({ running: true, hostname: "cli-node", pid: started.pid });

    const cron = await ep(["agent", "cron", "list", "--json"], { env });
    expect(cron.code, cron.stderr).toBe(0);
    expect(cron.json()).toEqual({ jobs: [], problems: [] });
    expect((await ep(["agent", "cron", "list"], { env })).stdout).toContain("(none)");
    const describeMissing = await ep(["agent", "cron", "describe", "nightly"], { env });
    expect(describeMissing.code).toBe(4);
    expect(describeMissing.stderr).toMatch(/^ep: daemon: /);

    const domainId = (await ep(["domain", "create", "cli-daemon", "--json"], { env })).json().domain.id;
    const enrolled = await ep(
      [
        "daemon",
        "agent",
        "enroll",
        "--domain",
        domainId,
        "--runtime",
        "shell",
        "--capability",
        "bash",
        "--name",
        "builder",
        "--json",
      ],
      { env },
    );
    expect(enrolled.code, enrolled.stderr).toBe(0);
    expect(enrolled.json().agent).toMatchObject({ name: "builder", runtime: "shell", domain_id: domainId });
    const agents = await ep(["agent", "ls", "--domain", domainId, "--json"], { env });
    expect(agents.json().agents).toEqual([expect.objectContaining({ name: "builder" })]);

    const bad = await ep(["daemon", "agent", "enroll", "--domain", domainId, "--runtime", "no-such-runtime"], { env });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/^ep: daemon: /);

    const sup = await ep(["agent", "supervise", "list", "--json"], { env });
    expect(sup.code, sup.stderr).toBe(0);
    const signal = await ep(["agent", "signal", "ghost", "hello"], { env });
    expect(signal.code).toBe(4);

    const logs = await ep(["daemon", "logs", "-n", "5"], { env });
    expect(logs.code).toBe(0);
    expect(logs.stdout.trim().split("\n").length).toBeLessThanOrEqual(6);

    const down = await ep(["daemon", "down"], { env, timeoutMs: 60_000 });
    expect(down.stdout).toContain("epd stopped");
    expect(existsSync(join(home, "epd", "epd.pid"))).toBe(false);
    expect((await ep(["agent", "cron", "list"], { env })).code).toBe(7);
  }, 120_000);

  it.skipIf(systemdAnalyze.skip)("writes a systemd user unit that systemd-analyze accepts", async () => {
    const analyze = systemdAnalyze.require();
    const cfg = tempHome("ep-cli-unit-").dir;
    const r = await ep(["daemon", "up", "--unit-only", "--json"], { env: { ...env, XDG_CONFIG_HOME: cfg } });
    expect(r.code, r.stderr).toBe(0);
    const unit = join(cfg, "systemd", "user", "epd.service");
    expect(r.json().unit).toBe(unit);
    const text = readFileSync(unit, "utf8");
    expect(text).toContain("Restart=on-failure");
    expect(text).toContain("RestartSec=5");
    expect(text).toContain(`EnvironmentFile=${join(home, "epd.env")}`);
    expect(text).toMatch(/^ExecStart=\/\S+ \/\S+\/bin\/epd\.js run \$EPD_ARGS$/m);
    // the user manager needs a runtime directory; containers and CI have no login session that makes one
    const runtimeDir = process.env.XDG_RUNTIME_DIR ?? tempHome("ep-cli-run-").dir;
    const v = spawnSync(analyze, ["verify", "--user", unit], {
      encoding: "utf8",
      env: { ...process.env, XDG_CONFIG_HOME: cfg, XDG_RUNTIME_DIR: runtimeDir },
    });
    expect(v.error, "systemd-analyze did not run").toBeUndefined();
    expect(v.stderr).toBe("");
    expect(v.status).toBe(0);
  });

  it("records a booster for epd, and refuses a file that is not Wasm", async () => {
    const wasm = join(home, "b.wasm");
    writeFileSync(wasm, Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]));
    const r = await ep(["daemon", "--booster-wasm", wasm], { env });
    expect(r.code, r.stderr).toBe(0);
    const envFile = readFileSync(join(home, "epd.env"), "utf8");
    expect(envFile).toContain(`EP_BOOSTER_WASM=${wasm}`);
    expect(envFile).toContain(`EPD_ARGS="--booster-wasm ${wasm}"`);
    writeFileSync(join(home, "not.wasm"), "hello");
    const bad = await ep(["daemon", "--booster-wasm", join(home, "not.wasm")], { env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/not a WebAssembly module/);
    expect((await ep(["daemon"], { env })).code).toBe(2);
  });
});

describe("ep system doctor", () => {
  it("reports each failing check with a hint: tower down, identity missing, stale socket", async () => {
    const h = tempHome("ep-cli-doctor-").dir;
    const sock = join(h, "epd", "mgmt.sock");
    // a socket file nobody listens on: what a killed daemon leaves behind
    const { mkdirSync } = await import("node:fs");
    mkdirSync(join(h, "epd"), { recursive: true });
    // a process that listened and was killed: its socket file stays, nobody answers
    spawnSync(process.execPath, [
      "-e",
      `require("net").createServer().listen(${JSON.stringify(sock)}, () => process.kill(process.pid, "SIGKILL"))`,
    ]);
    expect(existsSync(sock)).toBe(true);

    const r = await ep(["system", "doctor", "--json"], {
      env: { EP_HOME: h, EP_BASE_URL: `http://127.0.0.1:${await freePort()}`, EP_NODE_FILE: join(h, "missing.json") },
    });
    expect(r.code).toBe(1);
    const report = r.json();
    const byName = Object.fromEntries(report.checks.map((c: { check: string }) => [c.check, c]));
    expect(report.ok).toBe(false);
    expect(byName.tower_health).toMatchObject({ ok: false, hint: expect.stringContaining("start the tower") });
    expect(byName.node_identity).toMatchObject({ ok: false, hint: expect.stringContaining("ep agent node register") });
    expect(byName.socket_mgmt).toMatchObject({
      ok: false,
      detail: expect.stringContaining("stale socket"),
      hint: expect.stringContaining("ep daemon up"),
    });
    expect(byName.runtime_bash).toMatchObject({ ok: true });
    for (const c of report.checks) expect(c.ok || typeof c.hint === "string").toBe(true);
    // human output names the same failures
    const human = await ep(["system", "doctor"], {
      env: { EP_HOME: h, EP_BASE_URL: `http://127.0.0.1:${await freePort()}`, EP_NODE_FILE: join(h, "missing.json") },
    });
    expect(human.stdout).toMatch(/FAIL\s+tower_health/);
    expect(human.stdout).toMatch(/hint: /);
  });

  it("--fix creates EP_HOME and EP_SKILLS_HOME and seeds a stable agent_id", async () => {
    const h = join(tempHome("ep-cli-fix-").dir, "home");
    const denv = { ...env, EP_HOME: h, EP_TOKEN: t.adminToken };
    const before = (await ep(["system", "doctor", "--json"], { env: denv })).json();
    const failing = before.checks.filter((c: { ok: boolean }) => !c.ok).map((c: { check: string }) => c.check);
    expect(failing).toEqual(expect.arrayContaining(["ep_home", "skills_home", "agent_id"]));
    const fixed = (await ep(["system", "doctor", "--fix", "--json"], { env: denv })).json();
    expect(fixed.fixed).toHaveLength(3);
    const after = Object.fromEntries(fixed.checks.map((c: { check: string; ok: boolean }) => [c.check, c.ok]));
    expect(after).toMatchObject({
      ep_home: true,
      skills_home: true,
      agent_id: true,
      tower_health: true,
      clock_skew: true,
      matrix: true,
    });
    expect(existsSync(join(h, "skills"))).toBe(true);
    const id = readFileSync(join(h, "agent_id"), "utf8");
    expect(id).toMatch(/^agt_local_[0-9a-f]{16}\n$/);
    await ep(["system", "doctor", "--fix"], { env: denv });
    expect(readFileSync(join(h, "agent_id"), "utf8")).toBe(id);
  });
});
