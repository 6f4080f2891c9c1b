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
import { sessionEvents } from "./session-stream.js";
import { createActionDecisions } from "./action-decisions.js";
import { TOOLS, type ToolExecutor } from "../tools/index.js";
import type { ChatMessage, Planner } from "./planner.js";
import type { AiSettings } from "./types.js";
import { storePlannerContext } from "./planner-context.js";
import { settlePlan } from "./settle.js";
import {
  actionEvent,
  actionMsg,
  NEW_SESSION,
  sessionMsg,
  titleFromTurn,
  turnEvent,
  turnMsg,
  UNTITLED,
  withDeadline,
} from "./session-messages.js";
import { paginate } from "../paging.js";

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
export { INTERRUPTED_AFTER_MS } from "./action-decisions.js";

export type AiService = ReturnType<typeof createAiService>;

export function createAiService(deps: Deps, opts: AiServiceOptions) {
  const { store, clock } = deps;
  const now = () => iso(clock.now());
  const planTimeoutMs = opts.planTimeoutMs ?? 120_000;
  const historyTurns = opts.historyTurns ?? 20;

  const ownSession = (caller: Caller, sessionId: string) => ownSessionIn(store, caller, sessionId);
  const sessionAction = (session: AiSessionRow, actionId: string) => sessionActionIn(store, session, actionId);
  const plannerContext = (session: AiSessionRow) =>
    storePlannerContext(store, session.id, opts.settings.centralRuntimeDefault);

  /** Checks the caller may follow the session, then streams its events after afterId: stored ones, then live. */
  async function openSessionEvents(
    caller: Caller,
    sessionId: string,
    afterId: number,
    signal: AbortSignal,
  ): Promise<AsyncGenerator<EventRow>> {
    authorize(caller, "read");
    await ownSession(caller, sessionId);
    return sessionEvents(deps, sessionId, afterId, signal);
  }

  /**
   * The planner's answer to a turn, its read tools run and its writes as pending actions; a failure is the answer's
   * error.
   */
  async function answerTurn(
    caller: Caller,
    session: AiSessionRow,
    content: string,
    history: ChatMessage[],
  ): Promise<{ reply: Omit<AiTurnRow, "seq">; actions: AiActionRow[] }> {
    const replyId = newId("trn", clock.now());
    try {
      const plan = await withDeadline(
        deps,
        opts.planner.plan({ content, history, tools: [...TOOLS], context: plannerContext(session) }),
        planTimeoutMs,
        `the ${opts.planner.name} planner`,
      );
      // reads run now; writes become pending actions (returned, not yet stored)
      const settled = await settlePlan(
        { store, clock, executor: opts.executor, settings: opts.settings },
        caller,
        session.id,
        plan,
        replyId,
      );
      const text = [plan.reply, ...settled.notes].filter(Boolean).join("\n\n");
      const viewSpecs = settled.viewSpecs as unknown as JsonObject[];
      return {
        actions: settled.actions,
        reply: {
          id: replyId,
          sessionId: session.id,
          role: "assistant",
          content: text,
          toolCalls: settled.toolCalls,
          viewSpecs,
          error: "",
          createdAt: now(),
        },
      };
    } catch (err) {
      // a planner failure (provider down, timeout, bad key) is the turn's visible error, never a hung turn
      const ep = toEpError(err);
      deps.log.warn("AI turn failed", {
        session_id: session.id,
        planner: opts.planner.name,
        code: ep.code,
        error: ep.message,
      });
      const content = `The ${opts.planner.name} planner failed: ${ep.message}`;
      return {
        actions: [],
        reply: {
          id: replyId,
          sessionId: session.id,
          role: "assistant",
          content,
          toolCalls: [],
          viewSpecs: [],
          error: ep.message,
          createdAt: now(),
        },
      };
    }
  }

  const { decide, sweepInterruptedActions } = createActionDecisions(deps, opts.executor, ownSession, sessionAction);

  return {
    openSessionEvents,
    sweepInterruptedActions,

    async createSession(caller: Caller, req: pb.CreateSessionRequest): Promise<pb.CreateSessionResponse> {
      authorize(caller, "operate");
      const title = req.title.trim();
      if (title.length > MAX_TITLE) throw invalidField("title", `is longer than ${MAX_TITLE} characters`);
      const ts = now();
      const row: AiSessionRow = {
        id: newId("ses", clock.now()),
        owner: principalOf(caller),
        title: title || NEW_SESSION,
        status: "active",
        createdAt: ts,
        updatedAt: ts,
      };
      await commit(deps, async (tx, emit) => {
        await tx.insertAiSession(row);
        emit({
          type: "matrix",
          name: "ai.session.created",
          sessionId: row.id,
          status: row.status,
          payload: { session_id: row.id, title: row.title, owner: row.owner },
        });
      });
      return create(pb.CreateSessionResponseSchema, { session: sessionMsg(row) });
    },

    async listSessions(caller: Caller, req: pb.ListSessionsRequest): Promise<pb.ListSessionsResponse> {
      authorize(caller, "read");
      const { page, nextPageToken } = paginate(await store.listAiSessions(principalOf(caller)), (s) => s.id, req);
      return create(pb.ListSessionsResponseSchema, { sessions: page.map(sessionMsg), nextPageToken });
    },

    async getSession(caller: Caller, req: pb.GetSessionRequest): Promise<pb.GetSessionResponse> {
      authorize(caller, "read");
      const s = await ownSession(caller, req.sessionId);
      const events = await storedSessionEvents(store, s.id);
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

      const userTurn = await recordQuestion(deps, session, content, previous.length === 0);

      const { reply, actions } = await answerTurn(caller, session, content, history);
      const replyTurn = await commit(deps, async (tx, emit) => {
        const row = await appendTurn(tx, emit, reply);
        for (const a of actions) {
          await tx.insertAiAction(a);
          emit(actionEvent(a, "action.pending"));
        }
        return row;
      });
      return create(pb.SubmitTurnResponseSchema, {
        turn: turnMsg(userTurn),
        reply: turnMsg(replyTurn),
        actions: actions.map(actionMsg),
      });
    },

    async approveAction(caller: Caller, req: pb.ApproveActionRequest): Promise<pb.ApproveActionResponse> {
      return create(pb.ApproveActionResponseSchema, { action: actionMsg(await decide(caller, req, "approved")) });
    },

    async rejectAction(caller: Caller, req: pb.RejectActionRequest): Promise<pb.RejectActionResponse> {
      return create(pb.RejectActionResponseSchema, { action: actionMsg(await decide(caller, req, "rejected")) });
    },

    async *streamSession(
      caller: Caller,
      req: pb.StreamSessionRequest,
      signal: AbortSignal,
    ): AsyncGenerator<pb.StreamSessionResponse> {
      for await (const e of await openSessionEvents(caller, req.sessionId, Number(req.afterId), signal)) {
        yield create(pb.StreamSessionResponseSchema, { event: eventMsg(e) });
      }
    },
  };
}

