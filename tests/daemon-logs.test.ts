// ep daemon logs under `ep up` (what `npm start` runs): real tower and epd as ep up's children,
// temp HOME, a free port. epd.log holds epd's lines, and -f prints a line as epd writes it.
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertBuilt, ep, EP_BIN } from "./cli-helpers.js";
import { freePort, tempHome, waitFor } from "./harness.js";

const home = tempHome("ep-daemon-logs-");
let up: ChildProcess | undefined;
let upOut = "";
let upErr = "";
let cliEnv: Record<string, string | undefined>;

beforeAll(async () => {
  assertBuilt();
  const port = await freePort();
  cliEnv = { EP_HOME: home.dir, EP_NODE_FILE: `${home.dir}/node.json`, EP_LOG_LEVEL: undefined, EP_NO_SYSTEMD: "1" };
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, EP_BASE_URL: undefined, EP_TOKEN: undefined, ...cliEnv }))
    if (v !== undefined) env[k] = v;
  up = spawn(process.execPath, [EP_BIN, "up", "--listen", `127.0.0.1:${port}`], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  up.stdout!.on("data", (d: Buffer) => (upOut += d.toString()));
  up.stderr!.on("data", (d: Buffer) => (upErr += d.toString()));
  await waitFor(() => upOut.includes("Ctrl-C stops everything") || up!.exitCode !== null, 40_000, 50);
  expect(upOut, upErr).toContain("daemon:         epd");
}, 60_000);

afterAll(async () => {
  if (up && up.exitCode === null) {
    const exited = new Promise((r) => up!.once("exit", r));
    up.kill("SIGINT");
    await exited;
  }
  home.cleanup();
});

describe("ep daemon logs under ep up", () => {
  it("prints epd's own lines (at info level) while the terminal keeps to warnings", async () => {
    const logs = await ep(["daemon", "logs", "-n", "200"], { env: cliEnv });
    expect(logs.code, logs.stderr).toBe(0);
    const lines = logs.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { msg: string; level: string; component: string });
    expect(lines.map((l) => l.msg)).toContain("epd started");
    expect(lines.every((l) => l.component === "epd")).toBe(true);
    // ep up's terminal stays quiet: info lines go to the file only
    expect(upErr).not.toContain("epd started");
  });

  it("-f prints a line epd writes after it started", async () => {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...process.env, EP_BASE_URL: undefined, EP_TOKEN: undefined, ...cliEnv }))
      if (v !== undefined) env[k] = v;
    const follow = spawn(process.execPath, [EP_BIN, "daemon", "logs", "-n", "1", "-f"], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    follow.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    try {
      await waitFor(() => out.length > 0, 10_000, 50);
      const domain = (await ep(["domain", "create", "logs", "--json"], { env: cliEnv })).json().domain.id as string;
      const enroll = await ep(
        ["daemon", "agent", "enroll", "--domain", domain, "--runtime", "shell", "--name", "logs-worker"],
        { env: cliEnv },
      );
      expect(enroll.code, enroll.stderr).toBe(0);
      const mission = (await ep(["mission", "create", "--domain", domain, "logs", "--json"], { env: cliEnv })).json()
        .mission.id as string;
      const task = (
        await ep(["task", "submit", "--mission", mission, "echo", "--command", "echo hi", "--json"], { env: cliEnv })
      ).json().task.id as string;
      await waitFor(() => out.includes(task) && out.includes("run finished"), 20_000, 50);
      expect(follow.exitCode).toBe(null);
    } finally {
      const exited = new Promise((r) => follow.once("exit", r));
      follow.kill("SIGINT");
      await exited;
    }
  });

  it("refuses a line count that is not a positive integer", async () => {
    for (const bad of ["0", "abc", "-3", "1.5"]) {
      const r = await ep(["daemon", "logs", "-n", bad], { env: cliEnv });
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toMatch(/--lines/);
    }
  });
});
