// mergeBranch on real git repositories: fast-forward, merge commit, conflict, dirty checkout,
// and the base branch checked out or not.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EpError } from "../../common/errors.js";
import { mergeBranch, type MergeRequest } from "./workspace-merge.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", ["-c", "user.email=t@ep", "-c", "user.name=t", ...args], { cwd, encoding: "utf8" }).trim();

/** A repository on main with a.txt and b.txt, and a task branch ep/t1 changing a.txt. */
function repoWithBranch(): string {
  const dir = mkdtempSync(join(tmpdir(), "ep-merge-"));
  dirs.push(dir);
  git(dir, "init", "-q", "-b", "main");
  writeFileSync(join(dir, "a.txt"), "a\n");
  writeFileSync(join(dir, "b.txt"), "b\n");
  git(dir, "add", ".");
  git(dir, "commit", "-qm", "first");
  git(dir, "checkout", "-qb", "ep/t1");
  writeFileSync(join(dir, "a.txt"), "a from the agent\n");
  git(dir, "commit", "-qam", "agent");
  git(dir, "checkout", "-q", "main");
  return dir;
}

const request = (repo: string, over: Partial<MergeRequest> = {}): MergeRequest => ({
  repo,
  branch: "ep/t1",
  head: git(repo, "rev-parse", "ep/t1"),
  into: "main",
  taskId: "tsk_1",
  taskTitle: "fix a",
  by: "admin",
  who: { name: "EP agent sh0", email: "ep@localhost" },
  ...over,
});

async function refusal(p: Promise<unknown>): Promise<EpError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EpError);
  return err as EpError;
}

describe("mergeBranch", () => {
  it("fast-forwards the checked-out base branch, files included", async () => {
    const repo = repoWithBranch();
    const tip = git(repo, "rev-parse", "ep/t1");
    const done = await mergeBranch(request(repo));
    expect(done).toMatchObject({ outcome: "fast_forward", into: "main", merged: tip, tip, checkout: repo });
    expect(git(repo, "rev-parse", "main")).toBe(tip);
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("a from the agent\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
    // a second time: already merged, nothing moves
    expect(await mergeBranch(request(repo))).toMatchObject({ outcome: "already_merged", tip });
  });

  it("makes a merge commit when the base moved on, by compare-and-swap when it is not checked out", async () => {
    const repo = repoWithBranch();
    writeFileSync(join(repo, "b.txt"), "b changed on main\n");
    git(repo, "commit", "-qam", "main moves");
    git(repo, "checkout", "-q", "--detach");
    const previous = git(repo, "rev-parse", "main");
    const done = await mergeBranch(request(repo));
    expect(done).toMatchObject({ outcome: "merge_commit", previous, checkout: "" });
    expect(git(repo, "rev-parse", "main")).toBe(done.tip);
    expect(git(repo, "log", "-1", "--format=%P", "main")).toBe(`${previous} ${git(repo, "rev-parse", "ep/t1")}`);
    expect(git(repo, "log", "-1", "--format=%an <%ae>%n%B", "main")).toBe(
      "EP agent sh0 <ep@localhost>\nMerge ep/t1 into main: fix a (task tsk_1)\n\nEP-Task: tsk_1\nEP-Merged-By: admin",
    );
    expect(git(repo, "show", "main:a.txt")).toBe("a from the agent");
    expect(git(repo, "show", "main:b.txt")).toBe("b changed on main");
  });

  it("moves a checked-out base to the merge commit, files included", async () => {
    const repo = repoWithBranch();
    writeFileSync(join(repo, "b.txt"), "b changed on main\n");
    git(repo, "commit", "-qam", "main moves");
    const done = await mergeBranch(request(repo));
    expect(done).toMatchObject({ outcome: "merge_commit", checkout: repo });
    expect(git(repo, "rev-parse", "HEAD")).toBe(done.tip);
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("a from the agent\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("refuses when git will not move the checkout (an untracked file in the way), and changes nothing", async () => {
    const repo = repoWithBranch();
    git(repo, "checkout", "-q", "ep/t1");
    writeFileSync(join(repo, "c.txt"), "new from the agent\n");
    git(repo, "add", "c.txt");
    git(repo, "commit", "-qm", "add c");
    git(repo, "checkout", "-q", "main");
    writeFileSync(join(repo, "c.txt"), "a person's untracked file\n");
    const before = git(repo, "rev-parse", "main");
    const err = await refusal(mergeBranch({ ...request(repo), head: git(repo, "rev-parse", "ep/t1") }));
    expect(err.details).toMatchObject({ reason: "checkout_refused" });
    expect(git(repo, "rev-parse", "main")).toBe(before);
    expect(readFileSync(join(repo, "c.txt"), "utf8")).toBe("a person's untracked file\n");
  });

  it("refuses a conflict, listing the files, and changes nothing", async () => {
    const repo = repoWithBranch();
    writeFileSync(join(repo, "a.txt"), "a from a person\n");
    git(repo, "commit", "-qam", "conflicting");
    const before = git(repo, "rev-parse", "main");
    const err = await refusal(mergeBranch(request(repo)));
    expect(err.code).toBe("merge_refused");
    expect(err.details).toEqual({ reason: "conflict", files: ["a.txt"] });
    expect(err.message).toMatch(
      /ep\/t1 does not merge cleanly into main: 1 conflicting file\(s\): a\.txt; nothing changed/,
    );
    expect(git(repo, "rev-parse", "main")).toBe(before);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("a from a person\n");
  });

  it("refuses when the base branch's checkout has uncommitted changes", async () => {
    const repo = repoWithBranch();
    writeFileSync(join(repo, "b.txt"), "being edited\n");
    const before = git(repo, "rev-parse", "main");
    const err = await refusal(mergeBranch(request(repo)));
    expect(err.details).toEqual({ reason: "checkout_dirty", files: ["b.txt"] });
    expect(err.message).toContain(`main is checked out in ${repo} with uncommitted changes (b.txt)`);
    expect(git(repo, "rev-parse", "main")).toBe(before);
    expect(readFileSync(join(repo, "b.txt"), "utf8")).toBe("being edited\n");
  });

  it("refuses a deleted branch and a missing base", async () => {
    const repo = repoWithBranch();
    const req = request(repo);
    expect((await refusal(mergeBranch({ ...req, into: "release" }))).details).toMatchObject({ reason: "base_gone" });
    git(repo, "branch", "-D", "ep/t1");
    expect((await refusal(mergeBranch(req))).details).toMatchObject({ reason: "branch_gone" });
  });
});
