// ep task watch (issue 17): the built CLI follows a task run by a real epd. Shell tasks wait on
// gate files the test creates, so the CLI is watching a task that is really running.
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import type { Client } from "@connectrpc/connect";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { assertBuilt, ep, EP_BIN } from "./cli-helpers.js";
import { adminClient, startTowerAndEpd, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, waitFor } from "./harness.js";
import { frameLine, outputShown } from "../cli/commands/watch.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const home = tempHome("ep-watch-");
const gates = mkdtempSync(join(tmpdir(), "ep-watch-gates-"));
let tower: TowerProcess;
let epd: EpdProcess;
let work: Client<typeof WorkService>;
let missionId = "";
const env = () => ({ EP_HOME: home.dir, EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken, NO_COLOR: "1" });

beforeAll(async () => {
  assertBuilt();
  ({ tower, epd } = await startTowerAndEpd(home.dir));
  work = adminClient(tower, WorkService);
  const domainId = (await work.createDomain({ name: "watch" })).domain!.id;
  missionId = (await work.createMission({ domainId, title: "watched" })).mission!.id;
  await epd.call("agent.enroll", { domainId, runtime: "shell", name: "watched-agent" });
}, 60_000);

afterAll(async () => {
  // a failed test leaves no task running
  for (const gate of ["ok", "bad", "json"]) writeFileSync(join(gates, gate), "");
  await epd?.stop();
  await tower?.stop();
  home.cleanup();
  rmSync(gates, { recursive: true, force: true });
});

const gated = (gate: string, code: number) =>
  `echo "before the gate"; while [ ! -e ${join(gates, gate)} ]; do sleep ` +
  `0.05; done; echo "after the gate"; echo "the end" >&2; exit ${code}`;

async function submit(command: string): Promise<string> {
  return (
    await work.createTask({ missionId, title: "watch me", runtime: Runtime.SHELL, input: { command }, maxAttempts: 1 })
  ).task!.id;
}

