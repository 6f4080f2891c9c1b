// The interactive console (`ep` on a terminal): tabs for missions (and their tasks, and a task's
// live view), agents, approvals, live events, and a composer that talks to an AI session. The
// footer always lists the keys that work where you are.
//
// Keys are handled against refs, not render-time state: a paste or fast typing delivers many
// chunks before React renders again, and every one of them must land (see app.test.tsx).
import { Box, Text, useApp, useInput, useStdout, type Key } from "ink";
import { useCallback, useEffect, useRef, useState } from "react";
import type {
  AgentItem,
  ApprovalItem,
  EventItem,
  FrameItem,
  MissionItem,
  TaskDetail,
  TaskItem,
  TuiDataSource,
} from "./data-source.js";
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
type Drill =
  | { level: "missions" }
  | { level: "tasks"; mission: MissionItem }
  | { level: "task"; mission?: MissionItem; taskId: string };

const RUNTIME_LABELS: Record<string, string> = {
  vendorA_code: "Claude Code",
  vendorA_agent_acp: "ACP agent",
  vendorB: "Codex",
  vendorC: "Gemini",
  shell: "Shell",
  muxhost: "tmux",
};
const runtimeLabel = (r: string) => RUNTIME_LABELS[r] ?? r;

export function footerKeys(tab: Tab, drill: Drill["level"]): string {
  const common = "1-5 or Tab: switch · q quit";
  if (tab === "console") return "Enter send · Esc or Tab (empty line): leave · Ctrl-C quit";
  if (tab === "missions" && drill === "missions") return `↑/↓ select · Enter open tasks · g refresh · ${common}`;
  if (tab === "missions" && drill === "tasks") return `↑/↓ select · Enter open task · Esc back · g refresh · ${common}`;
  if (tab === "missions") return `c cancel (asks first) · r retry · Esc back · g refresh · ${common}`;
  if (tab === "approvals") return `↑/↓ select · a approve · r reject · g refresh · ${common}`;
  if (tab === "events") return `live, newest last · ${common}`;
  return `↑/↓ select · g refresh · ${common}`;
}

