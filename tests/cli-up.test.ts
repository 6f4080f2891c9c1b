// ep up: tower + this machine as a node + a local epd, the CLI logged in, signals to both children.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { assertBuilt, ep, EP_BIN } from "./cli-helpers.js";
import { freePort, tempHome, waitFor } from "./harness.js";

/** Gone, or a zombie nobody reaped (PID 1 here does not reap orphans). */
function processGone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].startsWith("Z");
  } catch {
    return true;
  }
}

describe("ep up", () => {
  it("runs the tower and epd, registers the node, logs the CLI in, and stops both on SIGINT", async () => {
    assertBuilt();
    const home = tempHome("ep-cli-up-").dir;
    const port = await freePort();
    const nodeFile = join(home, "node.json");
    const env = { ...process.env, EP_HOME: home, EP_NODE_FILE: nodeFile, EP_BASE_URL: "", EP_TOKEN: "" };
    const child = spawn(process.execPath, [EP_BIN, "up", "--listen", `127.0.0.1:${port}`], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    try {
      await waitFor(() => out.includes("Ctrl-C stops everything") || child.exitCode !== null, 40_000, 50);
      expect(out, err).toContain(`EP is up at http://localhost:${port}`);
      expect(out).toContain(`console:        http://localhost:${port}/ui/`);
      expect(out).toMatch(/one-time login: http:\/\/localhost:\d+\/ui\/login#ticket=\S+/);
      expect(out).toMatch(/one use, valid until .*, 24 h; 'ep ui' prints a fresh link/);
      const creds = join(home, "cli", "credentials.json");
      expect(statSync(creds).mode & 0o777).toBe(0o600);
      expect(JSON.parse(readFileSync(creds, "utf8")).url).toBe(`http://localhost:${port}`);
      expect(JSON.parse(readFileSync(nodeFile, "utf8")).tower_url).toBe(`http://localhost:${port}`);

      // the saved credentials are enough for the next commands
      const cliEnv = { EP_HOME: home, EP_NODE_FILE: nodeFile };
      const domain = await ep(["domain", "create", "one-machine", "--json"], { env: cliEnv });
      expect(domain.code, domain.stderr).toBe(0);
      await waitFor(async () => (await ep(["daemon", "status"], { env: cliEnv })).code === 0, 20_000, 200);
      // doctor is green on a fresh one-machine setup, and never says ok with level error
      const doctor = await ep(["system", "doctor", "--json"], { env: cliEnv });
      expect(doctor.code, doctor.stdout).toBe(0);
      const checks = doctor.json().checks as { ok: boolean; level: string }[];
      expect(checks.filter((c) => c.ok && c.level !== "ok")).toEqual([]);
      expect(checks.filter((c) => !c.ok && c.level === "error")).toEqual([]);
      const nodes = await ep(["node", "ls", "--json"], { env: cliEnv });
      expect(nodes.json().nodes).toHaveLength(1);
      const again = await ep(["up", "--listen", `127.0.0.1:${port}`], { env: cliEnv });
      expect(again.code).toBe(5);
      expect(again.stderr).toMatch(/a tower already answers/);

      // epd's log is where 'ep daemon logs' reads it
      const logs = await ep(["daemon", "logs", "-n", "200"], { env: cliEnv });
      expect(logs.code, logs.stderr).toBe(0);
      // ep ui: a fresh link that logs in
      const ui = await ep(["ui", "--json"], { env: cliEnv });
      expect(ui.code, ui.stderr).toBe(0);
      const ticket = /#ticket=(\S+)/.exec(ui.json().login_link)![1];
      const login = await fetch(`http://127.0.0.1:${port}/auth/session`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ticket }),
      });
      expect(login.status).toBe(200);
      expect(Date.parse(ui.json().expires_at) - Date.now()).toBeGreaterThan(23 * 3_600_000);

      // a task running when Ctrl-C comes
      const domainId = domain.json().domain.id as string;
      await ep(["daemon", "agent", "enroll", "--domain", domainId, "--runtime", "shell", "--name", "up-worker"], {
        env: cliEnv,
      });
      const missionId = (await ep(["mission", "create", "--domain", domainId, "up", "--json"], { env: cliEnv })).json()
        .mission.id as string;
      const task = (
        await ep(["task", "submit", "--mission", missionId, "long", "--command", "sleep 60", "--json"], { env: cliEnv })
      ).json().task.id as string;
      await waitFor(
        async () => (await ep(["task", "get", task, "--json"], { env: cliEnv })).json().task.status === "running",
        20_000,
        200,
      );
    } finally {
      const kids = spawnSync("pgrep", ["-P", String(child.pid)], { encoding: "utf8" })
        .stdout.split("\n")
        .filter(Boolean)
        .map(Number);
      const started = Date.now();
      child.kill("SIGINT");
      await exited;
      const took = Date.now() - started;
      expect(took).toBeLessThan(5000);
      expect(err).toContain("stopping…");
      expect(err).toContain("stopped");
      expect(err).not.toMatch(/retrying|link failed|ECONNREFUSED/);
      expect(kids.length).toBe(2);
      for (const pid of kids) expect(processGone(pid), `child ${pid} left running`).toBe(true);
    }
    expect(existsSync(join(home, "epd", "mgmt.sock"))).toBe(false);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  }, 90_000);
});
