// The interactive console (`ep` on a terminal): tabs for missions (and their tasks, and a task's
// live view), agents, approvals, live events, and a composer that talks to an AI session. The
// footer always lists the keys that work where you are.
//
// Keys are handled against refs, not render-time state: a paste or fast typing delivers many
// chunks before React renders again, and every one of them must land (see app.test.tsx).
import { Box, Text, useApp, useInput, useStdout } from "ink";
import { useCallback, useEffect, useRef, useState } from "react";
import type { AgentItem, ApprovalItem, EventItem, FrameItem, MissionItem, TaskDetail, TaskItem, TuiDataSource } from "./data-source.js";
import { viewSpecLines } from "./view-spec-text.js";
import { ChatScreen, eventLine, List, TaskScreen, type ChatBlock } from "./views.js";

export const TABS = ["missions", "agents", "approvals", "events", "console"] as const;
export type Tab = (typeof TABS)[number];

const MAX_EVENTS = 200;

export interface AppProps {
  source: TuiDataSource;
  initialTab?: Tab;
  /** called once the first frame is on screen (the start-up benchmark uses it) */
  onFirstFrame?: () => void;
}

/** Where the missions tab is: the list, one mission's tasks, or one task. */
type Drill = { level: "missions" } | { level: "tasks"; mission: MissionItem } | { level: "task"; mission?: MissionItem; taskId: string };

const RUNTIME_LABELS: Record<string, string> = { vendorA_code: "Claude Code", vendorA_agent_acp: "ACP agent", vendorB: "Codex", vendorC: "Gemini", shell: "Shell", muxhost: "tmux" };
const runtimeLabel = (r: string) => RUNTIME_LABELS[r] ?? r;

export function footerKeys(tab: Tab, drill: Drill["level"]): string {
  const common = "1-5 or Tab: switch · q quit";
  if (tab === "console") return "Enter send · Esc or Tab (empty line): leave · Ctrl-C quit";
  if (tab === "missions" && drill === "missions") return `↑/↓ select · Enter open tasks · g refresh · ${common}`;
  if (tab === "missions" && drill === "tasks") return `↑/↓ select · Enter open task · Esc back · g refresh · ${common}`;
  if (tab === "missions") return `c cancel · r retry · Esc back · g refresh · ${common}`;
  if (tab === "approvals") return `↑/↓ select · a approve · r reject · g refresh · ${common}`;
  if (tab === "events") return `live, newest last · ${common}`;
  return `↑/↓ select · g refresh · ${common}`;
}

