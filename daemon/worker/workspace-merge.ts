// `ep task merge`: a task's branch merged into its base branch in the repository on this node.
// A fast-forward when the base has not moved, else a merge commit built without a working tree
// (`git merge-tree --write-tree`, `git commit-tree`), so a conflict is found before anything
// changes and the repository is never left mid-merge. The base branch moves by compare-and-swap
// (`git update-ref <new> <old>`); when it is checked out somewhere, that checkout moves with it
// (`git merge --ff-only` to the prepared commit), and only when its tracked files are clean.
import { EpError } from "../../common/errors.js";
import { authorEnv, git, gitResult } from "./workspace.js";

/** Why a merge was refused (the error's details.reason). */
export type MergeRefusal =
  | "conflict"
  | "checkout_dirty"
  | "checkout_refused"
  | "base_moved"
  | "base_gone"
  | "branch_gone"
  | "branch_rewritten"
  | "repo_gone";

export interface MergeRequest {
  repo: string;
  /** the task's branch, and the commit the task's result names as its head */
  branch: string;
  head: string;
  /** the branch to merge into */
  into: string;
  taskId: string;
  taskTitle: string;
  /** who asked (the merge commit's EP-Merged-By trailer) */
  by: string;
  /** the merge commit's author and committer */
  who: { name: string; email: string };
}

export interface MergeDone {
  outcome: "fast_forward" | "merge_commit" | "already_merged";
  into: string;
  branch: string;
  /** the branch tip merged */
  merged: string;
  previous: string;
  tip: string;
  /** the checkout of `into` whose files moved with it, else "" */
  checkout: string;
}

const refuse = (reason: MergeRefusal, message: string, files: string[] = []) =>
  new EpError("merge_refused", `${message}; nothing changed`, { reason, files });

const commitOf = async (repo: string, ref: string) => {
  const r = await gitResult(repo, ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`]);
  return r.code === 0 ? r.stdout.trim() : undefined;
};
const isAncestor = async (repo: string, a: string, b: string) =>
  (await gitResult(repo, ["merge-base", "--is-ancestor", a, b])).code === 0;

/** The worktree (the main checkout or a linked one) that has `branch` checked out, if any. */
async function checkoutOf(repo: string, branch: string): Promise<string | undefined> {
  let path: string | undefined;
  for (const line of (await git(repo, ["worktree", "list", "--porcelain"])).split("\n")) {
    if (line.startsWith("worktree ")) path = line.slice("worktree ".length);
    else if (line === `branch refs/heads/${branch}`) return path;
  }
  return undefined;
}

/** The merge commit's message: what was merged, for which task, and who asked. */
function mergeMessage(req: MergeRequest): string[] {
  const title = req.taskTitle.split("\n")[0]!.trim();
  return [
    `Merge ${req.branch} into ${req.into}: ` +
      `${title.length > 50 ? `${title.slice(0, 49)}…` : title} (task ${req.taskId})`,
    `EP-Task: ${req.taskId}\nEP-Merged-By: ${req.by}`,
  ];
}

/** Merges the task's branch into `into`; the outcome, or an EpError merge_refused saying why (nothing changed then). */
export async function mergeBranch(req: MergeRequest): Promise<MergeDone> {
  const { repo, branch, into } = req;
  if ((await gitResult(repo, ["rev-parse", "--git-dir"])).code !== 0)
    throw refuse("repo_gone", `${repo} is no longer a git repository`);
  const tip = await commitOf(repo, `refs/heads/${branch}`);
  if (!tip) throw refuse("branch_gone", `branch ${branch} no longer exists in ${repo}`);
  if (req.head && !(await isAncestor(repo, req.head, tip)))
    throw refuse(
      "branch_rewritten",
      `branch ${branch} no longer contains the task's head ${req.head.slice(0, 12)} (it was rewritten)`,
    );
  const previous = await commitOf(repo, `refs/heads/${into}`);
  if (!previous) throw refuse("base_gone", `branch ${into} does not exist in ${repo}`);
  const done = { into, branch, merged: tip, previous };
  if (await isAncestor(repo, tip, previous)) return { ...done, outcome: "already_merged", tip: previous, checkout: "" };

  const checkout = await checkoutOf(repo, into);
  if (checkout) {
    const dirty = (await git(checkout, ["status", "--porcelain", "--untracked-files=no"]))
      .split("\n")
      .filter(Boolean)
      .map((l) => l.slice(3));
    if (dirty.length)
      throw refuse(
        "checkout_dirty",
        `${into} is checked out in ${checkout} with uncommitted changes ` +
          `(${dirty.join(", ")}); commit or stash them, then merge again`,
        dirty,
      );
  }
  let next = tip;
  let outcome: MergeDone["outcome"] = "fast_forward";
  if (!(await isAncestor(repo, previous, tip))) {
    const tree = await gitResult(repo, ["merge-tree", "--write-tree", "--name-only", "--no-messages", previous, tip]);
    if (tree.code === 1) {
      const files = tree.stdout.split("\n").slice(1).filter(Boolean);
      throw refuse(
        "conflict",
        `${branch} does not merge cleanly into ${into}: ${files.length} conflicting file(s): ${files.join(", ")}`,
        files,
      );
    }
    if (tree.code !== 0)
      throw new EpError("internal", `git merge-tree in ${repo}: ${tree.stderr.trim().split("\n")[0]}`);
    const message = mergeMessage(req).flatMap((m) => ["-m", m]);
    next = (
      await git(repo, ["commit-tree", tree.stdout.split("\n")[0]!, "-p", previous, "-p", tip, ...message], {
        env: authorEnv(req.who),
      })
    ).trim();
    outcome = "merge_commit";
  }
  if (checkout) {
    // the checkout's HEAD is `into`: a fast-forward to the prepared commit moves branch and files together
    const ff = await gitResult(checkout, ["merge", "--ff-only", "--quiet", "--no-edit", next]);
    if (ff.code !== 0)
      throw refuse(
        "checkout_refused",
        `git refused to move the checkout of ${into} in ${checkout}: ${(ff.stderr || ff.stdout).trim().split("\n")[0]}`,
      );
  } else {
    const cas = await gitResult(repo, [
      "update-ref",
      "-m",
      `ep: merge task ${req.taskId}`,
      `refs/heads/${into}`,
      next,
      previous,
    ]);
    if (cas.code !== 0) throw refuse("base_moved", `branch ${into} moved while merging; merge again`);
  }
  return { ...done, outcome, tip: next, checkout: checkout ?? "" };
}
