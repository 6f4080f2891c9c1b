// `ep workspace ls|rm|gc`: the git worktrees epd made on this node for tasks that named a
// workspace (daemon/worker/workspace.ts; the records, common/worktrees.ts). They are files and git state in the daemon
// home, so the CLI reads and removes them directly, as epd would; a worktree a run is still in is refused.
import { daemonHome } from "../../common/paths.js";
import { gcWorktrees, listWorktrees, removeWorktree, type WorktreeRecord } from "../../common/worktrees.js";
import type { Context } from "../context.js";
import { json, table, type Row } from "../output.js";

const row = (r: WorktreeRecord): Row => ({
  task_id: r.taskId,
  state: r.state,
  branch: r.branch,
  base: r.base.slice(0, 12),
  repo: r.repo,
  worktree: r.path,
  since: r.keptAt ?? r.createdAt,
});
const cols = { task: "task_id", state: "state", branch: "branch", base: "base", repo: "repo", since: "since" };

export async function run(ctx: Context): Promise<number> {
  const home = daemonHome(ctx.env);
  switch (ctx.spec.path.join(" ")) {
    case "workspace ls": {
      const rows = listWorktrees(home).map(row);
      ctx.out(ctx.json ? json({ worktrees: rows }) : rows.length ? table(rows, cols) : "no worktrees on this node");
      return 0;
    }
    case "workspace rm": {
      const r = await removeWorktree(home, ctx.args[0]!, { deleteBranch: ctx.opts["delete-branch"] === true });
      ctx.out(
        ctx.json
          ? json({ removed: row(r) })
          : `removed ${r.path}` +
              `${ctx.opts["delete-branch"] === true ? ` and branch ${r.branch}` : ` (branch ${r.branch} stays)`}`,
      );
      return 0;
    }
    case "workspace gc": {
      const removed = (await gcWorktrees(home, new Date(), { all: ctx.opts.all === true })).map(row);
      ctx.out(
        ctx.json
          ? json({ removed })
          : removed.length
            ? `removed ${removed.length} worktree(s):\n${table(removed, cols)}`
            : "nothing to collect",
      );
      return 0;
    }
  }
  return 2;
}
