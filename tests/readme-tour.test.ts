// Issue 16: the README's tour, verbatim, from a fresh HOME against a real `ep up` (tower, epd,
// the CLI logged in by it). `npx ep` is this checkout's ep (a shim on PATH runs bin/ep.js). Each
// step must succeed and show something meaningful; the tour ends with the task's output and the
// events so far.
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { assertBuilt, EP_BIN } from "./cli-helpers.js";
import { freePort, ROOT, tempHome, waitFor } from "./harness.js";

const home = tempHome("ep-tour-");
let up: ReturnType<typeof spawn> | undefined;

afterAll(async () => {
  if (up && up.exitCode === null) {
    up.kill("SIGINT");
    await new Promise((r) => up!.once("exit", r));
  }
  home.cleanup();
});

function tourLines(): string[] {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const block = /<!-- tour:[^>]*-->\s*```sh\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error("README.md has no tour block");
  return block[1]
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
}

describe("the README tour", () => {
  it("runs verbatim from a fresh HOME and ends with the task's output and the events", async () => {
    assertBuilt();
    const port = await freePort();
    const bin = join(home.dir, "bin");
    mkdirSync(bin);
    // `npx ep …` in the clone is bin/ep.js
    writeFileSync(
      join(bin, "npx"),
      `#!/bin/sh\n[ "$1" = ep ] && shift && exec ${process.execPath} ${EP_BIN} "$@"\nexec npx "$@"\n`,
    );
    chmodSync(join(bin, "npx"), 0o755);
    const env = {
      ...process.env,
      HOME: home.dir,
      EP_HOME: join(home.dir, ".ep"),
      EP_NODE_FILE: join(home.dir, ".ep", "node.json"),
      EP_BASE_URL: "",
      EP_TOKEN: "",
      PATH: `${bin}:${process.env.PATH}`,
    };
    up = spawn(process.execPath, [EP_BIN, "up", "--listen", `127.0.0.1:${port}`], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    up.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    up.stderr!.resume();
    await waitFor(() => out.includes("Ctrl-C stops everything"), 40_000, 50);
    // the CLI finds this tower through the credentials ep up saved
    const lines = tourLines();
    expect(lines.length).toBeGreaterThanOrEqual(6);
    const outputs: string[] = [];
    for (const line of lines) {
      const r = spawnSync("sh", ["-c", line], { env, encoding: "utf8", timeout: 60_000 });
      expect(r.status, `${line}\n${r.stdout}\n${r.stderr}`).toBe(0);
      expect(r.stdout.trim().length, `${line} printed nothing`).toBeGreaterThan(0);
      outputs.push(r.stdout);
    }
    const all = outputs.join("\n");
    expect(all).toMatch(/created domain dom_\w+ \(demo\)/);
    expect(outputs.find((_o, i) => lines[i].includes("task submit"))).toMatch(/succeeded[\s\S]*hi from EP/);
    expect(outputs.find((_o, i) => lines[i].includes("events tail"))).toMatch(/task\.(succeeded|claimed)/);
    expect(outputs.find((_o, i) => lines[i].includes("ep ui"))).toMatch(/login#ticket=tkt_/);
  }, 120_000);
});
