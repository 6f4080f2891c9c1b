// The SQL of the queries whose shape depends on their arguments — the task list, the conditional
// task update, the event filters — built once for both dialects. A dialect supplies the two
// things that differ: how `col IN (…)` is written, and the LIMIT meaning "no limit".
import { JSON_TASK_FIELDS, TASK_COLUMNS } from "./rows.js";
import type { EventQuery, TaskExpectation, TaskPatch, TaskQuery } from "./store.js";

export interface SqlDialect {
  /** `col` is one of `values`: `col IN (?, ?)` on SQLite, `col = ANY(?::text[])` on PostgreSQL. */
  listIn(col: string, values: readonly string[]): { sql: string; args: unknown[] };
  /** -1 on SQLite, NULL on PostgreSQL */
  readonly unlimited: number | null;
}

/** Appends `col IN (…values)` to a WHERE list being built; nothing when values is undefined. */
function whereIn(
  d: SqlDialect,
  where: string[],
  args: unknown[],
  col: string,
  values: readonly string[] | undefined,
): void {
  if (!values) return;
  const list = d.listIn(col, values);
  where.push(list.sql);
  args.push(...list.args);
}

/** Appends `col = ?` for each value that is given (not undefined; `skipEmpty`: not "" either). */
function whereEq(
  where: string[],
  args: unknown[],
  pairs: readonly (readonly [string, unknown])[],
  skipEmpty = false,
): void {
  for (const [col, v] of pairs) {
    if (v === undefined || (skipEmpty && (v === "" || v === null))) continue;
    where.push(`${col} = ?`);
    args.push(v);
  }
}

export function taskListSql(d: SqlDialect, q: TaskQuery): { sql: string; args: unknown[] } {
  const where: string[] = [];
  const args: unknown[] = [];
  whereEq(
    where,
    args,
    [
      ["mission_id", q.missionId],
      ["domain_id", q.domainId],
    ],
    true,
  );
  whereIn(d, where, args, "domain_id", q.domainIds);
  whereEq(
    where,
    args,
    [
      ["kind", q.kind],
      ["status", q.status],
    ],
    true,
  );
  if (q.held) where.push("status IN ('claimed', 'running')");
  whereEq(
    where,
    args,
    [
      ["claimed_by", q.claimedBy],
      ["parent_task_id", q.parentTaskId],
    ],
    true,
  );
  if (q.afterTaskId) {
    where.push("seq > (SELECT seq FROM tasks WHERE id = ?)");
    args.push(q.afterTaskId);
  }
  args.push(q.limit && q.limit > 0 ? q.limit : d.unlimited);
  return {
    sql: `SELECT * FROM tasks ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY seq LIMIT ?`,
    args,
  };
}

export function taskUpdateSql(
  d: SqlDialect,
  id: string,
  patch: TaskPatch,
  expect?: TaskExpectation,
): { sql: string; args: unknown[] } {
  const sets: string[] = [];
  const args: unknown[] = [];
  for (const [k, v] of Object.entries(patch) as [keyof TaskPatch, unknown][]) {
    if (v === undefined || !TASK_COLUMNS[k]) continue;
    sets.push(`${TASK_COLUMNS[k]} = ?`);
    args.push(JSON_TASK_FIELDS.has(k) && v !== null ? JSON.stringify(v) : v);
  }
  const where = ["id = ?"];
  args.push(id);
  whereIn(d, where, args, "status", expect?.status);
  whereEq(where, args, [
    ["claimed_by", expect?.claimedBy],
    ["attempts", expect?.attempts],
    ["lease_id", expect?.leaseId],
  ]);
  if (expect?.leaseAfterMs !== undefined) {
    where.push("(lease_expires_ms IS NULL OR lease_expires_ms > ?)");
    args.push(expect.leaseAfterMs);
  }
  if (!sets.length) sets.push("id = id");
  return { sql: `UPDATE tasks SET ${sets.join(", ")} WHERE ${where.join(" AND ")} RETURNING *`, args };
}

export function eventFilterSql(d: SqlDialect, q: EventQuery): { where: string[]; args: unknown[] } {
  const where: string[] = [];
  const args: unknown[] = [];
  // one task's progress: the literal lets the planner use the partial index events_task_progress
  if (q.taskId && q.types?.length === 1 && q.types[0] === "progress") where.push("type = 'progress'");
  else if (q.types?.length) whereIn(d, where, args, "type", q.types);
  whereEq(
    where,
    args,
    [
      ["domain_id", q.domainId],
      ["mission_id", q.missionId],
      ["agent_id", q.agentId],
      ["session_id", q.sessionId],
      ["task_id", q.taskId],
    ],
    true,
  );
  whereIn(d, where, args, "domain_id", q.domainIds);
  return { where, args };
}