export function App({ source, initialTab = "missions", onFirstFrame }: AppProps) {
  const { exit } = useApp();
  const { stdout } = useStdout();
  const width = Math.max(40, (stdout?.columns ?? 100) - 1);
  const [tab, setTab] = useState<Tab>(initialTab);
  const [drill, setDrill] = useState<Drill>({ level: "missions" });
  const [selected, setSelected] = useState(0);
  const [draft, setDraft] = useState("");
  const [blocks, setBlocks] = useState<ChatBlock[]>([]);
  const [busy, setBusy] = useState(false);
  const readySent = useRef(false);
  // what the last key did ("approved …", "cancel …? y/n"): the footer shows it until the next key,
  // so a refresh that events trigger does not wipe it
  const [notice, setNotice] = useState("");
  // what the key handler reads: updated as keys arrive, not only when React renders
  const st = useRef({
    tab,
    drill,
    selected,
    draft,
    busy,
    confirmCancel: false,
    missions: [] as MissionItem[],
    tasks: [] as TaskItem[],
    approvals: [] as ApprovalItem[],
    agents: [] as AgentItem[],
    events: [] as EventItem[],
  });
  const data = useTowerData(source, () => st.current.drill);
  const {
    missions,
    agents,
    approvals,
    events,
    tasks,
    setTasks,
    task,
    setTask,
    frames,
    setFrames,
    taskError,
    status,
    setStatus,
    refresh,
    loadTask,
  } = data;
  st.current = { ...st.current, missions, tasks, approvals, agents, events, busy };

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
      const res = approve
        ? await source.approve(action.sessionId, action.id)
        : await source.reject(action.sessionId, action.id);
      await refresh();
      setNotice(decisionNotice(action, res));
      go({ selected: Math.max(0, Math.min(st.current.selected, st.current.approvals.length - 1)) });
    } catch (err) {
      setNotice(`${approve ? "approve" : "reject"} refused: ${(err as Error).message}`);
    }
  };

  /** `c` asks first: cancelling stops an agent's run, so it takes a second key (y). */
  const askCancel = () => {
    const d = st.current.drill;
    if (d.level !== "task") return;
    st.current.confirmCancel = true;
    setNotice(`cancel "${task?.title ?? d.taskId}"? y cancels it, any other key keeps it`);
  };

  const actOnTask = async (op: "cancel" | "retry") => {
    const d = st.current.drill;
    if (d.level !== "task") return;
    try {
      const t = await (op === "cancel" ? source.cancelTask(d.taskId) : source.retryTask(d.taskId));
      setTask(t);
      setNotice(
        op === "cancel"
          ? `cancelled "${t.title}" (${t.status})`
          : `"${t.title}" is ${t.status} again: attempt ${t.attempts + 1} ` +
              `of ${t.maxAttempts} starts when an agent takes it`,
      );
    } catch (err) {
      setNotice(`${op} refused: ${(err as Error).message}`);
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
      for (const spec of reply.viewSpecs ?? [])
        out.push({
          who: "ai",
          lines: viewSpecLines(spec, width - 2, (id) => (pending.has(id) ? "pending" : undefined)),
        });
      for (const a of reply.actions)
        out.push({ who: "info", lines: [`waiting for approval: ${a.summary || a.tool} (tab 3: a approve, r reject)`] });
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

  useInput((input, key) =>
    onKey(input, key, st.current, {
      exit,
      go,
      switchTab,
      send,
      setStatus,
      setNotice,
      loadTask,
      refresh,
      actOnTask,
      askCancel,
      openMission,
      openTask,
      decide,
    }),
  );

  return (
    <Screen
      label={source.label}
      tab={tab}
      drill={drill}
      width={width}
      selected={selected}
      status={notice || status}
      data={{ missions, agents, approvals, events, tasks, task, frames, taskError, blocks, draft, busy }}
    />
  );
}

interface ScreenData {
  missions: MissionItem[];
  agents: AgentItem[];
  approvals: ApprovalItem[];
  events: EventItem[];
  tasks: TaskItem[];
  task: TaskDetail | undefined;
  frames: Map<number, FrameItem>;
  taskError: string | undefined;
  blocks: ChatBlock[];
  draft: string;
  busy: boolean;
}

/** What the console shows: the tab bar, the current tab, and the footer with the keys that work there. */
function Screen({
  label,
  tab,
  drill,
  width,
  selected,
  status,
  data,
}: {
  label: string;
  tab: Tab;
  drill: Drill;
  width: number;
  selected: number;
  status: string;
  data: ScreenData;
}) {
  const { missions, agents, approvals, events, tasks, task, frames, taskError, blocks, draft, busy } = data;
  const sortedFrames = [...frames.values()].sort((a, b) => a.id - b.id);
  return (
    <Box flexDirection="column">
      <Box>
        <Text bold>ep </Text>
        <Text dimColor>
          {label}
          {"  "}
        </Text>
        {TABS.map((t, i) => (
          <Text
            key={t}
            inverse={t === tab}
          >{` ${i + 1} ${t}${t === "approvals" && approvals.length ? ` (${approvals.length})` : ""} `}</Text>
        ))}
      </Box>
      <Box flexDirection="column" marginTop={1}>
        {tab === "missions" && drill.level === "missions" && (
          <List
            columns={["Mission", "Domain", "Status"]}
            rows={missions.map((m) => [m.title, m.domainName, m.status])}
            selected={selected}
            empty="(no missions)"
            width={width}
          />
        )}
        {tab === "missions" && drill.level === "tasks" && (
          <>
            <Text bold>{`${drill.mission.title} · tasks`}</Text>
            <List
              columns={["Task", "Status", "Runtime", "Agent"]}
              rows={tasks.map((t) => [
                t.title,
                t.waitingOn?.length ? `waiting on ${t.waitingOn.join(", ")}` : t.status,
                runtimeLabel(t.runtime),
                t.agent,
              ])}
              selected={selected}
              empty="(no tasks in this mission)"
              width={width}
            />
          </>
        )}
        {tab === "missions" && drill.level === "task" && (
          <TaskScreen task={task} frames={sortedFrames} width={width} error={taskError} />
        )}
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
          <List
            columns={["Waiting for approval", "For"]}
            rows={approvals.map((a) => [a.summary || a.tool, approvalFor(a)])}
            selected={selected}
            empty="(nothing waits for approval)"
            width={width}
          />
        )}
        {tab === "events" &&
          (events.length === 0 ? (
            <Text dimColor>(waiting for events)</Text>
          ) : (
            events.slice(-20).map((e) => <Text key={e.id}>{eventLine(e, width)}</Text>)
          ))}
        {tab === "console" && <ChatScreen blocks={blocks} draft={draft} busy={busy} width={width} />}
      </Box>
      <Box marginTop={1}>
        <Text dimColor>{`${status} · ${footerKeys(tab, drill.level)}`}</Text>
      </Box>
    </Box>
  );
}

