// Task dependencies (docs/pipelines.md): the edges of task_deps, one row per (parent, child),
// read through their primary key (a parent's children) or task_deps_child (a child's parents),
// so what a parent's outcome does costs O(its children), never a scan of its mission. One
// dialect-neutral implementation over a query function, bound by SqlStore (sql-store.ts).
import { toTask } from "./rows.js";
import type { DependencyStore, ParentState, TaskRow } from "./store.js";

export type { DependencyStore, ParentState } from "./store.js";

type Row = Record<string, unknown>;
type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;
type InList = (col: string, values: readonly string[]) => { sql: string; args: unknown[] };

/** The waiting children of a parent (?2) none of whose parents is unfinished, queued at ?1; returned whole. */
export const QUEUE_READY_CHILDREN_SQL = `UPDATE tasks SET status = 'queued', updated_at = ?
  WHERE status = 'waiting' AND id IN (SELECT child_id FROM task_deps WHERE parent_id = ?)
    AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p ON p.id = d.parent_id
    WHERE d.child_id = tasks.id AND p.status <> 'succeeded')
  RETURNING *`;

/** A parent of a child and the parent's status. */
export function createDependencyStore(q: Query, inList: InList, lockRows = ""): DependencyStore {
  return {
    async markParent(id) {
      const rows = await q("UPDATE tasks SET has_dependents = 1 WHERE id = ? RETURNING *", [id]);
      return rows[0] ? toTask(rows[0]) : undefined;
    },

    async insertTaskDeps(childId, parentIds) {
      for (const p of new Set(parentIds))
        await q("INSERT INTO task_deps (parent_id, child_id) VALUES (?, ?)", [p, childId]);
    },

    async queueReadyChildren(parentId, at) {
      // PostgreSQL: the waiting children's rows locked first (in id order), so the UPDATE below, a
      // statement of its own, sees what another parent's outcome holding them committed: two
      // parents succeeding at once on two connections would each read the other as unfinished
      // and leave their child waiting for good (test: store-deps "two parents… at once")
      if (lockRows)
        await q(
          `SELECT id FROM tasks WHERE id IN (SELECT child_id FROM task_deps WHERE parent_id = ?) ` +
            `AND status = 'waiting' ORDER BY id${lockRows}`,
          [parentId],
        );
      const rows = await q(QUEUE_READY_CHILDREN_SQL, [at, parentId]);
      return rows.map(toTask).sort(bySeqOfId);
    },

    async listChildren(parentId) {
      const rows = await q(
        "SELECT t.* FROM task_deps d JOIN tasks t ON t.id = d.child_id WHERE d.parent_id = ? ORDER BY t.seq",
        [parentId],
      );
      return rows.map(toTask);
    },

    async listParentStates(childIds) {
      const out: ParentState[] = [];
      // in slices: SQLite binds each value of an IN list as its own parameter
      for (let i = 0; i < childIds.length; i += 500) {
        const where = inList("d.child_id", childIds.slice(i, i + 500));
        const rows = await q(
          `SELECT d.child_id, d.parent_id, p.status FROM task_deps ` +
            `d JOIN tasks p ON p.id = d.parent_id WHERE ${where.sql}`,
          where.args,
        );
        for (const r of rows)
          out.push({ childId: r.child_id as string, parentId: r.parent_id as string, status: r.status as string });
      }
      return out;
    },
  };
}

/** Task ids sort in creation order (prefixed, time-sortable): RETURNING gives no order of its own. */
const bySeqOfId = (a: TaskRow, b: TaskRow) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