/** Runs `ep task watch` and calls `onLine` for each stdout line as it arrives. */
function watch(
  args: string[],
  onLine: (line: string) => void,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [EP_BIN, "task", "watch", ...args], {
      env: { ...process.env, ...env() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let partial = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      const lines = (partial + d).split("\n");
      partial = lines.pop()!;
      for (const l of lines) onLine(l);
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("ep task watch", () => {
  it("prints the frames so far, then live ones, then the output; exit 0 when it succeeds", async () => {
    const id = await submit(gated("ok", 0));
    await waitFor(async () => (await work.getTask({ taskId: id })).task!.status === TaskStatus.RUNNING, 15_000);
    const seen: string[] = [];
    const done = watch([id], (l) => seen.push(l));
    // the frame printed before the watch started arrives first (replayed); then the gate opens
    await waitFor(() => seen.includes("before the gate"), 15_000);
    expect(seen).not.toContain("after the gate");
    writeFileSync(join(gates, "ok"), "");
    const r = await done;
    expect(r.code, r.stderr).toBe(0);
    const frames = r.stdout.split("\n").filter((l) => /gate|the end/.test(l));
    expect(
      frames.filter((l) => l === "before the gate"),
      r.stdout,
    ).toHaveLength(1);
    expect(frames.indexOf("before the gate")).toBeLessThan(frames.indexOf("after the gate"));
    expect(r.stderr).toContain("watch me  [running]");
    expect(r.stderr).toMatch(/succeeded\s*$/);
  }, 60_000);

  it("exits 1 with the error when the task fails; a finished task replays at once", async () => {
    const id = await submit(gated("bad", 4));
    writeFileSync(join(gates, "bad"), "");
    await waitFor(async () => (await work.getTask({ taskId: id })).task!.status === TaskStatus.FAILED, 15_000);
    const r = await watch([id], () => {});
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("before the gate");
    expect(r.stdout).toContain("after the gate");
    expect(r.stderr).toMatch(/watch me: failed: .*4/);
  }, 60_000);

  it("--json prints a JSON object per frame, then the task", async () => {
    const id = await submit(gated("json", 0));
    writeFileSync(join(gates, "json"), "");
    await waitFor(async () => (await work.getTask({ taskId: id })).task!.status === TaskStatus.SUCCEEDED, 15_000);
    const r = await ep(["task", "watch", id, "--json"], { env: env() });
    expect(r.code, r.stderr).toBe(0);
    const docs = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, any>);
    expect(docs.at(-1)!.task).toMatchObject({ id, status: "succeeded" });
    expect(docs.filter((d) => d.kind === "text").map((d) => d.text)).toContain("before the gate");
    expect(docs.slice(0, -1).every((d) => typeof d.id === "number")).toBe(true);
  }, 60_000);

  it("folds the runtime's stderr lines into a count; --stderr prints them (issue 34)", async () => {
    const id = await submit("echo out1; echo warn1 >&2; echo warn2 >&2; echo out2");
    await waitFor(async () => (await work.getTask({ taskId: id })).task!.status === TaskStatus.SUCCEEDED, 15_000);
    const folded = await ep(["task", "watch", id], { env: env() });
    expect(folded.code, folded.stderr).toBe(0);
    expect(folded.stdout).toContain("out1");
    expect(folded.stdout).not.toContain("warn1");
    // the two pipes are read apart, so the stderr lines may come as one run or two
    const counted = [...folded.stdout.matchAll(/ {2}⋯ (\d+) stderr lines? \(--stderr to show\)/g)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
    expect(counted, folded.stdout).toBe(2);
    const shown = await ep(["task", "watch", id, "--stderr"], { env: env() });
    expect(shown.stdout).toContain("warn1");
    expect(shown.stdout).toContain("warn2");
    expect(shown.stdout).not.toContain("stderr line");
    const json = await ep(["task", "watch", id, "--json"], { env: env() });
    const kinds = json.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { kind?: string; text?: string });
    expect(
      kinds
        .filter((d) => d.kind === "stderr")
        .map((d) => d.text)
        .sort(),
    ).toEqual(["warn1", "warn2"]);
  }, 60_000);

  it("an unknown task is an error naming it; an unreachable tower says so", async () => {
    const r = await ep(["task", "watch", "tsk_nope"], { env: env() });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("tsk_nope");
    const down = await ep(["task", "watch", "tsk_nope"], { env: { ...env(), EP_BASE_URL: "http://127.0.0.1:1" } });
    expect(down.stderr).toContain("cannot reach the tower at http://127.0.0.1:1");
  }, 30_000);

  it("prints an output the frames did not already show", () => {
    expect(outputShown("before\nafter\n", "before\nafter")).toBe(true);
    expect(outputShown("thinking about it\n", "the answer is 4")).toBe(false);
    expect(outputShown("", "")).toBe(false);
  });

  it("marks tool and status frames; stderr text is dimmed only in color", () => {
    expect(frameLine({ id: 1, kind: "tool", text: "Bash ls", data: { phase: "call" } }, false)).toBe("  ⚙ Bash ls");
    expect(frameLine({ id: 2, kind: "tool", text: "tool result: ok", data: { phase: "result" } }, false)).toBe(
      "  ↳ tool result: ok",
    );
    expect(frameLine({ id: 3, kind: "status", text: "session started" }, false)).toBe("  · session started");
    expect(frameLine({ id: 4, kind: "text", text: "warn", data: { stream: "stderr" } }, true)).toBe(
      "\x1b[2mwarn\x1b[0m",
    );
    expect(frameLine({ id: 5, kind: "stderr", text: "warn" }, true)).toBe("\x1b[2mwarn\x1b[0m");
    expect(frameLine({ id: 5, kind: "stderr", text: "warn" }, false)).toBe("warn");
  });
});
