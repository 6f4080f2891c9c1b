// Tasks as records: create (a broadcast task creates one run per matching agent), read, list,
// update, delete. The claim loop over them is work/claims.ts.
import { create } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { EpError, invalidField } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import type { Store, TaskQuery, TaskRow } from "../../store/store.js";
import { authorize, scopeDomains, type Caller } from "../caller.js";
import { taskMsg, wordOf } from "../convert.js";
import {
  ClaimPolicySchema,
  RuntimeSchema,
  TaskKindSchema,
  TaskStatusSchema,
  type Task,
} from "../../../gen/ep/tower/v1/resources_pb.js";
import { commit } from "../event-hub.js";
import { createIdempotency } from "../idempotency.js";
import { assignmentEvent, covers, MAX_TEXT, oneOf, taskEvent, text, CLAIM_POLICIES, KANBAN_STATES } from "./support.js";
import type { WorkContext } from "./context.js";
import { decodePageToken, encodePageToken } from "../paging.js";
import { taskWait } from "./task-wait.js";
import { checkParents, waitingOn } from "./dependencies.js";
import { claimForNew, sendNext } from "./push.js";
import type { Emit } from "../event-hub.js";

export function createTaskCatalog(ctx: WorkContext) {
  const { deps, store, now, mustDomain, mustMission, mustTask, missionDomain } = ctx;
  const idempotent = createIdempotency(deps);
  return {
    // ---- tasks

    async createTask(caller: Caller, req: pb.CreateTaskRequest): Promise<pb.CreateTaskResponse> {
      const checked = checkNewTask(req);
      const call = {
        caller,
        method: "WorkService.CreateTask",
        input: pb.CreateTaskRequestSchema,
        request: req,
        output: pb.CreateTaskResponseSchema,
      };
      let handed: Awaited<ReturnType<typeof claimForNew>>;
      const out = await idempotent(call, async (tx, emit) => {
        const mission = await missionDomain(tx, req.missionId);
        authorize(caller, "operate", { domainId: mission.domainId });
        const { task, runs } = await insertNewTask(ctx, tx, emit, mission, req, checked);
        // an idle agent linked here takes it in this commit (work/push.ts); the answer is the task as created
        handed = await claimForNew(ctx, tx, emit, task);
        return create(pb.CreateTaskResponseSchema, { task: taskMsg(task), runs: runs.map(taskMsg) });
      }).catch((err: unknown) => {
        // rolled back: the agent it picked was not claimed for
        if (handed) ctx.handoff?.unpick(handed.agent.id);
        throw err;
      });
      if (handed) sendNext(ctx, handed.agent, handed.next);
      return out;
    },

    async getTask(caller: Caller, req: pb.GetTaskRequest): Promise<pb.GetTaskResponse> {
      const t = await mustTask(store, req.taskId);
      authorize(caller, "read", { domainId: t.domainId });
      const runs = t.claimPolicy === "broadcast" ? await store.listTasks({ parentTaskId: t.id }) : [];
      const waits = await waitingOn(store, [t, ...runs]);
      const msg = (r: TaskRow) => withWaitingOn(taskMsg(r), waits);
      return create(pb.GetTaskResponseSchema, {
        task: msg(t),
        runs: runs.map(msg),
        wait: await taskWait(store, t, { waitingOn: waits.get(t.id) }),
      });
    },

    async listTasks(caller: Caller, req: pb.ListTasksRequest): Promise<pb.ListTasksResponse> {
      const kind = wordOf(TaskKindSchema, req.kind, "kind");
      const status = wordOf(TaskStatusSchema, req.status, "status");
      if (req.limit < 0) throw invalidField("limit", "must not be negative");
      let domainId = req.domainId;
      if (req.missionId) domainId = (await mustMission(store, req.missionId)).domainId;
      else if (domainId) await mustDomain(store, domainId);
      // a caller confined to some domains lists only there
      const scope = domainId ? undefined : scopeDomains(caller);
      if (domainId) authorize(caller, "read", { domainId });
      else authorize(caller, "read");
      const { page, nextPageToken } = await taskPage(
        store,
        { missionId: req.missionId, domainId, domainIds: scope, kind, status },
        req.limit || 1000,
        req.pageToken,
      );
      const waits = await waitingOn(store, page);
      return create(pb.ListTasksResponseSchema, {
        tasks: page.map((r) => withWaitingOn(taskMsg(r), waits)),
        nextPageToken,
      });
    },

    async updateTask(caller: Caller, req: pb.UpdateTaskRequest): Promise<pb.UpdateTaskResponse> {
      return commit(deps, async (tx, emit) => {
        const t = await mustTask(tx, req.taskId);
        authorize(caller, "operate", { domainId: t.domainId });
        checkUpdateFits(t, req);
        if (req.assigneeAgentId) {
          const a = await tx.getAgent(req.assigneeAgentId);
          if (!a || a.domainId !== t.domainId)
            throw new EpError(
              "agent_not_found",
              `agent ${req.assigneeAgentId} is not enrolled in domain ${t.domainId}`,
            );
        }
        const updated = await tx.updateTask(t.id, {
          title: req.title === undefined ? undefined : text("title", req.title, { required: true }),
          description:
            req.description === undefined ? undefined : text("description", req.description, { max: MAX_TEXT }),
          status:
            req.status === undefined
              ? undefined
              : oneOf("status", wordOf(TaskStatusSchema, req.status, "status"), KANBAN_STATES),
          priority: req.priority,
          assigneeAgentId: req.assigneeAgentId,
          updatedAt: now(),
        });
        taskEvent(emit, updated!, "task.updated");
        if (req.assigneeAgentId && req.assigneeAgentId !== t.assigneeAgentId) assignmentEvent(emit, updated!);
        return create(pb.UpdateTaskResponseSchema, { task: taskMsg(updated!) });
      });
    },

    async deleteTask(caller: Caller, req: pb.DeleteTaskRequest): Promise<pb.DeleteTaskResponse> {
      return commit(deps, async (tx, emit) => {
        const t = await mustTask(tx, req.taskId);
        authorize(caller, "operate", { domainId: t.domainId });
        if (t.kind !== "assigned")
          throw new EpError("task_wrong_kind", "claimable tasks are cancelled, not deleted; use cancel");
        await tx.deleteTask(t.id);
        emit({
          type: "matrix",
          name: "task.deleted",
          domainId: t.domainId,
          missionId: t.missionId,
          taskId: t.id,
          payload: { task_id: t.id },
        });
        return create(pb.DeleteTaskResponseSchema, {});
      });
    },
  };
}

