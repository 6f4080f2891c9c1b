// SIGTERM ends epd through its own shutdown whenever it comes, also while epd is still starting
// (before, the handlers were installed after the start, so a signal during the start killed the
// process outright: a cron fire of the first tick lost its history entry, tests/cron-daemon's
// restart case flaked on it). A signal in Node's own start-up, before any of epd's code runs, still
// has the default effect; that window is tens of milliseconds and holds nothing to clean up.
import { spawn } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { jsonRpcCall } from "../daemon/mgmt/client.js";
import { waitFor } from "./harness.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBinaries, FIXTURES, towerWithMission, type TowerSetup } from "./epd-harness.js";

const closers: (() => unknown)[] = [];
let s: TowerSetup;
beforeAll(async () => {
  await buildBinaries();
  s = await towerWithMission("ep-sigterm-", (fn) => closers.push(fn));
}, 60_000);
afterAll(async () => {
  for (const fn of closers.reverse()) await fn();
});

describe("epd and SIGTERM", () => {
  /** Spawns epd, waits for `when`, sends SIGTERM; the exit as code and signal. */
  async function termWhen(when: "starting" | "started") {
    const { epd } = await buildBinaries();
    // a socket left by an earlier case would look like this start
    rmSync(join(s.home, "epd", "mgmt.sock"), { force: true });
    const child = spawn(process.execPath, [epd, "run", "--backend-url", s.tower.url], {
      env: {
        ...process.env,
        EP_HOME: s.home,
        EP_NODE_FILE: s.nodeFile,
        EP_LOG_LEVEL: "error",
        PATH: `${FIXTURES}:${process.env.PATH}`,
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.once("exit", (code, signal) => r({ code, signal })),
    );
    const mgmt = join(s.home, "epd", "mgmt.sock");
    // the mgmt socket appears in the middle of the start (the link, cron and the rest come after it)
    if (when === "starting") await waitFor(() => existsSync(mgmt), 15_000, 2);
    else
      await waitFor(
        async () =>
          (await jsonRpcCall<{ link: string }>(mgmt, "daemon.status").catch(() => undefined))?.link === "connected",
        15_000,
      );
    child.kill("SIGTERM");
    return { exit: await exited, stderr };
  }

  it("exits 0 through its shutdown when the signal comes while it is starting", async () => {
    const { exit, stderr } = await termWhen("starting");
    expect(exit, stderr).toEqual({ code: 0, signal: null });
  }, 30_000);

  it("exits 0 through its shutdown once started, and removes its socket", async () => {
    const { exit, stderr } = await termWhen("started");
    expect(exit, stderr).toEqual({ code: 0, signal: null });
    expect(existsSync(join(s.home, "epd", "mgmt.sock"))).toBe(false);
  }, 30_000);
});
