// `ep task diff` and `ep task merge`: what a task's run changed in its workspace (its branch, the
// commits on it and who made them, the stat and the patch), and taking that change into the
// branch it was made from (WorkService.MergeTask; the node that ran the task merges).
import { EpError, toEpError } from "../../common/errors.js";
import { GetTaskResponseSchema, MergeTaskResponseSchema, WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import type { Context } from "../context.js";
import { withHint } from "../fail.js";
import { json, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";

const short = (sha: unknown) => String(sha ?? "").slice(0, 12);

/** Who made the branch's commits, as one true sentence (results before commits were listed say less). */
function commitsText(ws: Row): string[] {
  const commits = (ws.commits as Row[] | undefined) ?? [];
  if (!commits.length) {
    if (ws.head && ws.head !== ws.base)
      return [ws.committed ? "the agent committed on the branch" : "epd committed what the run left uncommitted"];
    return ["no commits on the branch"];
  }
  const lines = [`${commits.length} commit(s) on the branch:`];
  for (const c of commits)
    lines.push(
      `  ${short(c.sha)} ${c.subject}  — ${c.author}${c.by_epd ? " (epd: what the run left uncommitted)" : ""}`,
    );
  return lines;
}

/** A task's workspace change for a terminal: branch, commits, the stat, then the patch (colored when asked). */
export function diffText(
  ws: Row,
  opts: { taskId: string; statOnly: boolean; color: boolean; succeeded: boolean },
): string {
  const paint = (code: string, line: string) => (opts.color ? `\x1b[${code}m${line}\x1b[0m` : line);
  const from = ws.base_branch ? `${ws.base_branch} at ${short(ws.base)}` : short(ws.base);
  const head = [
    `branch ${ws.branch} from ${from}, head ${short(ws.head)}, in ${ws.repo}`,
    ...commitsText(ws),
    ...(ws.worktree ? [`worktree kept at ${ws.worktree}; the patch includes what is uncommitted there`] : []),
    String(ws.stat || "no changes"),
    ...(opts.succeeded && ws.base_branch && ws.head !== ws.base
      ? [`merge it into ${ws.base_branch}: ep task merge ${opts.taskId}`]
      : []),
  ];
  if (opts.statOnly) return head.join("\n");
  const patch = String(ws.patch ?? "")
    .split("\n")
    .map((l) =>
      l.startsWith("+++") || l.startsWith("---")
        ? paint("1", l)
        : l.startsWith("+")
          ? paint("32", l)
          : l.startsWith("-")
            ? paint("31", l)
            : l.startsWith("@@")
              ? paint("36", l)
              : l,
    )
    .join("\n");
  const cut = ws.patch_truncated
    ? `\n… the patch is cut at 64 KiB; the whole one is the task's artifact ${ws.patch_artifact || "(not stored)"}`
    : "";
  return `${head.join("\n")}\n\n${patch}${cut}`;
}

/** The merge's outcome in one line. */
function mergedText(r: Row): string {
  switch (r.outcome) {
    case "fast_forward":
      return (
        `merged ${r.branch} into ${r.into} (fast-forward): ${r.into} is now ${short(r.tip)} ` +
        `(was ${short(r.previous)})${r.checkout ? `; files updated in ${r.checkout}` : ""}`
      );
    case "merge_commit":
      return (
        `merged ${r.branch} into ${r.into} with merge commit ${short(r.tip)} (${r.into} ` +
        `was ${short(r.previous)})${r.checkout ? `; files updated in ${r.checkout}` : ""}`
      );
    default:
      return `${r.into} already contains ${r.branch} (${short(r.merged)}); nothing changed`;
  }
}

export async function run(ctx: Context): Promise<number> {
  const work = tower(ctx, WorkService);
  const taskId = ctx.args[0]!;
  if (ctx.spec.path.join(" ") === "task diff") {
    const task = protoJson(GetTaskResponseSchema, await work.getTask({ taskId })).task as Row;
    const ws = (task.result as Row | undefined)?.workspace as Row | undefined;
    if (!ws)
      throw withHint(
        new EpError(
          "not_found",
          `task ${taskId} has no workspace result: it named no input.workspace, or has not finished`,
        ),
        "see docs/workspaces.md",
      );
    if (ctx.json) ctx.out(json(ws));
    else
      ctx.out(
        diffText(ws, {
          taskId,
          statOnly: ctx.opts.stat === true,
          color: Boolean(process.stdout.isTTY) && !ctx.env.NO_COLOR,
          succeeded: task.status === "succeeded",
        }),
      );
    return 0;
  }
  try {
    const res = protoJson(MergeTaskResponseSchema, await work.mergeTask({ taskId, into: ctx.str("into") ?? "" }));
    ctx.out(ctx.json ? json(res) : mergedText(res));
    return 0;
  } catch (err) {
    const e = toEpError(err);
    if (e.code === "merge_refused")
      throw withHint(e, `see the change with 'ep task diff ${taskId}'; nothing was changed in the repository`);
    if (e.errorClass === "unavailable" && e.details?.node_id)
      throw withHint(e, "the node that ran the task must be connected ('ep node ls')");
    throw err;
  }
}