/**
 * A checked new task (checkNewTask) written in the caller's transaction: a broadcast with one run per matching agent, a
 * task with parents waiting for them.
 */
export async function insertNewTask(
  ctx: WorkContext,
  tx: Store,
  emit: Emit,
  mission: { id: string; domainId: string },
  req: pb.CreateTaskRequest,
  checked: NewTask,
  opts: { step?: string; field?: string } = {},
): Promise<{ task: TaskRow; runs: TaskRow[] }> {
  const { clock, limits, now } = ctx;
  const { kind, title, description, runtime, capabilities, claimPolicy, dependsOn } = checked;
  const status = dependsOn.length ? await checkParents(tx, mission.domainId, dependsOn, opts.field) : checked.status;
  if (req.assigneeAgentId) {
    const a = await tx.getAgent(req.assigneeAgentId);
    if (!a || a.domainId !== mission.domainId) {
      throw new EpError(
        "agent_not_found",
        `agent ${req.assigneeAgentId} is not enrolled in domain ${mission.domainId}`,
        { field: "assignee_agent_id" },
      );
    }
  }
  const ts = now();
  const base: TaskRow = {
    leaseId: "",
    id: newId("tsk", clock.now()),
    domainId: mission.domainId,
    missionId: mission.id,
    kind,
    title,
    description,
    status,
    claimPolicy,
    priority: req.priority,
    capabilities,
    assigneeAgentId: req.assigneeAgentId,
    attempts: 0,
    maxAttempts: req.maxAttempts || limits.maxAttempts,
    runtime,
    input: (req.input as JsonObject | undefined) ?? null,
    result: null,
    claimedBy: "",
    leaseExpiresMs: null,
    parentTaskId: "",
    dependsOn,
    step: opts.step ?? "",
    createdAt: ts,
    updatedAt: ts,
  };
  const runs: TaskRow[] = [];
  if (claimPolicy === "broadcast") {
    const agents = (await tx.listAgents({ domainId: mission.domainId })).filter((a) => covers(a, base));
    if (!agents.length)
      throw new EpError("no_matching_agents", `no agent in domain ${mission.domainId} matches this task`);
    for (const a of agents) {
      runs.push({
        ...base,
        id: newId("tsk", clock.now()),
        claimPolicy: "assigned",
        assigneeAgentId: a.id,
        parentTaskId: base.id,
      });
    }
  }
  await tx.insertTask(base);
  // a broadcast's runs wait for its parents too: each run is queued with it
  if (dependsOn.length) await tx.insertTaskDeps(base.id, dependsOn);
  taskEvent(emit, base, "task.created");
  assignmentEvent(emit, base);
  for (const r of runs) {
    await tx.insertTask(r);
    if (dependsOn.length) await tx.insertTaskDeps(r.id, dependsOn);
    taskEvent(emit, r, "task.created");
    assignmentEvent(emit, r);
  }
  return { task: base, runs };
}

