// Deciding a pending action: one conditional UPDATE (pending -> approved | rejected), so under any
// race exactly one decision wins and only its winner executes the action, once; the outcome is
// recorded and is an event. Approved actions a stopped tower never finished are swept as failed.
import { iso } from "../../../common/clock.js";
import { EpError, toEpError } from "../../../common/errors.js";
import type { AiActionRow, AiSessionRow } from "../../store/ai-store.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { commit } from "../event-hub.js";
import type { ToolExecutor } from "../tools/index.js";
import { actionEvent, small } from "./session-messages.js";

/** An approved action with no outcome after this long was interrupted (tool calls take seconds). */
export const INTERRUPTED_AFTER_MS = 10 * 60_000;

export function createActionDecisions(
  deps: Deps,
  executor: ToolExecutor,
  ownSession: (caller: Caller, sessionId: string) => Promise<AiSessionRow>,
  sessionAction: (session: AiSessionRow, actionId: string) => Promise<AiActionRow>,
) {
  const { store, clock } = deps;
  const now = () => iso(clock.now());

  async function decide(
    caller: Caller,
    req: { sessionId: string; actionId: string },
    status: "approved" | "rejected",
  ): Promise<AiActionRow> {
    authorize(caller, "operate");
    const session = await ownSession(caller, req.sessionId);
    const action = await sessionAction(session, req.actionId);
    const won = await commit(deps, async (tx, emit) => {
      const row = await tx.decideAiAction(action.id, { status, decidedBy: caller.subject, decidedAt: now() });
      if (row) emit(actionEvent(row, status === "approved" ? "action.approved" : "action.rejected"));
      return row;
    });
    if (!won) {
      const current = (await store.getAiAction(action.id))!;
      if (current.status === status) return current; // the same decision again: idempotent
      throw new EpError("action_decided", `action ${action.id} was already ${current.status}`, {
        action_id: action.id,
        status: current.status,
      });
    }
    if (status === "rejected") return won;
    // this call made the decision, so it alone executes the action, once
    let result: unknown = null;
    let error = "";
    try {
      result = await executor.run(caller, won.tool, won.arguments);
    } catch (err) {
      const ep = toEpError(err);
      error = `${ep.code}: ${ep.message}`;
    }
    const recorded = await commit(deps, async (tx, emit) => {
      const row = await tx.recordAiActionOutcome(won.id, { result, error, executedAt: now() });
      if (row)
        emit(
          actionEvent(row, error ? "action.failed" : "action.executed", error ? { error } : { result: small(result) }),
        );
      return row;
    });
    return recorded ?? (await store.getAiAction(won.id))!;
  }

  /**
   * An approved action whose run never recorded an outcome (the tower stopped while it ran):
   * after `afterMs` it is recorded as failed, saying it may or may not have taken effect, so
   * nobody waits on it. Runs in the tower's sweep (one replica at a time).
   */
  async function sweepInterruptedActions(afterMs = INTERRUPTED_AFTER_MS): Promise<number> {
    const stale = await store.listAiActions({ unexecutedBefore: iso(clock.now() - afterMs), limit: 100 });
    let swept = 0;
    for (const a of stale) {
      const error =
        `interrupted: the tower stopped while running this action (approved ${a.decidedAt}); ` +
        `it may or may not have taken effect — check, and propose it again if needed`;
      const row = await commit(deps, async (tx, emit) => {
        const r = await tx.recordAiActionOutcome(a.id, { result: null, error, executedAt: now() });
        if (r) emit(actionEvent(r, "action.failed", { error }));
        return r;
      });
      if (row) swept++;
    }
    return swept;
  }

  return { decide, sweepInterruptedActions };
}
