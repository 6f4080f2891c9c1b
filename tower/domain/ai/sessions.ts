// AI console sessions: a transcript of turns, the pending actions write tools create, and
// the session's events for replay. A turn is planned; read tools run at once through the
// tool executor and come back as view_specs; write tools become pending actions that
// mutate nothing until a human approves one (POST …/approve). Approval is one conditional
// UPDATE (pending -> approved | rejected), so under any race exactly one decision wins and
// only its winner executes the action, once. A new message never approves anything.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { iso } from "../../../common/clock.js";
import { EpError, invalidField, toEpError } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import * as pb from "../../../gen/ep/tower/v1/ai_pb.js";
import type { AiActionRow, AiSessionRow, AiTurnRow } from "../../store/ai-store.js";
import type { EventRow, Store } from "../../store/store.js";
import { authorize, principalOf, type Caller } from "../caller.js";
import { eventMsg } from "../convert.js";
import type { Deps } from "../deps.js";
import { commit, type Emit } from "../event-hub.js";
import { TOOLS } from "../tools/catalog.js";
import { type ToolExecutor } from "../tools/executor.js";
import type { ChatMessage, PlanResult, Planner } from "./planner.js";
import type { AiSettings } from "./settings.js";
import { storePlannerContext } from "./planner-context.js";
import { settlePlan } from "./settle.js";
import { actionEvent, actionMsg, NEW_SESSION, sessionMsg, small, titleFromTurn, turnEvent, turnMsg, UNTITLED, withDeadline } from "./session-messages.js";

export { actionMsg, sessionMsg, titleFromTurn, turnMsg };

export interface AiServiceOptions {
  planner: Planner;
  settings: AiSettings;
  executor: ToolExecutor;
  /** Safety net over the planner's own deadline (EP_AI_TIMEOUT_SECONDS); default 120 s. */
  planTimeoutMs?: number;
  /** Turns of history given to the planner; default 20. */
  historyTurns?: number;
}

const MAX_CONTENT = 20_000;
const MAX_TITLE = 200;
/** A live session stream ends (the client resumes) rather than buffer more than this. */
const STREAM_BUFFER = 10_000;
/** An approved action with no outcome after this long was interrupted (tool calls take seconds). */
export const INTERRUPTED_AFTER_MS = 10 * 60_000;

export type AiService = ReturnType<typeof createAiService>;