/** Who asks: an AI session by its title, or an agent's tool call. */
function approvalFor(a: ApprovalItem): string {
  if (!a.sessionId) return "an agent's tool call";
  return a.session ? `session "${a.session}"` : "an AI session";
}

/** What approving or rejecting did, in words. */
export function decisionNotice(asked: ApprovalItem, res: ApprovalItem): string {
  const what = asked.summary || asked.tool;
  if (!asked.sessionId) {
    return res.status === "approved"
      ? `allowed: ${what}; the agent goes on with it`
      : `refused: ${what}; the agent goes on without it`;
  }
  if (res.status === "rejected") return `rejected: ${what}; nothing was changed`;
  if (res.error) return `approved: ${what}, but it failed: ${res.error}`;
  return `approved and done: ${what}`;
}

/** What the console does with the state it is in and one key (or a pasted chunk). */
type KeyActions = {
  exit(): void;
  go(next: Partial<{ tab: Tab; drill: Drill; selected: number; draft: string }>): void;
  switchTab(to: Tab): void;
  send(text: string): Promise<void>;
  setStatus(text: string): void;
  setNotice(text: string): void;
  loadTask(taskId: string, withFrames: boolean): Promise<void>;
  refresh(): Promise<void>;
  actOnTask(op: "cancel" | "retry"): Promise<void>;
  askCancel(): void;
  openMission(mission: MissionItem): Promise<void>;
  openTask(taskId: string, mission?: MissionItem): void;
  decide(approve: boolean): Promise<void>;
};

type KeyState = {
  tab: Tab;
  drill: Drill;
  selected: number;
  draft: string;
  busy: boolean;
  confirmCancel: boolean;
  missions: MissionItem[];
  tasks: TaskItem[];
  approvals: ApprovalItem[];
  agents: AgentItem[];
  events: EventItem[];
};

function onKey(input: string, key: Key, s: KeyState, act: KeyActions): void {
  if (key.ctrl && input === "c") return act.exit();
  if (s.confirmCancel) {
    s.confirmCancel = false;
    if (input === "y") return void act.actOnTask("cancel");
    return act.setNotice("not cancelled: the task goes on");
  }
  act.setNotice("");
  if (s.tab === "console") {
    if (key.escape || (key.tab && !s.draft)) return act.switchTab(key.shift ? "events" : "missions");
    if (key.return) {
      const text = s.draft.trim();
      if (!text) return;
      if (s.busy) return act.setStatus("wait for the reply; your line is kept");
      act.go({ draft: "" });
      return void act.send(text);
    }
    if (key.backspace || key.delete) return act.go({ draft: s.draft.slice(0, -1) });
    // a pasted chunk may hold line breaks: the composer is one line
    if (input && !key.ctrl && !key.meta) return act.go({ draft: s.draft + input.replace(/\r\n|\r|\n/g, " ") });
    return;
  }
  if (input === "q") return act.exit();
  const n = Number(input);
  if (n >= 1 && n <= TABS.length) return act.switchTab(TABS[n - 1]);
  if (key.tab || key.rightArrow || key.leftArrow) {
    const dir = key.leftArrow || key.shift ? -1 : 1;
    return act.switchTab(TABS[(TABS.indexOf(s.tab) + dir + TABS.length) % TABS.length]);
  }
  if (input === "g") {
    if (s.drill.level === "task" && s.tab === "missions") void act.loadTask(s.drill.taskId, true);
    return void act.refresh();
  }
  if (s.tab === "missions") {
    if (key.escape || key.backspace) {
      if (s.drill.level === "task" && s.drill.mission)
        return act.go({ drill: { level: "tasks", mission: s.drill.mission }, selected: 0 });
      return act.go({ drill: { level: "missions" }, selected: 0 });
    }
    if (s.drill.level === "task") {
      if (input === "c") return act.askCancel();
      if (input === "r") return void act.actOnTask("retry");
      return;
    }
    if (key.return) {
      if (s.drill.level === "missions" && s.missions[s.selected]) return void act.openMission(s.missions[s.selected]);
      if (s.drill.level === "tasks" && s.tasks[s.selected])
        return act.openTask(s.tasks[s.selected].id, s.drill.mission);
      return;
    }
  }
  const count =
    s.tab === "missions"
      ? s.drill.level === "tasks"
        ? s.tasks.length
        : s.missions.length
      : s.tab === "agents"
        ? s.agents.length
        : s.tab === "approvals"
          ? s.approvals.length
          : s.events.length;
  if (key.downArrow || input === "j") return act.go({ selected: Math.min(s.selected + 1, Math.max(0, count - 1)) });
  if (key.upArrow || input === "k") return act.go({ selected: Math.max(0, s.selected - 1) });
  if (s.tab === "approvals" && input === "a") return void act.decide(true);
  if (s.tab === "approvals" && input === "r") return void act.decide(false);
}

