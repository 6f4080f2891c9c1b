import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { waitFor } from "../../test-support/wait.js";
import { runBash } from "./bash-dispatch.js";

/** Alive and not a zombie waiting for a reaper. */
function isRunning(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

describe("bash dispatch", () => {
  it("captures interleaved output and the exit code, with no session in the environment", async () => {
    const r = await runBash('echo one; echo two >&2; echo "${EP_SESSION:-none}"; exit 7', {
      env: { PATH: process.env.PATH },
    });
    expect(r).toEqual({ status: "failed", exitCode: 7, output: "one\ntwo\nnone\n", error: "exited with code 7" });
    expect(await runBash("true")).toEqual({ status: "ok", exitCode: 0, output: "" });
  });

  it("keeps only the end of a large output", async () => {
    const r = await runBash("head -c 100000 /dev/zero | tr '\\0' x; echo END", { maxOutputBytes: 1000 });
    expect(r.status).toBe("ok");
    expect(r.output).toMatch(/^\[… 99004 earlier bytes dropped\]\n/);
    expect(r.output!.endsWith("xEND\n")).toBe(true);
  });

  it("kills the whole process group on timeout", async () => {
    const started = Date.now();
    const r = await runBash("sleep 30 & echo $!; wait", { timeoutMs: 300 });
    expect(r.status).toBe("failed");
    expect(r.error).toMatch(/timed out after 300 ms/);
    expect(Date.now() - started).toBeLessThan(5_000);
    // the group was sent SIGKILL; the pipe closes as the process exits, a moment before the
    // kernel shows it as gone (a loaded machine widens that moment), so wait for it briefly
    const bgPid = Number(r.output!.trim());
    await expect(waitFor(() => !isRunning(bgPid), 2_000)).resolves.toBeUndefined();
  });

  it("a background job left behind does not hold the result back", async () => {
    const started = Date.now();
    const r = await runBash("sleep 30 & echo started");
    expect(r).toMatchObject({ status: "ok", exitCode: 0, output: "started\n" });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