/** The caller's own session; anyone else's is indistinguishable from a missing one. */
async function ownSessionIn(store: Store, caller: Caller, sessionId: string): Promise<AiSessionRow> {
  if (!sessionId) throw invalidField("session_id", "is required");
  const s = await store.getAiSession(sessionId);
  if (!s || s.owner !== principalOf(caller))
    throw new EpError("session_not_found", `AI session ${sessionId} does not exist`);
  return s;
}

async function sessionActionIn(store: Store, session: AiSessionRow, actionId: string): Promise<AiActionRow> {
  if (!actionId) throw invalidField("action_id", "is required");
  const a = await store.getAiAction(actionId);
  if (!a || a.sessionId !== session.id)
    throw new EpError("action_not_found", `action ${actionId} does not exist in session ${session.id}`);
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

/** A session's stored events, oldest first (at most 10,000). */
async function storedSessionEvents(store: Store, sessionId: string): Promise<EventRow[]> {
  const events: EventRow[] = [];
  for (let after = 0; events.length < 10_000; ) {
    const page = await store.listEvents({ sessionId, afterId: after, limit: 1000 });
    events.push(...page);
    if (page.length < 1000) break;
    after = page[page.length - 1].id;
  }
  return events;
}

/** The user's turn; an untitled session is named after its first question, as chat tools do. */
async function recordQuestion(deps: Deps, session: AiSessionRow, content: string, first: boolean): Promise<AiTurnRow> {
  const now = iso(deps.clock.now());
  return commit(deps, async (tx, emit) => {
    const row = await appendTurn(tx, emit, {
      id: newId("trn", deps.clock.now()),
      sessionId: session.id,
      role: "user",
      content,
      toolCalls: [],
      viewSpecs: [],
      error: "",
      createdAt: now,
    });
    if (first && UNTITLED.has(session.title)) {
      const title = titleFromTurn(content);
      await tx.updateAiSession(session.id, { title });
      emit({
        type: "matrix",
        name: "ai.session.updated",
        sessionId: session.id,
        status: session.status,
        payload: { session_id: session.id, title },
      });
    }
    return row;
  });
}
