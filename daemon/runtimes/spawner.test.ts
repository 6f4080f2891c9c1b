// epd's spawn helper (spawner.ts): what a run gets through it, what a stranger on its socket
// gets, and what a run reports when the helper dies under it. The runtimes' own behaviour
// through it (exit codes, cancel, timeouts, process groups) is in shell.test.ts and
// cancel.test.ts, which run each case both ways.
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../common/log.js";
import { waitForValue } from "../../test-support/wait.js";
import { createSpawner, type Spawned, type Spawner } from "./spawner.js";

let dir: string;
let spawner: Spawner;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "ep-spawner-"));
  spawner = createSpawner(join(dir, "spawn.sock"), silentLogger);
});
afterEach(async () => {
  await spawner.close();
  await rm(dir, { recursive: true, force: true });
});

interface Ended {
  pid: number | undefined;
  stdout: string;
  stderr: string;
  exit?: [number | null, NodeJS.Signals | null];
  error?: NodeJS.ErrnoException;
}

function collect(child: Spawned): Promise<Ended> {
  const out: Ended = { pid: undefined, stdout: "", stderr: "" };
  child.stdout.setEncoding("utf8").on("data", (c: string) => (out.stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (out.stderr += c));
  child.on("spawn", () => (out.pid = child.pid));
  child.on("exit", (code, signal) => (out.exit = [code, signal]));
  child.on("error", (err) => (out.error = err));
  return new Promise((resolve) => child.on("close", () => resolve(out)));
}

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
const helperPid = (): number | undefined => {
  const children = readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, "utf8").split(" ");
  return children
    .map(Number)
    .find((pid) => pid > 0 && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(join(dir, "spawn.sock")));
};

describe("the spawn helper", () => {
  it("runs the command in its cwd and env, stdout and stderr apart, with its exit status and pid", async () => {
    const r = await collect(
      spawner.spawn("/bin/sh", ["-c", 'echo "out $X"; pwd; echo err >&2; exit 3'], {
        cwd: dir,
        env: { ...env, X: "y" },
      }),
    );
    expect(r).toMatchObject({ stdout: `out y\n${dir}\n`, stderr: "err\n", exit: [3, null] });
    expect(r.pid).toBeGreaterThan(1);
    expect(r.error).toBeUndefined();
  });

  it("the run leads its own process group, and is not the helper's own process", async () => {
    const r = await collect(spawner.spawn("/bin/sh", ["-c", "ps -o pgid= -p $$; echo $PPID"], { env }));
    const [pgid, ppid] = r.stdout.trim().split(/\s+/).map(Number);
    expect(pgid).toBe(r.pid);
    expect(ppid).toBe(helperPid());
    expect(ppid).not.toBe(process.pid);
  });

  it("a signal that ends the run is its exit status", async () => {
    const r = await collect(spawner.spawn("/bin/sh", ["-c", "kill -TERM $$"], { env }));
    expect(r.exit).toEqual([null, "SIGTERM"]);
  });

  it("an executable that is not there is an ENOENT error, and the run closes", async () => {
    const r = await collect(spawner.spawn(join(dir, "no-such-cli"), [], { env }));
    expect(r.error).toMatchObject({ code: "ENOENT" });
    expect(r.pid).toBeUndefined();
  });

  it("runs at once keep their own output", async () => {
    const runs = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        collect(spawner.spawn("/bin/sh", ["-c", `echo run-${i}; echo e${i} >&2`], { env })),
      ),
    );
    runs.forEach((r, i) => expect(r).toMatchObject({ stdout: `run-${i}\n`, stderr: `e${i}\n`, exit: [0, null] }));
  });

  it(
    "a connection to spawn.sock without a run's token, " + "or with a header too long, is dropped; runs go on",
    async () => {
      await collect(spawner.spawn("/bin/true", [], { env })); // the socket is there from the first run
      const dropped = (bytes: string) =>
        new Promise<boolean>((resolve) => {
          const s = connect(join(dir, "spawn.sock"), () => s.write(bytes));
          s.on("close", () => resolve(true));
          s.on("error", () => undefined);
        });
      expect(await dropped("0123456789abcdef01234567" + "1\nforged output\n")).toBe(true);
      expect(await dropped("x".repeat(100))).toBe(true);
      const r = await collect(spawner.spawn("/bin/sh", ["-c", "echo still"], { env }));
      expect(r).toMatchObject({ stdout: "still\n", exit: [0, null] });
    },
  );

  it("the helper killed under a run: the run reports the helper's end; the next run starts a new helper", async () => {
    const child = spawner.spawn("/bin/sh", ["-c", "echo started; sleep 0.5; echo after"], { env });
    const ended = collect(child);
    const first = await waitForValue(() => helperPid());
    await waitForValue(() => child.pid);
    process.kill(first, "SIGKILL");
    const r = await ended;
    expect(r.error).toMatchObject({ code: "ESPAWNHELPER" });
    expect(r.error!.message).toMatch(/spawn helper exited/);
    const next = await collect(spawner.spawn("/bin/sh", ["-c", "echo next"], { env }));
    expect(next).toMatchObject({ stdout: "next\n", exit: [0, null] });
    expect(helperPid()).not.toBe(first);
  });

  it("after close, a spawn fails at once", async () => {
    await spawner.close();
    const r = await collect(spawner.spawn("/bin/true", [], { env }));
    expect(r.error).toMatchObject({ code: "ECANCELED" });
  });
});
