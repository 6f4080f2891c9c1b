// Tasks that wait for other tasks (docs/pipelines.md). A task created with depends_on waits
// (status waiting, never claimed) until every parent succeeded; the parent's outcome decides
// in the same commit: its success queues the children whose parents have all succeeded now,
// its final failure or cancellation cancels its dependents, transitively, naming it. Retrying
// that parent brings them back to waiting. Every step reads the edges of that one parent
// (task_deps), so it costs O(children), never a scan of the mission.
import { EpError } from "../../../common/errors.js";
import type { Store, TaskRow } from "../../store/store.js";
import type { Emit } from "../event-hub.js";
import { taskEvent } from "./support.js";

/** The most parents one task may name: a join, not a mission's worth. */
export const MAX_PARENTS = 100;

/** Why a dependent was cancelled: the parent's id and what became of it. */
export const parentReason = (parent: Pick<TaskRow, "id" | "status">) =>
  `parent ${parent.id} ${parent.status === "cancelled" ? "was cancelled" : "failed"}`;

/**
 * The parents a new task names, read and checked in the creating transaction: each exists, is
 * claimable and is in `domainId`; none failed or was cancelled. Returns the status the child
 * starts in: queued when every parent succeeded already (or it has none), else waiting.
 */
export async function checkParents(
  tx: Store,
  domainId: string,
  parentIds: readonly string[],
  field = "depends_on",
): Promise<"queued" | "waiting"> {
  if (parentIds.length > MAX_PARENTS)
    throw new EpError("parent_invalid", `${field}: at most ${MAX_PARENTS} parents (got ${parentIds.length})`, {
      field,
    });
  let waiting = false;
  for (const [i, id] of parentIds.entries()) {
    const at = `${field}[${i}]`;
    // read through the row's lock (markParent): an outcome of this parent committing meanwhile
    // on another connection is seen here, or sees this child (docs/pipelines.md, "Races")
    const p = id ? await tx.markParent(id) : undefined;
    if (!p)
      throw new EpError(
        "parent_invalid",
        `${at}: task ${JSON.stringify(id)} does not exist; a task depends only on tasks that exist already`,
        { field: at, task_id: id },
      );
    if (p.domainId !== domainId) {
      throw new EpError(
        "parent_invalid",
        `${at}: task ${id} is in domain ${p.domainId}, not ${domainId}; a task depends only on tasks of its own domain`,
        { field: at, task_id: id, domain_id: p.domainId },
      );
    }
    if (p.kind !== "claimable")
      throw new EpError(
        "parent_invalid",
        `${at}: task ${id} is a Kanban task; only claimable tasks have an outcome to wait for`,
        { field: at, task_id: id },
      );
    if (p.parentTaskId)
      throw new EpError(
        "parent_invalid",
        `${at}: task ${id} is one run of broadcast ${p.parentTaskId}; depend on the broadcast`,
        { field: at, task_id: id },
      );
    if (p.status === "failed" || p.status === "cancelled") {
      throw new EpError(
        "parent_failed",
        `${at}: task ${id} is ${p.status}; retry it first ('ep task retry ${id}') or depend on another task`,
        { field: at, task_id: id, status: p.status },
      );
    }
    if (p.status !== "succeeded") waiting = true;
  }
  return waiting ? "waiting" : "queued";
}

/**
 * What a task's final outcome does to the tasks that wait for it, in the commit that made it
 * final: every caller that commits a terminal state calls this, once, with the updated row (the
 * row as the commit wrote it: its has_dependents is what tells a task nobody waits for).
 */
export async function settleDependents(tx: Store, emit: Emit, t: TaskRow, at: string): Promise<void> {
  if (!t.hasDependents) return; // nearly every task: no edges to read
  if (t.status === "succeeded") {
    for (const child of await tx.queueReadyChildren(t.id, at)) taskEvent(emit, child, "task.queued", { after: t.id });
  } else if (t.status === "failed" || t.status === "cancelled") {
    await cancelDependents(tx, emit, t, parentReason(t), at);
  }
}

