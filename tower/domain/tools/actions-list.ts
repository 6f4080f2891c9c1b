// The caller's own AI actions (the list_pending_actions tool): only sessions the caller owns,
// one session when named (another's is "not found", as everywhere for sessions).
import { EpError } from "../../../common/errors.js";
import type { AiActionRow, AiActionStatus } from "../../store/ai-store.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";

export async function listOwnActions(
  deps: Pick<Deps, "store">,
  caller: Caller,
  q: { sessionId?: string; status: AiActionStatus },
): Promise<AiActionRow[]> {
  authorize(caller, "read");
  if (q.sessionId) {
    const s = await deps.store.getAiSession(q.sessionId);
    if (!s || s.owner !== caller.subject)
      throw new EpError("session_not_found", `AI session ${q.sessionId} does not exist`, { field: "session_id" });
  }
  return deps.store.listAiActions({ owner: caller.subject, sessionId: q.sessionId || undefined, status: q.status });
}
