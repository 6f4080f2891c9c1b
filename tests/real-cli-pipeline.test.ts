// Issue 40 with the real claude CLI (against the fake LLM API, real-cli-harness.ts) through a real
// tower and epd: a three-step pipeline file. The implementer writes impl.txt in its worktree and
// commits it; the reviewer's worktree, started from the implementer's branch (workspace.ref
// "task:implement"), holds that file (its own tool lists it) and its prompt carries the parent's
// context; the tester, a shell step, runs on the same branch and reads the reviewer's output.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { statusWord } from "../test-support/words.js";
import { waitFor } from "./harness.js";
import { skipRealCli, startRealCli, type RealCli } from "./real-cli-harness.js";

let cli: RealCli;
beforeAll(async () => {
  if (!skipRealCli) {
    cli = await startRealCli("ep-real-pipeline-");
    await cli.epd.call("agent.enroll", { domainId: cli.domainId, runtime: "shell", name: "tester" });
  }
}, 120_000);
afterAll(async () => cli?.close());

describe.skipIf(skipRealCli)("a pipeline of claude steps and a shell step", () => {
  it("hands the implementer's commit to the reviewer's worktree and the tester's, in order", async () => {
    await cli.setRuntimes("claude-code-acp");
    const repo = cli.repo();
    const source = [
      'name = "implement, review, test"',
      "[[step]]",
      'name = "implement"',
      'runtime = "vendorA_code"',
      'prompt = "ep-real-cli: pipeline implementer"',
      `workspace = { repo = ${JSON.stringify(repo)} }`,
      "max_attempts = 1",
      "[[step]]",
      'name = "review"',
      'depends_on = ["implement"]',
      'runtime = "vendorA_code"',
      'prompt = "ep-real-cli: pipeline reviewer"',
      `workspace = { repo = ${JSON.stringify(repo)}, ref = "task:implement" }`,
      "max_attempts = 1",
      "[[step]]",
      'name = "test"',
      'depends_on = ["review"]',
      `command = "test -f impl.txt && echo tested $(cat impl.txt) on $(git ` +
        `rev-parse --abbrev-ref HEAD) after: $(cat \\"$EP_PARENTS_DIR/review.out\\")"`,
      `workspace = { repo = ${JSON.stringify(repo)}, ref = "task:implement" }`,
      "max_attempts = 1",
    ].join("\n");
    const { mission, steps } = await cli.work.runPipeline({
      domainId: cli.domainId,
      source,
      fileName: "pipeline.toml",
    });
    const id = Object.fromEntries(steps.map((s) => [s.step, s.id]));
    await waitFor(
      async () =>
        ["succeeded", "failed", "cancelled"].includes(
          statusWord((await cli.work.getPipeline({ missionId: mission!.id })).state),
        ),
      240_000,
      200,
    );
    const task = async (step: string) => (await cli.work.getTask({ taskId: id[step]! })).task!;
    const [impl, review, test] = [await task("implement"), await task("review"), await task("test")];
    const frames = async (step: string) => (await cli.frames(id[step]!)).join("\n").slice(-3000);
    expect(statusWord(impl.status), `${impl.result?.error}\n${await frames("implement")}`).toBe("succeeded");
    expect(impl.result!.workspace!.commits.map((c) => [c.subject, c.byEpd])).toEqual([["implement impl.txt", false]]);

    expect(statusWord(review.status), `${review.result?.error}\n${await frames("review")}`).toBe("succeeded");
    // its worktree started at the implementer's head, on a branch of its own taken from the implementer's
    expect(review.result!.workspace!.base).toBe(impl.result!.workspace!.head);
    expect(review.result!.workspace!.baseBranch).toBe(impl.result!.workspace!.branch);
    expect(review.result!.output).toContain("the reviewer saw impl.txt");
    // the prompt it was given carried the parent's context
    const asked = (await cli.journal())
      .map((e) => JSON.stringify(e.body))
      .filter((b) => b.includes("ep-real-cli: pipeline reviewer"));
    expect(
      asked.some(
        (b) =>
          b.includes(`Context from EP: this task (${id.review})`) && b.includes(`${id.implement} (step implement)`),
      ),
    ).toBe(true);

    expect(statusWord(test.status), `${test.result?.error}\n${await frames("test")}`).toBe("succeeded");
    expect(test.result!.output.trim()).toBe(`tested implemented on ep/${id.test} after: the reviewer saw impl.txt`);
    expect(test.result!.workspace!.base).toBe(impl.result!.workspace!.head);
    expect(statusWord((await cli.work.getPipeline({ missionId: mission!.id })).state)).toBe("succeeded");
  }, 300_000);
});
