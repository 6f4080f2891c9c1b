// ep approvals ls|approve|reject: what waits for a person — agents' tool-permission requests
// (ApprovalService, ids apr_…) and pending actions of AI console sessions (<session> <action>).
import {
  AiService,
  ApproveActionResponseSchema,
  PendingActionSchema,
  RejectActionResponseSchema,
  ActionStatus,
} from "../../gen/ep/tower/v1/ai_pb.js";
import { ApprovalSchema, ApprovalService, ApprovalStatus, type Approval } from "../../gen/ep/tower/v1/approvals_pb.js";
import { EpError } from "../../common/errors.js";
import type { Context } from "../context.js";
import { json, table, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";

/** Every pending action the caller can see, oldest first. */
export async function pendingActions(ctx: Context): Promise<Row[]> {
  const ai = tower(ctx, AiService);
  const out: Row[] = [];
  for (const s of (await ai.listSessions({})).sessions) {
    const detail = await ai.getSession({ sessionId: s.id });
    for (const a of detail.actions) if (a.status === ActionStatus.PENDING) out.push(protoJson(PendingActionSchema, a));
  }
  return out.sort((a, b) => String(a.created_at).localeCompare(String(b.created_at)));
}

/** An approval as the CLI prints it: proto field names, lowercase status. */
export const approvalJson = (a: Approval): Row => protoJson(ApprovalSchema, a) as Row;

async function pendingApprovals(ctx: Context): Promise<Row[]> {
  return (await tower(ctx, ApprovalService).listApprovals({ status: ApprovalStatus.PENDING })).approvals.map(
    approvalJson,
  );
}

export async function run(ctx: Context): Promise<number> {
  const op = ctx.spec.path[1];
  if (op === "ls") {
    const [approvals, actions] = await Promise.all([pendingApprovals(ctx), pendingActions(ctx)]);
    if (ctx.json) ctx.out(json({ approvals, actions }));
    else {
      // an action is decided by its id alone (act_…); its session is shown by title (--wide: id)
      const { towerNameBook } = await import("../name-book.js");
      const book = towerNameBook(ctx);
      if (actions.length) await book.load("session");
      const wide = ctx.opts.wide === true;
      const rows: Row[] = [
        ...approvals.map((a) => ({
          id: a.id,
          kind: "permission",
          what: `${a.tool}${a.title ? `: ${a.title}` : ""}`,
          for: `task ${a.task_id}`,
          created: a.create_time,
          expires: a.expire_time,
        })),
        ...actions.map((a) => ({
          id: a.id,
          kind: "action",
          what: a.summary || a.tool,
          for: book.lookup(a.session_id) ? `session "${book.lookup(a.session_id)}"` : "an AI session",
          session_id: a.session_id,
          created: a.created_at,
          expires: "",
        })),
      ];
      ctx.out(
        table(rows, {
          id: "id",
          kind: "kind",
          what: "what",
          for: "for",
          ...(wide ? { session: "session_id" } : {}),
          created: "created",
          expires: "expires",
        }),
      );
    }
    return 0;
  }
  if (ctx.args.length === 1 && !ctx.args[0].startsWith("act_")) return decideApproval(ctx, op, ctx.args[0]);
  const [sessionId, actionId] = ctx.args.length === 2 ? ctx.args : [await sessionOf(ctx, ctx.args[0]), ctx.args[0]];
  const ai = tower(ctx, AiService);
  const res =
    op === "approve"
      ? protoJson(ApproveActionResponseSchema, await ai.approveAction({ sessionId, actionId }))
      : protoJson(RejectActionResponseSchema, await ai.rejectAction({ sessionId, actionId }));
  if (ctx.json) ctx.out(json(res));
  else {
    const a = res.action as Row;
    ctx.out(`action ${actionId} ${a.status}${a.error ? `; execution failed: ${a.error}` : ""}`);
    if (a.result && Object.keys(a.result as object).length) ctx.out(json(a.result));
  }
  return 0;
}

/** The session of a pending action, found by the action's id among what waits. */
async function sessionOf(ctx: Context, actionId: string): Promise<string> {
  const hit = (await pendingActions(ctx)).find((a) => a.id === actionId);
  if (!hit)
    throw new EpError(
      "action_not_found",
      `no pending action ${actionId} ('ep approvals ls' lists them; a decided one ` +
        `needs its session: ep approvals ${ctx.spec.path[1]} <session> ${actionId})`,
    );
  return String(hit.session_id);
}

async function decideApproval(ctx: Context, op: string, approvalId: string): Promise<number> {
  const approvals = tower(ctx, ApprovalService);
  const option = typeof ctx.opts.option === "string" ? ctx.opts.option : "";
  const reason = typeof ctx.opts.reason === "string" ? ctx.opts.reason : "";
  const decided =
    op === "approve"
      ? (await approvals.approve({ approvalId, optionId: option })).approval!
      : (await approvals.reject({ approvalId, reason })).approval!;
  const row = approvalJson(decided);
  if (ctx.json) ctx.out(json({ approval: row }));
  else
    ctx.out(
      `approval ${decided.id} ${row.status}${decided.optionId ? ` (${decided.optionId})` : ""}: ` +
        `${decided.tool} for task ${decided.taskId}`,
    );
  return 0;
}
