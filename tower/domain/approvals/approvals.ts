// What agents ask a person to allow (ApprovalService). An agent running with permission = "ask"
// turns each tool-permission request into an approval: its node asks (RequestPermission), then
// holds WaitApproval open until a person of the task's domain approves or rejects it, or the
// request's timeout passes (which rejects: status expired). A person decides; an agent's node
// or token never decides its own approvals. Every request and decision is an event of type
// "approval" (permission.requested, permission.decided) in the task's domain.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { durationMs, type Duration } from "@bufbuild/protobuf/wkt";
import { timestampOf } from "../../../common/vocab.js";
import { EpError, invalidField } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import * as pb from "../../../gen/ep/tower/v1/approvals_pb.js";
import type { ApprovalRow, ApprovalState } from "../../store/approval-store.js";
import { authorize, principalOf, scopeDomains, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { commit } from "../event-hub.js";
import { valueOf, wordOf } from "../convert.js";
import { decodePageToken, encodePageToken, checkPageSize } from "../paging.js";
import { text } from "../work/index.js";

export const DEFAULT_PERMISSION_TIMEOUT_MS = 10 * 60_000;
const MAX_PERMISSION_TIMEOUT_MS = 24 * 3_600_000;
const DEFAULT_WAIT_MS = 30_000;
const MAX_WAIT_MS = 60_000;
const MAX_OPTIONS = 8;
const MAX_PATHS = 64;
const MAX_ARGUMENTS_BYTES = 64 * 1024;

/** An option's kind as its stored word; unset or a number the enum does not have is refused. */
function optionKind(kind: pb.PermissionOptionKind, field: string): string {
  const word = wordOf(pb.PermissionOptionKindSchema, kind, field);
  if (!word) throw invalidField(field, "is required: allow_once, allow_always, reject_once or reject_always");
  return word;
}

export function approvalToPb(a: ApprovalRow): pb.Approval {
  return create(pb.ApprovalSchema, {
    id: a.id,
    kind: a.kind,
    domainId: a.domainId,
    missionId: a.missionId,
    taskId: a.taskId,
    agentId: a.agentId,
    nodeId: a.nodeId,
    tool: a.tool,
    title: a.title,
    arguments: a.arguments as JsonObject,
    paths: a.paths,
    options: a.options.map((o) =>
      create(pb.PermissionOptionSchema, {
        ...o,
        kind: valueOf<pb.PermissionOptionKind>(pb.PermissionOptionKindSchema, o.kind),
      }),
    ),
    status: valueOf<pb.ApprovalStatus>(pb.ApprovalStatusSchema, a.status),
    optionId: a.optionId,
    decidedBy: a.decidedBy,
    decideTime: timestampOf(a.decidedAt),
    createTime: timestampOf(a.createdAt),
    expireTime: timestampOf(a.expiresAt),
    reason: a.reason,
  });
}

/** A Duration field in ms: `fallback` when unset, else within (0, max]. */
function durationField(d: Duration | undefined, field: string, fallback: number, max: number): number {
  if (!d) return fallback;
  const ms = durationMs(d);
  if (!(ms > 0)) throw invalidField(field, "must be positive");
  if (ms > max) throw invalidField(field, `must be at most ${max / 1000} s`);
  return ms;
}

function checkOptions(options: readonly pb.PermissionOption[]): ApprovalRow["options"] {
  if (options.length > MAX_OPTIONS) throw invalidField("options", `has more than ${MAX_OPTIONS} entries`);
  const seen = new Set<string>();
  return options.map((o, i) => {
    const optionId = text(`options[${i}].option_id`, o.optionId, { required: true, max: 200 });
    if (seen.has(optionId)) throw invalidField(`options[${i}].option_id`, `repeats ${JSON.stringify(optionId)}`);
    seen.add(optionId);
    return {
      optionId,
      name: text(`options[${i}].name`, o.name, { max: 200 }),
      kind: optionKind(o.kind, `options[${i}].kind`),
    };
  });
}

/** The reads and decisions both sides share: find, expire, decide, wait for a decision. */
function approvalRecords(deps: Deps) {
  const { store, clock, hub } = deps;
  const now = () => clock.now();

  async function load(caller: Caller, id: string): Promise<ApprovalRow> {
    const a = id ? await store.getApproval(id) : undefined;
    const scope = scopeDomains(caller);
    if (!a || (scope && !scope.includes(a.domainId)))
      throw new EpError("approval_not_found", `approval ${id || "(none)"} does not exist`, { field: "approval_id" });
    authorize(caller, "read", { domainId: a.domainId });
    return a;
  }

  /**
   * Marks a pending approval expired (and says so on the stream) when its time has passed or the
   * run that asked is over (its task finished, failed, was cancelled or requeued, or another agent
   * holds it now: nobody waits for the answer); returns the row as it is now.
   */
  async function expireIfDue(a: ApprovalRow): Promise<ApprovalRow> {
    if (a.status !== "pending") return a;
    if (Date.parse(a.expiresAt) <= now())
      return decide(a, { status: "expired", optionId: "", decidedBy: "", reason: "nobody decided before the timeout" });
    const t = await store.getTask(a.taskId);
    if (t && (t.status === "claimed" || t.status === "running") && t.claimedBy === a.agentId) return a;
    const reason = t
      ? `the run that asked is over: the task is ` +
        `${t.status}${t.claimedBy && t.claimedBy !== a.agentId ? ` and held by ${t.claimedBy}` : ""}`
      : "the task is gone";
    return decide(a, { status: "expired", optionId: "", decidedBy: "", reason });
  }

  async function decide(
    a: ApprovalRow,
    d: { status: Exclude<ApprovalState, "pending">; optionId: string; decidedBy: string; reason: string },
  ): Promise<ApprovalRow> {
    const decided = await commit(deps, async (tx, emit) => {
      const row = await tx.decideApproval(a.id, { ...d, decidedAt: new Date(now()).toISOString() });
      if (!row) return undefined;
      emit({
        type: "approval",
        name: "permission.decided",
        domainId: row.domainId,
        missionId: row.missionId,
        agentId: row.agentId,
        taskId: row.taskId,
        status: row.status,
        payload: {
          approval_id: row.id,
          tool: row.tool,
          status: row.status,
          option_id: row.optionId,
          decided_by: row.decidedBy,
          reason: row.reason,
        },
      });
      return row;
    });
    if (decided) return decided;
    // someone decided first (or it expired): the row as it stands
    return (await store.getApproval(a.id))!;
  }

  /** Resolves when approval `id` is decided (an event says so), or after `ms`. */
  function decidedOrTimeout(id: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        unsubscribe();
        clock.clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const unsubscribe = hub.subscribe((rows) => {
        if (
          rows.some(
            (r) =>
              r.name === "permission.decided" &&
              (r.payload as { approval_id?: string } | undefined)?.approval_id === id,
          )
        )
          done();
      });
      const timer = clock.setTimeout(done, ms);
      signal?.addEventListener("abort", done);
    });
  }

  /** An approval a person may decide now: pending, in a domain the caller operates. */
  async function decidable(caller: Caller, id: string): Promise<ApprovalRow> {
    const a = await expireIfDue(await load(caller, id));
    if (caller.role === "node" || caller.role === "agent") {
      throw new EpError(
        "forbidden",
        `role ${caller.role} may not decide approvals: a person (operator or admin) decides what an agent may do`,
        { role: caller.role, needs: "operate" },
      );
    }
    authorize(caller, "operate", { domainId: a.domainId });
    if (a.status !== "pending")
      throw new EpError("approval_decided", `approval ${a.id} is already ${a.status}`, { status: a.status });
    return a;
  }

  async function settle(
    a: ApprovalRow,
    d: { status: "approved" | "rejected"; optionId: string; decidedBy: string; reason: string },
  ): Promise<ApprovalRow> {
    const row = await decide(a, d);
    if (row.status !== d.status)
      throw new EpError("approval_decided", `approval ${a.id} is already ${row.status}`, { status: row.status });
    return row;
  }

  return { load, expireIfDue, decidedOrTimeout, decidable, settle };
}

