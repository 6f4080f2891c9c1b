import { execFile } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { resolveExecutable } from "./service-backend.js";
import { createSystemdBackend, renderSystemdUnit } from "./systemd-backend.js";
import { optionalTool } from "../../tests/optional-tools.js";

const sleepPath = resolveExecutable("sleep");
const agent = {
  id: "pm-1",
  name: "pm",
  command: ["sleep", "1000"],
  cwd: "/tmp",
  env: { MODE: '100% "quoted" $HOME' },
};

describe("systemd unit", () => {
  it("restarts on failure after 5 s and reads the environment file from the ep dir", () => {
    const unit = renderSystemdUnit(agent, { epHome: "/home/op/.ep", executable: sleepPath });
    expect(unit).toContain(`ExecStart=${sleepPath} 1000\n`);
    expect(unit).toContain("Restart=on-failure\n");
    expect(unit).toContain("RestartSec=5\n");
    expect(unit).toContain("EnvironmentFile=-/home/op/.ep/epd.env\n");
    expect(unit).toContain('Environment="EP_AGENT_ID=pm-1"\n');
    // % is a specifier and must be doubled; quotes are escaped inside the quoted assignment
    expect(unit).toContain('Environment="MODE=100%% \\"quoted\\" $HOME"\n');
    expect(unit).toContain("WorkingDirectory=/tmp\n");
    expect(unit).toContain("WantedBy=default.target");
  });

  it("quotes arguments with spaces, dollars and percent signs", () => {
    const unit = renderSystemdUnit(
      { id: "x", name: "x", command: ["bash", "-c", 'echo "$HOME" 50%'] },
      { epHome: "/e", executable: "/usr/bin/bash" },
    );
    expect(unit).toContain('ExecStart=/usr/bin/bash -c "echo \\"$$HOME\\" 50%%"\n');
  });

  it("rejects a newline in a setting", () => {
    expect(() =>
      renderSystemdUnit({ ...agent, name: "a\nExecStartPre=/bin/evil" }, { epHome: "/e", executable: sleepPath }),
    ).toThrow(expect.objectContaining({ code: "invalid_argument" }));
  });

  const systemdAnalyze = optionalTool("systemd-analyze", { pkg: "systemd", suite: "systemd unit verify" });
  it.skipIf(systemdAnalyze.skip)(
    "a generated unit passes systemd-analyze verify --user with empty stderr",
    async () => {
      const analyze = systemdAnalyze.require();
      const dir = mkdtempSync(join(tmpdir(), "ep-unit-"));
      const runtime = join(dir, "runtime");
      mkdirSync(runtime, { mode: 0o700 });
      const path = join(dir, "ep-agent-pm-1.service");
      writeFileSync(path, renderSystemdUnit(agent, { epHome: join(dir, "ep"), executable: sleepPath }));
      const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
        // verify needs a user runtime dir even without a running user manager
        execFile(
          analyze,
          ["verify", "--user", path],
          { env: { ...process.env, XDG_RUNTIME_DIR: runtime, HOME: dir } },
          (err, _out, stderr) => resolve({ code: err ? Number(err.code) : 0, stderr: String(stderr) }),
        );
      });
      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
    },
  );
});

/** A fake `systemctl` (vendor CLI) keeping unit state in files: enough to drive the backend's calls. */
function fakeSystemctl(dir: string): { path: string; calls: () => string[] } {
  const path = join(dir, "systemctl");
  const state = join(dir, "state");
  mkdirSync(state);
  writeFileSync(
    path,
    `#!/usr/bin/env bash
echo "$*" >> "${dir}/calls"
[ "$1" = "--user" ] || exit 2
shift
case "$1" in
  show-environment) echo "HOME=$HOME" ;;
  daemon-reload) ;;
  start) echo 4242 > "${state}/$2" ;;
  stop) [ -f "${state}/$2" ] || exit 5; rm -f "${state}/$2" ;;
  is-active) [ -f "${state}/$3" ] ;;
  show) if [ -f "${state}/$5" ]; then cat "${state}/$5"; else echo 0; fi ;;
  *) exit 1 ;;
esac
`,
  );
  chmodSync(path, 0o755);
  return {
    path,
    calls: () => (existsSync(join(dir, "calls")) ? readFileSync(join(dir, "calls"), "utf8").trim().split("\n") : []),
  };
}

describe("systemd backend", () => {
  it("writes the unit, reloads, starts, checks and stops through systemctl --user", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-sd-"));
    const fake = fakeSystemctl(dir);
    const backend = createSystemdBackend({
      unitDir: join(dir, "units"),
      epHome: join(dir, "ep"),
      systemctl: fake.path,
    });
    expect(await backend.isAlive("pm-1")).toBe(false);
    await backend.start(agent);
    const unit = readFileSync(backend.unitPath("pm-1"), "utf8");
    expect(unit).toContain(`EnvironmentFile=-${join(dir, "ep", "epd.env")}`);
    expect(await backend.isAlive("pm-1")).toBe(true);
    expect(await backend.pid("pm-1")).toBe(4242);
    // unchanged unit, already active: no reload, no second start
    await backend.start(agent);
    await backend.stop("pm-1");
    expect(await backend.isAlive("pm-1")).toBe(false);
    expect(await backend.pid("pm-1")).toBeUndefined();
    await backend.stop("pm-1"); // stopping a stopped unit is fine
    await backend.uninstall("pm-1");
    expect(existsSync(backend.unitPath("pm-1"))).toBe(false);
    expect(fake.calls()).toEqual([
      "--user is-active --quiet ep-agent-pm-1.service",
      "--user daemon-reload",
      "--user is-active --quiet ep-agent-pm-1.service",
      "--user start ep-agent-pm-1.service",
      "--user is-active --quiet ep-agent-pm-1.service",
      "--user show -p MainPID --value ep-agent-pm-1.service",
      "--user is-active --quiet ep-agent-pm-1.service",
      "--user stop ep-agent-pm-1.service",
      "--user is-active --quiet ep-agent-pm-1.service",
      "--user show -p MainPID --value ep-agent-pm-1.service",
      "--user stop ep-agent-pm-1.service",
      "--user stop ep-agent-pm-1.service",
      "--user daemon-reload",
    ]);
  });

  it("a missing agent executable fails before any unit is written", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-sd-"));
    const fake = fakeSystemctl(dir);
    const backend = createSystemdBackend({ unitDir: join(dir, "units"), systemctl: fake.path });
    await expect(backend.start({ id: "x", name: "x", command: ["no-such-agent-binary"] })).rejects.toMatchObject({
      code: "runtime_missing",
    });
    expect(fake.calls()).toEqual([]);
  });
});

describe("choosing a backend", () => {
  it("uses systemd when systemctl --user answers, else the process backend", async () => {
    const { chooseServiceBackend } = await import("./choose-backend.js");
    const dir = mkdtempSync(join(tmpdir(), "ep-sd-"));
    const fake = fakeSystemctl(dir);
    expect((await chooseServiceBackend({ systemd: { systemctl: fake.path, unitDir: dir } })).kind).toBe("systemd");
    const failing = join(dir, "systemctl-down");
    writeFileSync(failing, "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n");
    chmodSync(failing, 0o755);
    expect((await chooseServiceBackend({ systemd: { systemctl: failing } })).kind).toBe("process");
    expect((await chooseServiceBackend({ prefer: "process", systemd: { systemctl: fake.path } })).kind).toBe("process");
  });
});
