// The AI console: sessions, the transcript of one session, and the composer. The transcript
// follows `/ai/sessions/{id}/stream` and re-reads the session when something happens in it.
import { useCallback, useEffect, useMemo, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import type { GetSessionResponse, PendingAction, Turn } from "@gen/ep/tower/v1/ai_pb.js";
import { ActionCard, ActionOutcome, useDecisions, type Decisions } from "./actions.js";
import { api, describeError, isUnauthenticated } from "./api.js";
import type { Dashboard } from "./dashboard.js";
import { createLiveStream } from "./live-stream.js";
import { Empty, ErrorNote, toolLabel } from "./ui.js";
import { ViewSpecView, type ActionContext } from "./view-spec.js";
import { isoOf } from "@common/vocab.js";
import { TurnRole } from "@gen/ep/tower/v1/ai_pb.js";
import { ToolKind } from "@gen/ep/tower/v1/resources_pb.js";
import { actionStatusOf } from "./words.js";

interface ChatProps {
  dashboard: Dashboard;
  sessionId: string | undefined;
  selectSession(id: string | undefined): void;
  onUnauthenticated(): void;
  composerRef: React.RefObject<HTMLTextAreaElement | null>;
}

export function ChatView({ dashboard, sessionId, selectSession, onUnauthenticated, composerRef }: ChatProps) {
  const sessions = dashboard.data.sessions.map((s) => s.session);
  const [creating, setCreating] = useState(false);
  const [error, setError] = useState<string>();
  const current = sessionId ?? sessions[0]?.id;

  const newSession = useCallback(async () => {
    setCreating(true);
    setError(undefined);
    try {
      const res = await api.ai.createSession({ title: "" });
      if (res.session) selectSession(res.session.id);
      dashboard.refresh("approvals");
      composerRef.current?.focus();
      return res.session?.id;
    } catch (err) {
      if (isUnauthenticated(err)) onUnauthenticated();
      setError(describeError(err));
      return undefined;
    } finally {
      setCreating(false);
    }
  }, [dashboard, selectSession, onUnauthenticated, composerRef]);

  return (
    <div className="chat">
      <aside className="sessions" aria-label="AI sessions">
        <button type="button" className="btn btn-primary" onClick={() => void newSession()} disabled={creating}>
          New session
        </button>
        <label className="session-select">
          <span className="visually-hidden">Session</span>
          <select value={current ?? ""} onChange={(e) => selectSession(e.target.value || undefined)}>
            {sessions.length === 0 && <option value="">No sessions yet</option>}
            {sessions.map((s) => (
              <option key={s.id} value={s.id}>
                {s.title || s.id}
              </option>
            ))}
          </select>
        </label>
        <nav className="session-list" aria-label="Session history">
          {sessions.length === 0 && <Empty>No sessions yet. Ask something below to start one.</Empty>}
          <ul>
            {sessions.map((s) => (
              <li key={s.id}>
                <button
                  type="button"
                  className={s.id === current ? "session-item current" : "session-item"}
                  aria-current={s.id === current ? "true" : undefined}
                  onClick={() => selectSession(s.id)}
                >
                  <span className="session-title">{s.title || "Untitled session"}</span>
                  <span className="muted small">{isoOf(s.createdAt).replace("T", " ").slice(0, 16)}</span>
                </button>
              </li>
            ))}
          </ul>
        </nav>
        {!dashboard.data.aiAvailable && <ErrorNote error="AI sessions are not available on this tower." />}
        <ErrorNote error={error} />
      </aside>
      <SessionPane
        key={current ?? "none"}
        sessionId={current}
        dashboard={dashboard}
        newSession={newSession}
        onUnauthenticated={onUnauthenticated}
        composerRef={composerRef}
      />
    </div>
  );
}

interface PaneProps {
  sessionId: string | undefined;
  dashboard: Dashboard;
  newSession(): Promise<string | undefined>;
  onUnauthenticated(): void;
  composerRef: React.RefObject<HTMLTextAreaElement | null>;
}

function SessionPane({ sessionId, dashboard, newSession, onUnauthenticated, composerRef }: PaneProps) {
  const [session, setSession] = useState<GetSessionResponse>();
  const [error, setError] = useState<string>();
  const [sending, setSending] = useState<string>();
  const reloadTimer = useRef<number | undefined>(undefined);
  const bottom = useRef<HTMLDivElement>(null);

  const reload = useCallback(async () => {
    if (!sessionId) return;
    try {
      setSession(await api.ai.getSession({ sessionId }));
    } catch (err) {
      if (isUnauthenticated(err)) return onUnauthenticated();
      setError(describeError(err));
    }
  }, [sessionId, onUnauthenticated]);

  const scheduleReload = useCallback(() => {
    if (reloadTimer.current !== undefined) return;
    reloadTimer.current = window.setTimeout(() => {
      reloadTimer.current = undefined;
      void reload();
    }, 100);
  }, [reload]);

  useEffect(() => {
    if (!sessionId) return;
    void reload();
    const live = createLiveStream({
      url: `/ai/sessions/${encodeURIComponent(sessionId)}/stream`,
      onEvent: scheduleReload,
      onRecover: scheduleReload,
    });
    // approvals decided elsewhere (the Approvals tab, another operator) also reach the main feed
    const unsubscribe = dashboard.subscribe((ev) => {
      if (ev.session_id === sessionId || ev.type === "approval") scheduleReload();
    });
    return () => {
      live.close();
      unsubscribe();
      if (reloadTimer.current !== undefined) window.clearTimeout(reloadTimer.current);
    };
  }, [sessionId, reload, scheduleReload, dashboard.subscribe]); // eslint-disable-line react-hooks/exhaustive-deps

  const onDecided = useCallback(
    (action: PendingAction) => {
      setSession((s) =>
        s ? ({ ...s, actions: s.actions.map((a) => (a.id === action.id ? action : a)) } as GetSessionResponse) : s,
      );
      dashboard.refresh("approvals");
      dashboard.refresh("work");
      scheduleReload();
    },
    [dashboard, scheduleReload],
  );
  const decisions = useDecisions(onDecided);

  // an action bar may list actions of other sessions (e.g. "list pending approvals")
  const knownActions = useMemo(() => {
    const all = new Map<string, PendingAction>();
    for (const s of dashboard.data.sessions) for (const a of s.actions) all.set(a.id, a);
    for (const a of session?.actions ?? []) all.set(a.id, a);
    return all;
  }, [dashboard.data.sessions, session?.actions]);

  const turnsLen = session?.turns.length ?? 0;
  // biome-ignore lint/correctness/useExhaustiveDependencies: the triggers: a turn arrived or one is being sent
  useEffect(() => {
    bottom.current?.scrollIntoView?.({ block: "end" });
  }, [turnsLen, sending]);

  const submit = useCallback(
    async (content: string) => {
      setError(undefined);
      setSending(content);
      try {
        const id = sessionId ?? (await newSession());
        if (!id) return false;
        const res = await api.ai.submitTurn({ sessionId: id, content });
        setSession((s) => {
          if (!s || s.session?.id !== id) return s;
          const known = new Set(s.turns.map((t) => t.id));
          const turns = [...s.turns, ...[res.turn, res.reply].filter((t): t is Turn => !!t && !known.has(t.id))];
          const knownActions = new Set(s.actions.map((a) => a.id));
          return {
            ...s,
            turns,
            actions: [...s.actions, ...res.actions.filter((a) => !knownActions.has(a.id))],
          } as GetSessionResponse;
        });
        if (res.actions.length > 0) dashboard.refresh("approvals");
        scheduleReload();
        return true;
      } catch (err) {
        if (isUnauthenticated(err)) onUnauthenticated();
        setError(describeError(err));
        return false;
      } finally {
        setSending(undefined);
      }
    },
    [sessionId, newSession, dashboard, scheduleReload, onUnauthenticated],
  );

  return (
    <section className="session-pane" aria-label="Transcript and composer">
      <div className="transcript" role="log" aria-live="polite" aria-label="Transcript">
        {!sessionId && (
          <Empty>Ask the tower anything: “list missions”, “create a mission called release in domain …”.</Empty>
        )}
        {session && session.turns.length === 0 && <Empty>This session is empty. Ask something below.</Empty>}
        {session?.turns.map((turn) => (
          <TurnView key={turn.id} turn={turn} actions={knownActions} decisions={decisions} />
        ))}
        {sending && (
          <>
            {!session?.turns.some((t) => t.role === TurnRole.USER && t.content === sending) && (
              <div className="msg msg-user">
                <p>{sending}</p>
              </div>
            )}
            <p className="muted thinking" aria-live="polite">
              Working…
            </p>
          </>
        )}
        <div ref={bottom} />
      </div>
      <ErrorNote error={error} />
      <Composer onSubmit={submit} disabled={sending !== undefined} composerRef={composerRef} />
    </section>
  );
}

function TurnView({
  turn,
  actions: byId,
  decisions,
}: {
  turn: Turn;
  actions: Map<string, PendingAction>;
  decisions: Decisions;
}) {
  const ctx: ActionContext = {
    statusOf: (id) => {
      const a = byId.get(id);
      return a && actionStatusOf(a);
    },
    summaryOf: (id) => {
      const a = byId.get(id);
      return a ? a.summary || a.tool : undefined;
    },
    busy: (id) => decisions.busy(id),
    decide: (id, decision) => void decisions.decide(byId.get(id)?.sessionId ?? turn.sessionId, id, decision),
    outcome: (id) => {
      const a = byId.get(id);
      return a ? <ActionOutcome action={a} /> : null;
    },
  };
  if (turn.role === TurnRole.USER) {
    return (
      <div className="msg msg-user" data-turn-id={turn.id}>
        <p>{turn.content}</p>
      </div>
    );
  }
  // actions the reply's own action_bars do not cover get a card of their own
  const barred = new Set<string>();
  for (const spec of turn.viewSpecs) {
    if (spec && spec.type === "action_bar" && Array.isArray(spec.actions)) {
      for (const a of spec.actions)
        if (a && typeof a === "object" && !Array.isArray(a) && typeof a.action_id === "string") barred.add(a.action_id);
    }
  }
  const loose = turn.toolCalls.filter((c) => c.actionId && !barred.has(c.actionId)).map((c) => byId.get(c.actionId));
  return (
    <div className="msg msg-assistant" data-turn-id={turn.id}>
      {turn.content && <p className="reply-text">{turn.content}</p>}
      {turn.toolCalls.length > 0 && (
        <ul className="tool-calls" aria-label="Tools used">
          {turn.toolCalls.map((c, i) => (
            <li key={i}>
              <span title={c.tool}>{toolLabel(c.tool)}</span>{" "}
              <span className="muted small">
                {c.kind === ToolKind.WRITE ? "proposed, needs approval" : c.error ? `failed: ${c.error}` : ""}
              </span>
            </li>
          ))}
        </ul>
      )}
      {turn.viewSpecs.map((spec, i) => (
        <ViewSpecView key={i} spec={spec} ctx={ctx} />
      ))}
      {loose.map((a) => a && <ActionCard key={a.id} action={a} decisions={decisions} />)}
      {[...barred].map((id) => decisions.error(id) && <ErrorNote key={`e-${id}`} error={decisions.error(id)} />)}
      {turn.error && <ErrorNote error={turn.error} />}
    </div>
  );
}

function Composer({
  onSubmit,
  disabled,
  composerRef,
}: {
  onSubmit(content: string): Promise<boolean>;
  disabled: boolean;
  composerRef: React.RefObject<HTMLTextAreaElement | null>;
}) {
  const [text, setText] = useState("");
  const send = async () => {
    const content = text.trim();
    if (!content || disabled) return;
    if (await onSubmit(content)) setText("");
    composerRef.current?.focus();
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void send();
    }
  };
  const onFormSubmit = (e: FormEvent) => {
    e.preventDefault();
    void send();
  };
  return (
    <form className="composer" onSubmit={onFormSubmit}>
      <label htmlFor="composer-input" className="visually-hidden">
        Message the tower
      </label>
      <textarea
        id="composer-input"
        ref={composerRef}
        value={text}
        rows={2}
        autoFocus
        placeholder="Ask the tower…"
        aria-describedby="composer-hint"
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKeyDown}
      />
      <button type="submit" className="btn btn-primary" disabled={disabled || text.trim() === ""}>
        Send
      </button>
      <p id="composer-hint" className="composer-hint muted small">
        Enter sends · Shift+Enter adds a line · “/” jumps here
      </p>
    </form>
  );
}
