// The dashboard's data: missions and tasks, agents and nodes, pending actions across the
// caller's AI sessions. Loaded with the Connect clients and kept fresh by `/events/stream`:
// an event marks its area stale and the area is re-read (coalesced), so the console never
// depends on the exact payload of an event, only on its type and name.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { PendingAction, Session } from "@gen/ep/tower/v1/ai_pb.js";
import { ApprovalStatus, type Approval } from "@gen/ep/tower/v1/approvals_pb.js";
import type { Agent, Domain, Mission, Node, Task } from "@gen/ep/tower/v1/resources_pb.js";
import { api, describeError, isUnauthenticated } from "./api.js";
import { createLiveStream, type StreamEvent, type StreamState } from "./live-stream.js";
import { msOf } from "@common/vocab.js";
import { ActionStatus } from "@gen/ep/tower/v1/ai_pb.js";
import { actionStatusOf } from "./words.js";

export type Area = "work" | "fleet" | "approvals";

export interface SessionActions {
  session: Session;
  actions: PendingAction[];
}

export interface DashboardData {
  domains: Domain[];
  missions: Mission[];
  tasks: Task[];
  agents: Agent[];
  nodes: Node[];
  sessions: SessionActions[];
  /** agents' tool-permission requests waiting for a person (ApprovalService) */
  permissions: Approval[];
  /** false when this tower has no AI service */
  aiAvailable: boolean;
  errors: Partial<Record<Area, string>>;
  loaded: Partial<Record<Area, boolean>>;
}

const EMPTY: DashboardData = {
  domains: [],
  missions: [],
  tasks: [],
  agents: [],
  nodes: [],
  sessions: [],
  permissions: [],
  aiAvailable: true,
  errors: {},
  loaded: {},
};

/** Which areas an event makes stale. */
export function areasFor(ev: Pick<StreamEvent, "type" | "name">): Area[] {
  const name = ev.name ?? "";
  if (ev.type === "approval") return ["approvals", "work"];
  if (ev.type === "matrix") {
    if (/^(agent|node)\./.test(name)) return ["fleet"];
    if (/^(task|mission|domain)\./.test(name)) return ["work"];
    if (/^ai\./.test(name)) return ["approvals"];
    return ["work", "fleet"];
  }
  if (ev.type === "inbox" || ev.type === "progress") return [];
  return ["work", "fleet", "approvals"];
}

export interface Dashboard {
  data: DashboardData;
  stream: StreamState;
  refresh(area?: Area): void;
  /** raw events from the feed, for views that follow more than the dashboard does */
  subscribe(fn: (ev: StreamEvent) => void): () => void;
}

const COALESCE_MS = 120;

export function useDashboard(onUnauthenticated: () => void): Dashboard {
  const [data, setData] = useState<DashboardData>(EMPTY);
  const [stream, setStream] = useState<StreamState>({ status: "connecting", failures: 0 });
  const listeners = useRef(new Set<(ev: StreamEvent) => void>());
  const onUnauth = useRef(onUnauthenticated);
  onUnauth.current = onUnauthenticated;

  // per area: a pending timer, whether a load runs, whether another is needed after it
  const sched = useRef<Record<Area, { timer?: number; running: boolean; again: boolean }>>({
    work: { running: false, again: false },
    fleet: { running: false, again: false },
    approvals: { running: false, again: false },
  });

  const load = useCallback(async (area: Area): Promise<void> => {
    try {
      if (area === "work") {
        const [d, m, t] = await Promise.all([
          api.work.listDomains({}),
          api.work.listMissions({}),
          api.work.listTasks({ limit: 1000 }),
        ]);
        setData((s) => ({
          ...s,
          domains: d.domains,
          missions: m.missions,
          tasks: t.tasks,
          errors: { ...s.errors, work: undefined },
          loaded: { ...s.loaded, work: true },
        }));
      } else if (area === "fleet") {
        const [a, n] = await Promise.all([api.agents.listAgents({}), api.nodes.listNodes({})]);
        setData((s) => ({
          ...s,
          agents: a.agents,
          nodes: n.nodes,
          errors: { ...s.errors, fleet: undefined },
          loaded: { ...s.loaded, fleet: true },
        }));
      } else {
        // agents' requests first: a tower without AI sessions still has them
        const asked = await api.approvals.listApprovals({ status: ApprovalStatus.PENDING });
        setData((s) => ({ ...s, permissions: asked.approvals }));
        const list = await api.ai.listSessions({});
        const sessions = await Promise.all(
          list.sessions.map(async (session) => {
            const full = await api.ai.getSession({ sessionId: session.id });
            return { session: full.session ?? session, actions: full.actions };
          }),
        );
        setData((s) => ({
          ...s,
          sessions,
          aiAvailable: true,
          errors: { ...s.errors, approvals: undefined },
          loaded: { ...s.loaded, approvals: true },
        }));
      }
    } catch (err) {
      if (isUnauthenticated(err)) return onUnauth.current();
      const unavailable = area === "approvals" && /does not offer/.test(describeError(err));
      setData((s) => ({
        ...s,
        aiAvailable: area === "approvals" ? !unavailable : s.aiAvailable,
        errors: { ...s.errors, [area]: describeError(err) },
        loaded: { ...s.loaded, [area]: true },
      }));
    }
  }, []);

  const refresh = useCallback(
    (area?: Area) => {
      const areas: Area[] = area ? [area] : ["work", "fleet", "approvals"];
      for (const a of areas) {
        const st = sched.current[a];
        if (st.timer !== undefined) continue;
        st.timer = window.setTimeout(function run() {
          st.timer = undefined;
          if (st.running) {
            st.again = true;
            return;
          }
          st.running = true;
          void load(a).finally(() => {
            st.running = false;
            if (st.again) {
              st.again = false;
              st.timer = window.setTimeout(run, COALESCE_MS);
            }
          });
        }, COALESCE_MS);
      }
    },
    [load],
  );

  useEffect(() => {
    const timers = sched.current;
    void load("work");
    void load("fleet");
    void load("approvals");
    let opened = false;
    const live = createLiveStream({
      url: "/events/stream",
      onEvent(ev) {
        for (const a of areasFor(ev)) refresh(a);
        for (const fn of listeners.current) fn(ev);
      },
      // the feed starts at the tower's newest event: what was committed between the first loads
      // and its first open is read once more then (onRecover does the same after an outage)
      onState: (st) => {
        setStream(st);
        if (st.status === "open" && !opened) {
          opened = true;
          refresh();
        }
      },
      onRecover: () => refresh(),
    });
    return () => {
      live.close();
      for (const st of Object.values(timers)) if (st.timer !== undefined) window.clearTimeout(st.timer);
    };
  }, [load, refresh]);

  const subscribe = useCallback((fn: (ev: StreamEvent) => void) => {
    listeners.current.add(fn);
    return () => void listeners.current.delete(fn);
  }, []);

  return useMemo(() => ({ data, stream, refresh, subscribe }), [data, stream, refresh, subscribe]);
}

/** Pending actions across all sessions, newest first, and counts per status. */
export function approvalsOf(sessions: SessionActions[]) {
  const pending: { action: PendingAction; session: Session }[] = [];
  const counts = { pending: 0, approved: 0, rejected: 0 };
  for (const { session, actions } of sessions) {
    for (const action of actions) {
      if (action.status === ActionStatus.PENDING) pending.push({ action, session });
      const word = actionStatusOf(action);
      if (word in counts) counts[word as keyof typeof counts]++;
    }
  }
  pending.sort((a, b) => msOf(b.action.createdAt) - msOf(a.action.createdAt));
  return { pending, counts };
}
