// Issue 34: a model API that fails shows while it happens. The real CLIs against the fake API
// answering 429/500 (tests/real-cli/fixtures/frames.json): each retry is a status frame while the
// task runs, the final error carries the upstream's message; gemini's streamed text arrives as
// lines; usage names the model. The vendors' own retry limits are kept small so a run ends in seconds.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runtimeOf, statusWord } from "../test-support/words.js";
import { ep } from "./cli-helpers.js";
import { waitFor } from "./harness.js";
import { codexConfig, geminiSettings, skipRealCli as skip, startRealCli, type RealCli } from "./real-cli-harness.js";

let cli: RealCli;

describe.skipIf(skip)("the real agent CLIs when the model API fails (issue 34)", () => {
  beforeAll(async () => {
    // the vendors' own retry limits, kept small so a failing API ends the run in seconds: claude's
    // environment variable, codex's provider settings, gemini's settings.json
    if (skip) return;
    cli = await startRealCli("ep-real-fail-");
    writeFileSync(
      join(cli.userHome, ".codex", "config.toml"),
      codexConfig(cli.llmUrl, "request_max_retries = 1\nstream_max_retries = 1\n"),
    );
    writeFileSync(join(cli.userHome, ".gemini", "settings.json"), geminiSettings({ maxAttempts: 2 }));
    await cli.setRuntimes("claude-code-acp", { claudeEnv: 'CLAUDE_CODE_MAX_RETRIES = "3"\n' });
  }, 120_000);
  afterAll(async () => cli?.close());

  type Frame = { kind: string; text: string; data?: Record<string, unknown> };
  const framesOf = async (taskId: string): Promise<Frame[]> => {
    const page = await cli.events.listEvents({ limit: 1000, filter: { taskId, types: ["progress"] } });
    return page.events.map((e) => e.payload as unknown as Frame);
  };
  const runTask = (runtime: string, prompt: string) => cli.runTask(runtime, prompt);
  const cliEnv = () => cli.cliEnv();
  const submit = async (runtime: string, prompt: string) =>
    (
      await cli.work.createTask({
        missionId: cli.missionId,
        title: prompt.slice(0, 40),
        runtime: runtimeOf(runtime),
        input: { prompt },
        maxAttempts: 1,
      })
    ).task!.id;

  const ended = async (id: string) => {
    let task = (await cli.work.getTask({ taskId: id })).task!;
    await waitFor(
      async () =>
        ["succeeded", "failed", "cancelled"].includes(
          statusWord((task = (await cli.work.getTask({ taskId: id })).task!).status),
        ),
      90_000,
      100,
    );
    return task;
  };

  /** The first retry frame of the task, and the task's status when the tower had it. */
  async function retryWhileRunning(id: string): Promise<{ frame: Frame; status: string }> {
    let frame: Frame | undefined;
    let status = "";
    await waitFor(
      async () => {
        frame = (await framesOf(id)).find((f) => f.kind === "status" && f.data?.retry === true);
        if (frame) status = statusWord((await cli.work.getTask({ taskId: id })).task!.status);
        return frame !== undefined;
      },
      60_000,
      100,
    );
    return { frame: frame!, status };
  }

  it("claude: each retry of a 429 is a status frame while the task runs; the error is the upstream's", async () => {
    const id = await submit("vendorA_code", "ep-frames: upstream 429");
    // claude waits 0.5, 1 and 2 s between its three retries: the first frame comes seconds before the end
    const { frame, status } = await retryWhileRunning(id);
    expect(status).toBe("running");
    expect(frame).toMatchObject({ data: { attempt: 1, max_retries: 3, error_status: 429 } });
    expect(frame.text).toMatch(/^model API error 429, retry 1\/3 in /);
    const task = await ended(id);
    expect(statusWord(task.status)).toBe("failed");
    expect(task.result?.error).toContain("the fixture rate-limits you (429)");
  }, 120_000);

  it("gemini: its stderr 'Attempt 1 failed' is a status frame while " +
    "the task runs; the error is the upstream's; stderr is its own kind", async () => {
    const id = await submit("vendorC", "ep-frames: upstream 500");
    // gemini waits about 5 s before its second (and last, maxAttempts = 2) attempt
    const { frame, status } = await retryWhileRunning(id);
    expect(status).toBe("running");
    expect(frame).toMatchObject({
      text: "model API error 500, retry 1: the fixture is overloaded (500)",
      data: { attempt: 1, error_status: 500 },
    });
    const task = await ended(id);
    expect(statusWord(task.status)).toBe("failed");
    expect(task.result?.error).toBe("vendorC: HTTP 500: the fixture is overloaded (500)");
    const frames = await framesOf(id);
    expect(frames.some((f) => f.kind === "stderr" && f.text.startsWith("Attempt 1 failed with status 500"))).toBe(true);
    expect(frames.some((f) => f.kind === "text" && f.text.includes("Attempt 1 failed"))).toBe(false);
  }, 120_000);

  it("codex: a 500's retries are status frames and the error names the upstream status codex drops", async () => {
    const r = await runTask("vendorB", "ep-frames: upstream 500");
    expect(r.status).toBe("failed");
    expect(r.error).toMatch(/^vendorB: .*\(upstream HTTP 500 Internal Server Error, request id req-[\w-]+\)$/);
    const retries = (await framesOf(r.id)).filter((f) => f.kind === "status" && f.data?.retry === true);
    expect(retries.some((f) => f.data?.error_status === 500)).toBe(true);
    expect(retries.some((f) => f.data?.max_retries === 1)).toBe(true); // codex's own "Reconnecting... 1/1"
  }, 120_000);

  it("gemini's streamed pieces arrive as whole lines; usage names the model for codex and gemini", async () => {
    const [gemini, codex] = await Promise.all([
      runTask("vendorC", "ep-frames: stream words"),
      runTask("vendorB", "ep-real-cli: reply hello"),
    ]);
    expect(gemini.status, gemini.error).toBe("succeeded");
    // the fixture streams four characters at a time
    expect((await framesOf(gemini.id)).filter((f) => f.kind === "text").map((f) => f.text)).toEqual([
      "codeword pelican-773",
      "second line here",
    ]);
    expect(codex.status, codex.error).toBe("succeeded");
    for (const [r, model] of [
      [gemini, "gemini-2.5-flash"],
      [codex, /\S/],
    ] as const) {
      const got = (await ep(["task", "get", r.id, "--json"], { env: cliEnv() })).json();
      expect(got.task.result.usage.model).toMatch(model);
    }
  }, 120_000);
});