/** The waiting dependents of `t`, and theirs, cancelled with `reason` (the first parent that failed). */
async function cancelDependents(tx: Store, emit: Emit, t: TaskRow, reason: string, at: string): Promise<void> {
  for (const child of await tx.listChildren(t.id)) {
    if (child.status !== "waiting") continue;
    const u = await tx.updateTask(
      child.id,
      { status: "cancelled", result: { output: "", error: reason }, updatedAt: at },
      { status: ["waiting"] },
    );
    if (!u) continue;
    taskEvent(emit, u, "task.cancelled", { reason, cancelled_by: t.id });
    await cancelDependents(tx, emit, u, reason, at);
  }
}

/**
 * After `t` was retried: its dependents that were cancelled because of it (and theirs) wait
 * again, unless another of their parents failed too: then they stay cancelled, naming that one.
 * `root` is the task whose failure the cascade named (the reason its dependents carry).
 */
export async function restoreDependents(tx: Store, emit: Emit, t: TaskRow, at: string, root = t.id): Promise<void> {
  if (!t.hasDependents) return;
  const children = (await tx.listChildren(t.id)).filter(
    (c) => c.status === "cancelled" && c.result?.error.startsWith(`parent ${root} `),
  );
  if (!children.length) return;
  const parents = await tx.listParentStates(children.map((c) => c.id));
  for (const child of children) {
    const failed = parents.find(
      (p) => p.childId === child.id && p.parentId !== t.id && (p.status === "failed" || p.status === "cancelled"),
    );
    if (failed) {
      await renameReason(tx, child, root, parentReason({ id: failed.parentId, status: failed.status }), at);
      continue;
    }
    const u = await tx.updateTask(
      child.id,
      { status: "waiting", attempts: 0, claimedBy: "", leaseExpiresMs: null, result: null, updatedAt: at },
      { status: ["cancelled"] },
    );
    if (!u) continue;
    taskEvent(emit, u, "task.waiting", { after: t.id });
    await restoreDependents(tx, emit, u, at, root);
  }
}

/**
 * A cancelled task and the dependents cancelled with it, now naming another failed parent (so that parent's retry
 * brings them back).
 */
async function renameReason(tx: Store, t: TaskRow, root: string, reason: string, at: string): Promise<void> {
  await tx.updateTask(t.id, { result: { output: "", error: reason }, updatedAt: at }, { status: ["cancelled"] });
  for (const child of await tx.listChildren(t.id)) {
    if (child.status === "cancelled" && child.result?.error.startsWith(`parent ${root} `))
      await renameReason(tx, child, root, reason, at);
  }
}

/**
 * The status a retried task starts in: waiting while a parent has not succeeded, queued when all
 * have; refused while a parent is failed or cancelled (it would wait for nothing).
 */
export async function retryStatus(tx: Store, t: TaskRow): Promise<"queued" | "waiting"> {
  if (!t.dependsOn.length) return "queued";
  const parents = await tx.listParentStates([t.id]);
  const failed = parents.find((p) => p.status === "failed" || p.status === "cancelled");
  if (failed) {
    throw new EpError(
      "parent_failed",
      `task ${t.id}'s parent ${failed.parentId} is ${failed.status}; retry the ` +
        `parent ('ep task retry ${failed.parentId}'), which brings this task back`,
      {
        task_id: failed.parentId,
        status: failed.status,
      },
    );
  }
  return parents.every((p) => p.status === "succeeded") ? "queued" : "waiting";
}

/** The parents each waiting task still waits for (the others' lists are empty), in one read. */
export async function waitingOn(store: Store, tasks: readonly TaskRow[]): Promise<Map<string, string[]>> {
  const waiting = tasks.filter((t) => t.status === "waiting");
  const out = new Map<string, string[]>();
  if (!waiting.length) return out;
  for (const p of await store.listParentStates(waiting.map((t) => t.id))) {
    if (p.status === "succeeded") continue;
    const list = out.get(p.childId) ?? [];
    list.push(p.parentId);
    out.set(p.childId, list);
  }
  // in the order the task named them
  for (const t of waiting) out.get(t.id)?.sort((a, b) => t.dependsOn.indexOf(a) - t.dependsOn.indexOf(b));
  return out;
}