export function createAiService(deps: Deps, opts: AiServiceOptions) {
  const { store, clock } = deps;
  const now = () => iso(clock.now());
  const planTimeoutMs = opts.planTimeoutMs ?? 120_000;
  const historyTurns = opts.historyTurns ?? 20;

  /** The caller's own session; anyone else's is indistinguishable from a missing one. */
  async function ownSession(caller: Caller, sessionId: string): Promise<AiSessionRow> {
    if (!sessionId) throw invalidField("session_id", "is required");
    const s = await store.getAiSession(sessionId);
    if (!s || s.owner !== principalOf(caller)) throw new EpError("session_not_found", `AI session ${sessionId} does not exist`);
    return s;
  }

  async function sessionAction(session: AiSessionRow, actionId: string): Promise<AiActionRow> {
    if (!actionId) throw invalidField("action_id", "is required");
    const a = await store.getAiAction(actionId);
    if (!a || a.sessionId !== session.id) throw new EpError("action_not_found", `action ${actionId} does not exist in session ${session.id}`);
    return a;
  }

  async function appendTurn(tx: Store, emit: Emit, turn: Omit<AiTurnRow, "seq">): Promise<AiTurnRow> {
    const seq = (await tx.listAiTurns(turn.sessionId)).length + 1;
    const row: AiTurnRow = { ...turn, seq };
    await tx.insertAiTurn(row);
    await tx.updateAiSession(turn.sessionId, { updatedAt: row.createdAt });
    emit(turnEvent(row));
    return row;
  }

  const plannerContext = (session: AiSessionRow) => storePlannerContext(store, session.id, opts.settings.centralRuntimeDefault);

  /** Checks the caller may follow the session, then streams its events after afterId: stored ones, then live. */
  async function openSessionEvents(caller: Caller, sessionId: string, afterId: number, signal: AbortSignal): Promise<AsyncGenerator<EventRow>> {
    authorize(caller, "read");
    await ownSession(caller, sessionId);
    return sessionEvents(sessionId, afterId, signal);
  }

  async function* sessionEvents(sessionId: string, afterId: number, signal: AbortSignal): AsyncGenerator<EventRow> {
    const queue: EventRow[] = [];
    let overflow = false;
    let wake: (() => void) | undefined;
    // subscribe before the replay so nothing committed meanwhile is missed; ids dedupe the overlap
    const unsubscribe = deps.hub.subscribe((events) => {
      for (const e of events) if (e.sessionId === sessionId) queue.push(e);
      if (queue.length > STREAM_BUFFER) overflow = true;
      wake?.();
    });
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    let last = afterId;
    try {
      for (;;) {
        const page = await store.listEvents({ sessionId, afterId: last, limit: 500 });
        for (const e of page) {
          if (signal.aborted) return;
          yield e;
          last = e.id;
        }
        if (page.length < 500) break;
      }
      while (!signal.aborted) {
        if (overflow) throw new EpError("unavailable", `the session stream fell more than ${STREAM_BUFFER} events behind; reconnect with Last-Event-ID ${last}`);
        const e = queue.shift();
        if (e) {
          if (e.id <= last) continue;
          yield e;
          last = e.id;
          continue;
        }
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
      }
    } finally {
      unsubscribe();
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** Runs a planned turn's tool calls: reads now, writes as pending actions (returned, not yet stored). */
  const settle = (caller: Caller, session: AiSessionRow, plan: PlanResult, turnId: string) =>
    settlePlan({ store, clock, executor: opts.executor, settings: opts.settings }, caller, session.id, plan, turnId);

  async function decide(caller: Caller, req: { sessionId: string; actionId: string }, status: "approved" | "rejected"): Promise<AiActionRow> {
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
      throw new EpError("action_decided", `action ${action.id} was already ${current.status}`, { action_id: action.id, status: current.status });
    }
    if (status === "rejected") return won;
    // this call made the decision, so it alone executes the action, once
    let result: unknown = null;
    let error = "";
    try {
      result = await opts.executor.run(caller, won.tool, won.arguments);
    } catch (err) {
      const ep = toEpError(err);
      error = `${ep.code}: ${ep.message}`;
    }
    const recorded = await commit(deps, async (tx, emit) => {
      const row = await tx.recordAiActionOutcome(won.id, { result, error, executedAt: now() });
      if (row) emit(actionEvent(row, error ? "action.failed" : "action.executed", error ? { error } : { result: small(result) }));
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
      const error = `interrupted: the tower stopped while running this action (approved ${a.decidedAt}); it may or may not have taken effect — check, and propose it again if needed`;
      const row = await commit(deps, async (tx, emit) => {
        const r = await tx.recordAiActionOutcome(a.id, { result: null, error, executedAt: now() });
        if (r) emit(actionEvent(r, "action.failed", { error }));
        return r;
      });
      if (row) swept++;
    }
    return swept;
  }

  return {
    openSessionEvents,
    sweepInterruptedActions,

    async createSession(caller: Caller, req: pb.CreateSessionRequest): Promise<pb.CreateSessionResponse> {
      authorize(caller, "operate");
      const title = req.title.trim();
      if (title.length > MAX_TITLE) throw invalidField("title", `is longer than ${MAX_TITLE} characters`);
      const ts = now();
      const row: AiSessionRow = { id: newId("ses", clock.now()), owner: principalOf(caller), title: title || NEW_SESSION, status: "active", createdAt: ts, updatedAt: ts };
      await commit(deps, async (tx, emit) => {
        await tx.insertAiSession(row);
        emit({ type: "matrix", name: "ai.session.created", sessionId: row.id, status: row.status, payload: { session_id: row.id, title: row.title, owner: row.owner } });
      });
      return create(pb.CreateSessionResponseSchema, { session: sessionMsg(row) });
    },

    async listSessions(caller: Caller, _req: pb.ListSessionsRequest): Promise<pb.ListSessionsResponse> {
      authorize(caller, "read");
      return create(pb.ListSessionsResponseSchema, { sessions: (await store.listAiSessions(principalOf(caller))).map(sessionMsg) });
    },

    async getSession(caller: Caller, req: pb.GetSessionRequest): Promise<pb.GetSessionResponse> {
      authorize(caller, "read");
      const s = await ownSession(caller, req.sessionId);
      const events: EventRow[] = [];
      for (let after = 0; events.length < 10_000; ) {
        const page = await store.listEvents({ sessionId: s.id, afterId: after, limit: 1000 });
        events.push(...page);
        if (page.length < 1000) break;
        after = page[page.length - 1].id;
      }
      return create(pb.GetSessionResponseSchema, {
        session: sessionMsg(s),
        turns: (await store.listAiTurns(s.id)).map(turnMsg),
        events: events.map(eventMsg),
        actions: (await store.listAiActions({ sessionId: s.id })).map(actionMsg),
      });
    },

    async submitTurn(caller: Caller, req: pb.SubmitTurnRequest): Promise<pb.SubmitTurnResponse> {
      authorize(caller, "operate");
      const content = req.content.trim();
      if (!content) throw invalidField("content", "is required");
      if (content.length > MAX_CONTENT) throw invalidField("content", `is longer than ${MAX_CONTENT} characters`);
      const session = await ownSession(caller, req.sessionId);
      if (session.status !== "active") throw new EpError("conflict", `AI session ${session.id} is ${session.status}`);
      const previous = await store.listAiTurns(session.id);
      const history: ChatMessage[] = previous.slice(-historyTurns).map((t) => ({ role: t.role, content: t.content }));

      const userTurn = await commit(deps, async (tx, emit) => {
        const row = await appendTurn(tx, emit, { id: newId("trn", clock.now()), sessionId: session.id, role: "user", content, toolCalls: [], viewSpecs: [], error: "", createdAt: now() });
        // an untitled session is named after its first question, as chat tools do
        if (previous.length === 0 && UNTITLED.has(session.title)) {
          const title = titleFromTurn(content);
          await tx.updateAiSession(session.id, { title });
          emit({ type: "matrix", name: "ai.session.updated", sessionId: session.id, status: session.status, payload: { session_id: session.id, title } });
        }
        return row;
      });

      const replyId = newId("trn", clock.now());
      let reply: Omit<AiTurnRow, "seq">;
      let actions: AiActionRow[] = [];
      try {
        const plan = await withDeadline(
          deps,
          opts.planner.plan({ content, history, tools: [...TOOLS], context: plannerContext(session) }),
          planTimeoutMs,
          `the ${opts.planner.name} planner`,
        );
        const settled = await settle(caller, session, plan, replyId);
        actions = settled.actions;
        const text = [plan.reply, ...settled.notes].filter(Boolean).join("\n\n");
        reply = {
          id: replyId,
          sessionId: session.id,
          role: "assistant",
          content: text,
          toolCalls: settled.toolCalls,
          viewSpecs: settled.viewSpecs as unknown as JsonObject[],
          error: "",
          createdAt: now(),
        };
      } catch (err) {
        // a planner failure (provider down, timeout, bad key) is the turn's visible error, never a hung turn
        const ep = toEpError(err);
        deps.log.warn("AI turn failed", { session_id: session.id, planner: opts.planner.name, code: ep.code, error: ep.message });
        reply = {
          id: replyId,
          sessionId: session.id,
          role: "assistant",
          content: `The ${opts.planner.name} planner failed: ${ep.message}`,
          toolCalls: [],
          viewSpecs: [],
          error: ep.message,
          createdAt: now(),
        };
      }
      const replyTurn = await commit(deps, async (tx, emit) => {
        const row = await appendTurn(tx, emit, reply);
        for (const a of actions) {
          await tx.insertAiAction(a);
          emit(actionEvent(a, "action.pending"));
        }
        return row;
      });
      return create(pb.SubmitTurnResponseSchema, { turn: turnMsg(userTurn), reply: turnMsg(replyTurn), actions: actions.map(actionMsg) });
    },

    async approveAction(caller: Caller, req: pb.ApproveActionRequest): Promise<pb.ApproveActionResponse> {
      return create(pb.ApproveActionResponseSchema, { action: actionMsg(await decide(caller, req, "approved")) });
    },

    async rejectAction(caller: Caller, req: pb.RejectActionRequest): Promise<pb.RejectActionResponse> {
      return create(pb.RejectActionResponseSchema, { action: actionMsg(await decide(caller, req, "rejected")) });
    },

    async *streamSession(caller: Caller, req: pb.StreamSessionRequest, signal: AbortSignal): AsyncGenerator<pb.StreamSessionResponse> {
      for await (const e of await openSessionEvents(caller, req.sessionId, Number(req.afterId), signal)) {
        yield create(pb.StreamSessionResponseSchema, { event: eventMsg(e) });
      }
    },
  };
}
