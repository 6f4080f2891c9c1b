// ep approvals ls|approve|reject: pending actions of AI console sessions.
import { AiService, ApproveActionResponseSchema, PendingActionSchema, RejectActionResponseSchema } from "../../gen/ep/tower/v1/ai_pb.js";
import type { Context } from "../context.js";
import { json, table, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";

/** Every pending action the caller can see, oldest first. */
export async function pendingActions(ctx: Context): Promise<Row[]> {
  const ai = tower(ctx, AiService);
  const out: Row[] = [];
  for (const s of (await ai.listSessions({})).sessions) {
    const detail = await ai.getSession({ sessionId: s.id });
    for (const a of detail.actions) if (a.status === "pending") out.push(protoJson(PendingActionSchema, a));
  }
  return out.sort((a, b) => String(a.created_at).localeCompare(String(b.created_at)));
}

export async function run(ctx: Context): Promise<number> {
  const op = ctx.spec.path[1];
  if (op === "ls") {
    const actions = await pendingActions(ctx);
    ctx.out(ctx.json ? json({ actions }) : table(actions, { session: "session_id", action: "id", tool: "tool", summary: "summary", created: "created_at" }));
    return 0;
  }
  const [sessionId, actionId] = ctx.args;
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