/** The tower's data the console shows, kept current from the event stream (a burst of events is one refresh). */
function useTowerData(source: TuiDataSource, drillOf: () => Drill) {
  const [missions, setMissions] = useState<MissionItem[]>([]);
  const [agents, setAgents] = useState<AgentItem[]>([]);
  const [approvals, setApprovals] = useState<ApprovalItem[]>([]);
  const [events, setEvents] = useState<EventItem[]>([]);
  const [tasks, setTasks] = useState<TaskItem[]>([]);
  const [task, setTask] = useState<TaskDetail>();
  const [frames, setFrames] = useState<Map<number, FrameItem>>(new Map());
  const [taskError, setTaskError] = useState<string>();
  const [status, setStatus] = useState("loading…");
  const refreshTimer = useRef<NodeJS.Timeout | undefined>(undefined);

  // biome-ignore lint/correctness/useExhaustiveDependencies: drillOf reads the current drill when called
  const refresh = useCallback(async () => {
    try {
      const d = drillOf();
      const [m, a, p, t] = await Promise.all([
        source.missions(),
        source.agents(),
        source.approvals(),
        d.level === "tasks" ? source.tasks(d.mission.id) : undefined,
      ]);
      setMissions(m);
      setAgents(a);
      setApprovals(p);
      if (t) setTasks(t);
      setStatus(`updated ${new Date().toLocaleTimeString([], { hour12: false })}`);
    } catch (err) {
      setStatus(`error: ${(err as Error).message}`);
    }
  }, [source]);

  // biome-ignore lint/correctness/useExhaustiveDependencies: drillOf reads the current drill when called
  const loadTask = useCallback(
    async (taskId: string, withFrames: boolean) => {
      try {
        const [t, f] = await Promise.all([source.task(taskId), withFrames ? source.frames(taskId) : undefined]);
        const d = drillOf();
        if (d.level !== "task" || d.taskId !== taskId) return;
        setTask(t);
        setTaskError(undefined);
        if (f) setFrames((old) => new Map([...f.map((x) => [x.id, x] as const), ...old]));
      } catch (err) {
        setTaskError((err as Error).message);
      }
    },
    [source],
  );

  // biome-ignore lint/correctness/useExhaustiveDependencies: drillOf reads the current drill when called
  useEffect(() => {
    void refresh();
    const stop = source.subscribe(
      (e) => {
        setEvents((prev) => [...prev.slice(-(MAX_EVENTS - 1)), e]);
        const d = drillOf();
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
  return {
    missions,
    agents,
    approvals,
    events,
    tasks,
    setTasks,
    task,
    setTask,
    frames,
    setFrames,
    taskError,
    status,
    setStatus,
    refresh,
    loadTask,
  };
}
