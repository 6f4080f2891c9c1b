// Pieces of the SQLite store that are not the store: the async gate that serializes
// transactions, the lock waits, constraint errors mapped to EpErrors, and task rows read as
// arrays (the claim path's fast read).
import { EpError } from "../../../common/errors.js";
import { toTask } from "../rows.js";
import type { TaskRow } from "../store.js";

export class Gate {
  private holder = false;
  /** waiters in arrival order: hold() callers take the gate when woken, wait() callers look again */
  private readonly queue: (() => void)[] = [];

  get busy(): boolean {
    return this.holder;
  }

  /** Resolves once no transaction holds the gate (check busy again in the step that uses it). */
  async wait(): Promise<void> {
    while (this.holder) await new Promise<void>((r) => this.queue.push(r));
  }

  async hold<T>(fn: () => Promise<T>): Promise<T> {
    // taken in the same synchronous step as the check, or handed over by release(): two waiters
    // never enter together, and a release wakes only the waiters up to the next holder (not every
    // waiter to find the gate taken again: a burst of N transactions cost O(N²) wake-ups)
    if (this.holder) await new Promise<void>((r) => this.queue.push(() => ((this.holder = true), r())));
    else this.holder = true;
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private release(): void {
    this.holder = false;
    while (!this.holder && this.queue.length) this.queue.shift()!();
  }
}

/** Maps constraint violations to the same EpErrors the PostgreSQL store throws. */
export function constraintError(err: unknown, table: string): unknown {
  const code = typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : "";
  const detail = err instanceof Error ? err.message : String(err);
  if (code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "SQLITE_CONSTRAINT_UNIQUE") {
    return new EpError("already_exists", `a row with that key exists already in ${table}`, { table, detail });
  }
  if (code === "SQLITE_CONSTRAINT_FOREIGNKEY")
    return new EpError("not_found", `a row referenced by this ${table} row does not exist`, { table, detail });
  return err;
}

const LOCK_WAIT_MS = 5000;

export function isBusy(err: unknown): boolean {
  return (
    typeof err === "object" &&
    err !== null &&
    "code" in err &&
    String((err as { code: unknown }).code).startsWith("SQLITE_BUSY")
  );
}

/** Waits a little for another connection to release the write lock, up to LOCK_WAIT_MS in all. */
export async function lockBackoff(attempt: number, started: number): Promise<void> {
  if (Date.now() - started > LOCK_WAIT_MS) {
    throw new EpError(
      "unavailable",
      `the SQLite database stayed locked by another connection for ${LOCK_WAIT_MS / 1000} s`,
    );
  }
  if (attempt < 3) await new Promise((r) => setImmediate(r));
  else await new Promise((r) => setTimeout(r, Math.min(20, attempt - 2)));
}

export type TaskColumnIndex = Record<(typeof TASK_ROW_COLUMNS)[number], number>;
const TASK_ROW_COLUMNS = [
  "id",
  "domain_id",
  "mission_id",
  "kind",
  "title",
  "description",
  "status",
  "claim_policy",
  "priority",
  "capabilities",
  "assignee_agent_id",
  "attempts",
  "max_attempts",
  "runtime",
  "input",
  "result",
  "claimed_by",
  "lease_expires_ms",
  "parent_task_id",
  "created_at",
  "updated_at",
  "lease_id",
  "depends_on",
  "step",
  "has_dependents",
] as const;

export function taskFromValues(v: unknown[], ix: TaskColumnIndex): TaskRow {
  return toTask({
    id: v[ix.id],
    domain_id: v[ix.domain_id],
    mission_id: v[ix.mission_id],
    kind: v[ix.kind],
    title: v[ix.title],
    description: v[ix.description],
    status: v[ix.status],
    claim_policy: v[ix.claim_policy],
    priority: v[ix.priority],
    capabilities: v[ix.capabilities],
    assignee_agent_id: v[ix.assignee_agent_id],
    attempts: v[ix.attempts],
    max_attempts: v[ix.max_attempts],
    runtime: v[ix.runtime],
    input: v[ix.input],
    result: v[ix.result],
    claimed_by: v[ix.claimed_by],
    lease_expires_ms: v[ix.lease_expires_ms],
    parent_task_id: v[ix.parent_task_id],
    created_at: v[ix.created_at],
    updated_at: v[ix.updated_at],
    lease_id: v[ix.lease_id],
    depends_on: v[ix.depends_on],
    step: v[ix.step],
    has_dependents: v[ix.has_dependents],
  });
}