export function App({ source, initialTab = "missions", onFirstFrame }: AppProps) {
  const { exit } = useApp();
  const { stdout } = useStdout();
  const width = Math.max(40, (stdout?.columns ?? 100) - 1);
  const [tab, setTab] = useState<Tab>(initialTab);
  const [missions, setMissions] = useState<MissionItem[]>([]);
  const [agents, setAgents] = useState<AgentItem[]>([]);
  const [approvals, setApprovals] = useState<ApprovalItem[]>([]);
  const [events, setEvents] = useState<EventItem[]>([]);
  const [tasks, setTasks] = useState<TaskItem[]>([]);
  const [drill, setDrill] = useState<Drill>({ level: "missions" });
  const [task, setTask] = useState<TaskDetail>();
  const [frames, setFrames] = useState<Map<number, FrameItem>>(new Map());
  const [taskError, setTaskError] = useState<string>();
  const [selected, setSelected] = useState(0);
  const [status, setStatus] = useState("loading…");
  const [draft, setDraft] = useState("");
  const [blocks, setBlocks] = useState<ChatBlock[]>([]);
  const [busy, setBusy] = useState(false);
  const readySent = useRef(false);
  const refreshTimer = useRef<NodeJS.Timeout | undefined>(undefined);

  // what the key handler reads: updated as keys arrive, not only when React renders
  const st = useRef({ tab, drill, selected, draft, busy, missions, tasks, approvals, agents, events });
  st.current = { ...st.current, missions, tasks, approvals, agents, events, busy };

  const refresh = useCallback(async () => {
    try {
      const d = st.current.drill;
      const [m, a, p, t] = await Promise.all([source.missions(), source.agents(), source.approvals(), d.level === "tasks" ? source.tasks(d.mission.id) : undefined]);
      setMissions(m);
      setAgents(a);
      setApprovals(p);
      if (t) setTasks(t);
      setStatus(`updated ${new Date().toLocaleTimeString([], { hour12: false })}`);
    } catch (err) {
      setStatus(`error: ${(err as Error).message}`);
    }
  }, [source]);

  const loadTask = useCallback(
    async (taskId: string, withFrames: boolean) => {
      try {
        const [t, f] = await Promise.all([source.task(taskId), withFrames ? source.frames(taskId) : undefined]);
        if (st.current.drill.level !== "task" || st.current.drill.taskId !== taskId) return;
        setTask(t);
        setTaskError(undefined);
        if (f) setFrames((old) => new Map([...f.map((x) => [x.id, x] as const), ...old]));
      } catch (err) {
        setTaskError((err as Error).message);
      }
    },
    [source],
  );

  useEffect(() => {
    void refresh();
    const stop = source.subscribe(
      (e) => {
        setEvents((prev) => [...prev.slice(-(MAX_EVENTS - 1)), e]);
        const d = st.current.drill;
        if (d.level === "task" && e.taskId === d.taskId) {
          if (e.frame) {
            const f = e.frame;
            setFrames((old) => new Map(old).set(f.id, f));
            return;
          }
          void loadTask(d.taskId, false);
        }
        if (e.type === "progress") return;
        // live updates: one refresh for a burst of events
        if (!refreshTimer.current) {
          refreshTimer.current = setTimeout(() => {
            refreshTimer.current = undefined;
            void refresh();
          }, 150);
        }
      },
      (err) => setStatus(`stream: ${err.message}; reconnecting`),
    );
    return () => {
      stop();
      if (refreshTimer.current) clearTimeout(refreshTimer.current);
    };
  }, [source, refresh, loadTask]);

  useEffect(() => {
    if (readySent.current) return;
    readySent.current = true;
    onFirstFrame?.();
  }, [onFirstFrame]);

  const go = (next: Partial<{ tab: Tab; drill: Drill; selected: number; draft: string }>) => {
    st.current = { ...st.current, ...next };
    if (next.tab !== undefined) setTab(next.tab);
    if (next.drill !== undefined) setDrill(next.drill);
    if (next.selected !== undefined) setSelected(next.selected);
    if (next.draft !== undefined) setDraft(next.draft);
  };

  const openMission = async (mission: MissionItem) => {
    go({ drill: { level: "tasks", mission }, selected: 0 });
    setTasks([]);
    try {
      setTasks(await source.tasks(mission.id));
    } catch (err) {
      setStatus(`error: ${(err as Error).message}`);
    }
  };

  const openTask = (taskId: string, mission?: MissionItem) => {
    go({ drill: { level: "task", taskId, mission } });
    setTask(undefined);
    setFrames(new Map());
    void loadTask(taskId, true);
  };

  const decide = async (approve: boolean) => {
    const action = st.current.approvals[st.current.selected];
    if (!action) return;
    try {
      const res = approve ? await source.approve(action.sessionId, action.id) : await source.reject(action.sessionId, action.id);
      await refresh();
      setStatus(`${action.summary || action.tool}: ${res.status}`);
      go({ selected: Math.max(0, Math.min(st.current.selected, st.current.approvals.length - 1)) });
    } catch (err) {
      setStatus(`error: ${(err as Error).message}`);
    }
  };

  const actOnTask = async (op: "cancel" | "retry") => {
    const d = st.current.drill;
    if (d.level !== "task") return;
    try {
      setTask(await (op === "cancel" ? source.cancelTask(d.taskId) : source.retryTask(d.taskId)));
      setStatus(op === "cancel" ? "cancelled" : "queued again");
    } catch (err) {
      setStatus(`${op} refused: ${(err as Error).message}`);
    }
  };

  const send = async (text: string) => {
    setBlocks((b) => [...b, { who: "you", lines: [text] }]);
    setBusy(true);
    st.current.busy = true;
    try {
      const reply = await source.chat(text);
      const out: ChatBlock[] = [{ who: "ai", lines: (reply.text || "(no reply)").split("\n") }];
      const pending = new Set(reply.actions.map((a) => a.id));
      for (const spec of reply.viewSpecs ?? []) out.push({ who: "ai", lines: viewSpecLines(spec, width - 2, (id) => (pending.has(id) ? "pending" : undefined)) });
      for (const a of reply.actions) out.push({ who: "info", lines: [`waiting for approval: ${a.summary || a.tool} (tab 3: a approve, r reject)`] });
      setBlocks((b) => [...b, ...out]);
      if (reply.actions.length) await refresh();
    } catch (err) {
      setBlocks((b) => [...b, { who: "error", lines: [(err as Error).message] }]);
    } finally {
      setBusy(false);
      st.current.busy = false;
    }
  };

  const switchTab = (to: Tab) => go({ tab: to, selected: 0 });

  useInput((input, key) => {
    const s = st.current;
    if (key.ctrl && input === "c") return exit();
    if (s.tab === "console") {
      if (key.escape || (key.tab && !s.draft)) return switchTab(key.shift ? "events" : "missions");
      if (key.return) {
        const text = s.draft.trim();
        if (!text) return;
        if (s.busy) return setStatus("wait for the reply; your line is kept");
        go({ draft: "" });
        return void send(text);
      }
      if (key.backspace || key.delete) return go({ draft: s.draft.slice(0, -1) });
      // a pasted chunk may hold line breaks: the composer is one line
      if (input && !key.ctrl && !key.meta) return go({ draft: s.draft + input.replace(/\r\n|\r|\n/g, " ") });
      return;
    }
    if (input === "q") return exit();
    const n = Number(input);
    if (n >= 1 && n <= TABS.length) return switchTab(TABS[n - 1]);
    if (key.tab || key.rightArrow || key.leftArrow) {
      const dir = key.leftArrow || key.shift ? -1 : 1;
      return switchTab(TABS[(TABS.indexOf(s.tab) + dir + TABS.length) % TABS.length]);
    }
    if (input === "g") {
      if (s.drill.level === "task" && s.tab === "missions") void loadTask(s.drill.taskId, true);
      return void refresh();
    }
    if (s.tab === "missions") {
      if (key.escape || key.backspace) {
        if (s.drill.level === "task" && s.drill.mission) return go({ drill: { level: "tasks", mission: s.drill.mission }, selected: 0 });
        return go({ drill: { level: "missions" }, selected: 0 });
      }
      if (s.drill.level === "task") {
        if (input === "c") return void actOnTask("cancel");
        if (input === "r") return void actOnTask("retry");
        return;
      }
      if (key.return) {
        if (s.drill.level === "missions" && s.missions[s.selected]) return void openMission(s.missions[s.selected]);
        if (s.drill.level === "tasks" && s.tasks[s.selected]) return openTask(s.tasks[s.selected].id, s.drill.mission);
        return;
      }
    }
    const count = s.tab === "missions" ? (s.drill.level === "tasks" ? s.tasks.length : s.missions.length) : s.tab === "agents" ? s.agents.length : s.tab === "approvals" ? s.approvals.length : s.events.length;
    if (key.downArrow || input === "j") return go({ selected: Math.min(s.selected + 1, Math.max(0, count - 1)) });
    if (key.upArrow || input === "k") return go({ selected: Math.max(0, s.selected - 1) });
    if (s.tab === "approvals" && input === "a") return void decide(true);
    if (s.tab === "approvals" && input === "r") return void decide(false);
  });

  const sortedFrames = [...frames.values()].sort((a, b) => a.id - b.id);
  return (
    <Box flexDirection="column">
      <Box>
        <Text bold>ep </Text>
        <Text dimColor>{source.label}  </Text>
        {TABS.map((t, i) => (
          <Text key={t} inverse={t === tab}>{` ${i + 1} ${t}${t === "approvals" && approvals.length ? ` (${approvals.length})` : ""} `}</Text>
        ))}
      </Box>
      <Box flexDirection="column" marginTop={1}>
        {tab === "missions" && drill.level === "missions" && (
          <List columns={["Mission", "Domain", "Status"]} rows={missions.map((m) => [m.title, m.domainName, m.status])} selected={selected} empty="(no missions)" width={width} />
        )}
        {tab === "missions" && drill.level === "tasks" && (
          <>
            <Text bold>{`${drill.mission.title} · tasks`}</Text>
            <List columns={["Task", "Status", "Runtime", "Agent"]} rows={tasks.map((t) => [t.title, t.status, runtimeLabel(t.runtime), t.agent])} selected={selected} empty="(no tasks in this mission)" width={width} />
          </>
        )}
        {tab === "missions" && drill.level === "task" && <TaskScreen task={task} frames={sortedFrames} width={width} error={taskError} />}
        {tab === "agents" && (
          <List
            columns={["Agent", "Runtime", "State", "Running"]}
            rows={agents.map((a) => [a.name || a.id, runtimeLabel(a.runtime), a.state, a.taskTitle ?? ""])}
            selected={selected}
            empty="(no agents)"
            width={width}
          />
        )}
        {tab === "approvals" && (
          <List columns={["Waiting for approval", "Session"]} rows={approvals.map((a) => [a.summary || a.tool, a.sessionId])} selected={selected} empty="(nothing waits for approval)" width={width} />
        )}
        {tab === "events" && (events.length === 0 ? <Text dimColor>(waiting for events)</Text> : events.slice(-20).map((e) => <Text key={e.id}>{eventLine(e, width)}</Text>))}
        {tab === "console" && <ChatScreen blocks={blocks} draft={draft} busy={busy} width={width} />}
      </Box>
      <Box marginTop={1}>
        <Text dimColor>{`${status} · ${footerKeys(tab, drill.level)}`}</Text>
      </Box>
    </Box>
  );
}