export function createApprovalService(deps: Deps) {
  const { store, clock } = deps;
  const now = () => clock.now();
  const { load, expireIfDue, decidedOrTimeout, decidable, settle } = approvalRecords(deps);

  return {
    async requestPermission(caller: Caller, req: pb.RequestPermissionRequest): Promise<pb.RequestPermissionResponse> {
      const taskId = text("task_id", req.taskId, { required: true, max: 200 });
      const task = await store.getTask(taskId);
      const scope = scopeDomains(caller);
      if (!task || (scope && !scope.includes(task.domainId)))
        throw new EpError("task_not_found", `task ${taskId} does not exist`, { field: "task_id" });
      authorize(caller, "work", { domainId: task.domainId });
      if (task.status !== "claimed" && task.status !== "running")
        throw new EpError(
          "task_finished",
          `task ${taskId} is ${task.status}: only a claimed or running task's agent asks for permissions`,
        );
      const agentId = text("agent_id", req.agentId, { max: 200 }) || task.claimedBy || task.assigneeAgentId || "";
      const args = req.arguments ?? {};
      if (JSON.stringify(args).length > MAX_ARGUMENTS_BYTES)
        throw invalidField("arguments", `is larger than ${MAX_ARGUMENTS_BYTES} bytes`);
      if (req.paths.length > MAX_PATHS) throw invalidField("paths", `has more than ${MAX_PATHS} entries`);
      const timeoutMs = durationField(req.timeout, "timeout", DEFAULT_PERMISSION_TIMEOUT_MS, MAX_PERMISSION_TIMEOUT_MS);
      const t = now();
      const row: ApprovalRow = {
        id: newId("apr", t),
        kind: "permission",
        domainId: task.domainId,
        missionId: task.missionId,
        taskId: task.id,
        agentId,
        nodeId: caller.nodeId ?? "",
        tool: text("tool", req.tool, { required: true, max: 200 }),
        title: text("title", req.title, { max: 2000 }),
        arguments: args as Record<string, unknown>,
        paths: req.paths.map((p, i) => text(`paths[${i}]`, p, { required: true, max: 4096 })),
        options: checkOptions(req.options),
        status: "pending",
        optionId: "",
        decidedBy: "",
        decidedAt: "",
        reason: "",
        createdAt: new Date(t).toISOString(),
        expiresAt: new Date(t + timeoutMs).toISOString(),
      };
      await commit(deps, async (tx, emit) => {
        await tx.insertApproval(row);
        emit({
          type: "approval",
          name: "permission.requested",
          domainId: row.domainId,
          missionId: row.missionId,
          agentId: row.agentId,
          taskId: row.taskId,
          status: "pending",
          payload: {
            approval_id: row.id,
            tool: row.tool,
            title: row.title,
            paths: row.paths,
            expires_at: row.expiresAt,
          },
        });
      });
      return create(pb.RequestPermissionResponseSchema, { approval: approvalToPb(row) });
    },

    async waitApproval(
      caller: Caller,
      req: pb.WaitApprovalRequest,
      signal?: AbortSignal,
    ): Promise<pb.WaitApprovalResponse> {
      let a = await load(caller, req.approvalId);
      authorize(caller, "work", { domainId: a.domainId });
      const waitMs = durationField(req.wait, "wait", DEFAULT_WAIT_MS, MAX_WAIT_MS);
      a = await expireIfDue(a);
      if (a.status === "pending") {
        const left = Math.max(0, Date.parse(a.expiresAt) - now());
        await decidedOrTimeout(a.id, Math.min(waitMs, left), signal);
        a = await expireIfDue((await store.getApproval(a.id))!);
      }
      return create(pb.WaitApprovalResponseSchema, { approval: approvalToPb(a) });
    },

    async listApprovals(caller: Caller, req: pb.ListApprovalsRequest): Promise<pb.ListApprovalsResponse> {
      authorize(caller, "read", req.domainId ? { domainId: req.domainId } : {});
      const size = checkPageSize(req.pageSize) || 1000;
      const cursor = decodePageToken(req.pageToken);
      const status = (wordOf(pb.ApprovalStatusSchema, req.status, "status") || undefined) as ApprovalState | undefined;
      const scope = scopeDomains(caller);
      const domainIds = req.domainId ? (scope && !scope.includes(req.domainId) ? [] : [req.domainId]) : scope;
      const rows = await store.listApprovals({
        status,
        domainIds,
        taskId: req.taskId || undefined,
        afterId: cursor?.id,
        limit: size + 1,
      });
      // a pending approval past its time is shown as what it is
      const page = await Promise.all(rows.slice(0, size).map(expireIfDue));
      const shown = status ? page.filter((a) => a.status === status) : page;
      const more = rows.length > size;
      return create(pb.ListApprovalsResponseSchema, {
        approvals: shown.map(approvalToPb),
        nextPageToken: more
          ? encodePageToken({ id: page[page.length - 1].id, at: (cursor?.at ?? 0) + page.length })
          : "",
      });
    },

    async getApproval(caller: Caller, req: pb.GetApprovalRequest): Promise<pb.GetApprovalResponse> {
      const a = await expireIfDue(await load(caller, req.approvalId));
      return create(pb.GetApprovalResponseSchema, { approval: approvalToPb(a) });
    },

    async approve(caller: Caller, req: pb.ApproveRequest): Promise<pb.ApproveResponse> {
      const a = await decidable(caller, req.approvalId);
      const allows = a.options.filter((o) => o.kind.startsWith("allow"));
      let optionId = req.optionId.trim();
      if (optionId) {
        if (!allows.some((o) => o.optionId === optionId)) {
          throw invalidField(
            "option_id",
            `is not one of the request's allow options (${allows.map((o) => o.optionId).join(", ") || "none"})`,
          );
        }
      } else optionId = (allows.find((o) => o.kind === "allow_once") ?? allows[0])?.optionId ?? "";
      return create(pb.ApproveResponseSchema, {
        approval: approvalToPb(
          await settle(a, { status: "approved", optionId, decidedBy: principalOf(caller), reason: "" }),
        ),
      });
    },

    async reject(caller: Caller, req: pb.RejectRequest): Promise<pb.RejectResponse> {
      const a = await decidable(caller, req.approvalId);
      const optionId =
        (a.options.find((o) => o.kind === "reject_once") ?? a.options.find((o) => o.kind.startsWith("reject")))
          ?.optionId ?? "";
      const reason = text("reason", req.reason, { max: 2000 });
      return create(pb.RejectResponseSchema, {
        approval: approvalToPb(
          await settle(a, { status: "rejected", optionId, decidedBy: principalOf(caller), reason }),
        ),
      });
    },
  };
}

export type ApprovalServiceImpl = ReturnType<typeof createApprovalService>;