export type NewTask = ReturnType<typeof checkNewTask>;

/** A new task's fields, checked: the first field that is wrong is the error. */
export function checkNewTask(req: pb.CreateTaskRequest) {
  const kind = oneOf("kind", wordOf(TaskKindSchema, req.kind, "kind") || "claimable", [
    "assigned",
    "claimable",
  ] as const);
  const askedPolicy = wordOf(ClaimPolicySchema, req.claimPolicy, "claim_policy");
  const askedStatus = wordOf(TaskStatusSchema, req.status, "status");
  const title = text("title", req.title, { required: true });
  const description = text("description", req.description, { max: MAX_TEXT });
  const runtime = wordOf(RuntimeSchema, req.runtime, "runtime");
  // a shell task runs input.command: without one it could only fail when it runs
  if (runtime === "shell") {
    const command = (req.input as JsonObject | undefined)?.command;
    if (command === undefined)
      throw invalidField(
        "input.command",
        "is required for runtime shell (the command to run; ep task submit --command '…')",
      );
    if (typeof command !== "string" || !command.trim())
      throw invalidField("input.command", "must be a non-empty string");
  }
  const capabilities = req.capabilities.map((c, i) => text(`capabilities[${i}]`, c, { required: true, max: 100 }));
  if (req.maxAttempts < 0 || req.maxAttempts > 100) throw invalidField("max_attempts", "must be between 1 and 100");
  if (req.input && JSON.stringify(req.input).length > 256 * 1024) throw invalidField("input", "is larger than 256 KiB");
  const dependsOn = req.dependsOn.map((id, i) => text(`depends_on[${i}]`, id, { required: true, max: 100 }));
  if (new Set(dependsOn).size !== dependsOn.length) throw invalidField("depends_on", "names a task twice");
  // a worktree started from a parent's branch: that parent must be one the task waits for
  const ws = (req.input as JsonObject | undefined)?.workspace;
  const ref = ws && typeof ws === "object" && !Array.isArray(ws) ? (ws as JsonObject).ref : undefined;
  if (typeof ref === "string" && ref.startsWith("task:") && !dependsOn.includes(ref.slice(5))) {
    throw invalidField(
      "input.workspace.ref",
      `${ref} must name one of the task's depends_on (its branch exists once it succeeded)`,
    );
  }
  let claimPolicy = "";
  let status: string;
  if (kind === "claimable") {
    claimPolicy = oneOf("claim_policy", askedPolicy || "first_claim", CLAIM_POLICIES);
    if (askedStatus && askedStatus !== "queued") throw invalidField("status", "a new claimable task is always queued");
    if (claimPolicy === "assigned" && !req.assigneeAgentId)
      throw invalidField("assignee_agent_id", "is required when claim_policy is assigned");
    status = "queued";
  } else {
    if (askedPolicy) throw invalidField("claim_policy", "applies only to claimable tasks");
    if (dependsOn.length)
      throw invalidField("depends_on", "applies only to claimable tasks (a Kanban task is moved by people)");
    status = oneOf("status", askedStatus || "todo", KANBAN_STATES);
  }
  return { kind, title, description, runtime, capabilities, claimPolicy, status, dependsOn };
}

/** A claimable task's status and assignee are the claim loop's: an update may not set them. */
function checkUpdateFits(t: TaskRow, req: pb.UpdateTaskRequest): void {
  if (t.kind !== "claimable") return;
  if (req.status !== undefined)
    throw new EpError(
      "task_wrong_kind",
      "a claimable task's status moves through claim, complete, fail, cancel and retry",
      { field: "status" },
    );
  if (req.assigneeAgentId !== undefined)
    throw new EpError("task_wrong_kind", "a claimable task's assignee is fixed at creation", {
      field: "assignee_agent_id",
    });
}

/** One page of tasks in insertion order; one row past the page says whether there is a next one. */
async function taskPage(
  store: Store,
  query: TaskQuery,
  size: number,
  pageToken: string,
): Promise<{ page: TaskRow[]; nextPageToken: string }> {
  const rows = await store.listTasks({ ...query, afterTaskId: decodePageToken(pageToken)?.id, limit: size + 1 });
  const page = rows.slice(0, size);
  return { page, nextPageToken: rows.length > size ? encodePageToken({ id: page[page.length - 1].id, at: 0 }) : "" };
}

/** A task message with the parents it still waits for (waitingOn: the task's id → those parents). */
export function withWaitingOn(msg: Task, waits: ReadonlyMap<string, string[]>): Task {
  const w = waits.get(msg.id);
  if (w) msg.waitingOn = w;
  return msg;
}
