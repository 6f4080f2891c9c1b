import { waitFor } from "../../test-support/wait.js";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createProcessBackend } from "./process-backend.js";
import type { ServiceBackend } from "./service-backend.js";

function pidRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

const backends: ServiceBackend[] = [];
afterEach(async () => {
  await Promise.all(backends.splice(0).map((b) => b.close()));
});

describe("process backend", () => {
  it("starts a detached process group, reports it alive, and stops the whole group", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-proc-"));
    const backend = createProcessBackend({ stateDir: join(dir, "state"), logDir: join(dir, "logs") });
    backends.push(backend);
    const agent = {
      id: "worker-1",
      name: "worker",
      command: ["bash", "-c", "echo hello $EP_AGENT_ID $GREETING; sleep 1000 & wait"],
      env: { GREETING: "hi" },
    };
    await backend.start(agent);
    const pid = (await backend.pid("worker-1"))!;
    expect(pid).toBeGreaterThan(1);
    expect(await backend.isAlive("worker-1")).toBe(true);
    // a second start of a running agent is a no-op
    await backend.start(agent);
    expect(await backend.pid("worker-1")).toBe(pid);
    await waitFor(() => readFileSync(backend.logFile("worker-1")!, "utf8").includes("hello worker-1 hi"));
    const children = () => readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
    await waitFor(() => children() !== "");
    const sleeper = Number(children().split(/\s+/)[0]);
    expect(pidRunning(sleeper)).toBe(true);

    await backend.stop("worker-1");
    expect(await backend.isAlive("worker-1")).toBe(false);
    expect(await backend.pid("worker-1")).toBeUndefined();
    await waitFor(() => !pidRunning(sleeper));
  });

  it("notices a killed process at once", async () => {
    const backend = createProcessBackend();
    backends.push(backend);
    await backend.start({ id: "a", name: "a", command: ["sleep", "1000"] });
    const pid = (await backend.pid("a"))!;
    process.kill(pid, "SIGKILL");
    await waitFor(async () => !(await backend.isAlive("a")));
  });

  it("a new backend re-adopts a running agent from its pid file instead of starting a duplicate", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-proc-"));
    const first = createProcessBackend({ stateDir: dir, keepOnClose: true });
    await first.start({ id: "keep", name: "keep", command: ["sleep", "1000"] });
    const pid = (await first.pid("keep"))!;
    await first.close();
    expect(pidRunning(pid)).toBe(true);

    const second = createProcessBackend({ stateDir: dir });
    backends.push(second);
    expect(await second.isAlive("keep")).toBe(true);
    await second.start({ id: "keep", name: "keep", command: ["sleep", "1000"] });
    expect(await second.pid("keep")).toBe(pid);
    await second.stop("keep");
    await waitFor(() => !pidRunning(pid));
  });

  it("a stale pid file whose pid now belongs to another process is not adopted", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-proc-"));
    const { writeFileSync } = await import("node:fs");
    writeFileSync(join(dir, "ghost.pid.json"), JSON.stringify({ pid: process.pid, startTime: "1" }));
    const backend = createProcessBackend({ stateDir: dir });
    backends.push(backend);
    expect(await backend.isAlive("ghost")).toBe(false);
  });

  it("escalates to SIGKILL when the agent ignores SIGTERM", async () => {
    const backend = createProcessBackend({ stopTimeoutMs: 200 });
    backends.push(backend);
    await backend.start({
      id: "stubborn",
      name: "stubborn",
      command: ["bash", "-c", "trap '' TERM; sleep 1000 & wait; sleep 1000"],
    });
    const pid = (await backend.pid("stubborn"))!;
    // the trap is set once bash has started its first sleep (a child of its own)
    await waitFor(() => readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim() !== "", 5000, 10);
    await backend.stop("stubborn");
    expect(pidRunning(pid)).toBe(false);
  });

  it("a missing executable and a bad definition are clear errors", async () => {
    const backend = createProcessBackend();
    backends.push(backend);
    await expect(backend.start({ id: "x", name: "x", command: ["no-such-agent-binary"] })).rejects.toMatchObject({
      code: "runtime_missing",
    });
    await expect(backend.start({ id: "bad id", name: "x", command: ["sleep"] })).rejects.toMatchObject({
      code: "invalid_argument",
      details: { field: "id" },
    });
    await expect(backend.start({ id: "x", name: "x", command: [] })).rejects.toMatchObject({
      details: { field: "command" },
    });
    await expect(backend.start({ id: "x", name: "x", command: ["sleep"], cwd: "rel" })).rejects.toMatchObject({
      details: { field: "cwd" },
    });
  });
});
