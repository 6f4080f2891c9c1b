// The interactive console: tabs for missions, agents, approvals and live events, and a composer
// that talks to an AI session. Keys: 1-5 or Tab to switch, ↑/↓ to select, a/r to approve/reject,
// Enter in the console tab to send, q (outside the composer) or Ctrl-C to quit.
import { Box, Text, useApp, useInput } from "ink";
import { useCallback, useEffect, useRef, useState } from "react";
import type { AgentItem, ApprovalItem, EventItem, MissionItem, TuiDataSource } from "./data-source.js";

export const TABS = ["missions", "agents", "approvals", "events", "console"] as const;
export type Tab = (typeof TABS)[number];

const MAX_EVENTS = 200;

interface Line {
  who: "you" | "ai" | "info" | "error";
  text: string;
}

export interface AppProps {
  source: TuiDataSource;
  initialTab?: Tab;
  /** called once the first frame is on screen (the start-up benchmark uses it) */
  onFirstFrame?: () => void;
}

function Row({ cols, widths, selected }: { cols: string[]; widths: number[]; selected?: boolean }) {
  return (
    <Text inverse={selected}>
      {cols.map((c, i) => (c.length > widths[i] ? c.slice(0, widths[i] - 1) + "…" : c.padEnd(widths[i])) + " ").join("")}
    </Text>
  );
}

export function App({ source, initialTab = "missions", onFirstFrame }: AppProps) {
  const { exit } = useApp();
  const [tab, setTab] = useState<Tab>(initialTab);
  const [missions, setMissions] = useState<MissionItem[]>([]);
  const [agents, setAgents] = useState<AgentItem[]>([]);
  const [approvals, setApprovals] = useState<ApprovalItem[]>([]);
  const [events, setEvents] = useState<EventItem[]>([]);
  const [selected, setSelected] = useState(0);
  const [status, setStatus] = useState("loading…");
  const [draft, setDraft] = useState("");
  const [transcript, setTranscript] = useState<Line[]>([]);
  const [busy, setBusy] = useState(false);
  const readySent = useRef(false);
  const refreshTimer = useRef<NodeJS.Timeout | undefined>(undefined);

  const refresh = useCallback(async () => {
    try {
      const [m, a, p] = await Promise.all([source.missions(), source.agents(), source.approvals()]);
      setMissions(m);
      setAgents(a);
      setApprovals(p);
      setStatus(`updated ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      setStatus(`error: ${(err as Error).message}`);
    }
  }, [source]);

  useEffect(() => {
    void refresh();
    const stop = source.subscribe(
      (e) => {
        setEvents((prev) => [...prev.slice(-(MAX_EVENTS - 1)), e]);
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
  }, [source, refresh]);

  useEffect(() => {
    if (readySent.current) return;
    readySent.current = true;
    onFirstFrame?.();
  }, [onFirstFrame]);

  // the key handler may run before React re-subscribes it after a render: read the latest state
  const latest = useRef({ approvals, selected });
  latest.current = { approvals, selected };

  const decide = async (approve: boolean) => {
    const action = latest.current.approvals[latest.current.selected];
    if (!action) return;
    try {
      const res = approve ? await source.approve(action.sessionId, action.id) : await source.reject(action.sessionId, action.id);
      await refresh();
      setStatus(`${action.id} ${res.status}`);
      setSelected((s) => Math.max(0, Math.min(s, latest.current.approvals.length - 1)));
    } catch (err) {
      setStatus(`error: ${(err as Error).message}`);
    }
  };

  const send = async (text: string) => {
    setTranscript((t) => [...t, { who: "you", text }]);
    setBusy(true);
    try {
      const reply = await source.chat(text);
      const lines: Line[] = [{ who: "ai", text: reply.text || "(no reply)" }];
      for (const a of reply.actions) lines.push({ who: "info", text: `pending action ${a.id}: ${a.summary || a.tool} — approve in the approvals tab (3)` });
      setTranscript((t) => [...t, ...lines]);
      if (reply.actions.length) await refresh();
    } catch (err) {
      setTranscript((t) => [...t, { who: "error", text: (err as Error).message }]);
    } finally {
      setBusy(false);
    }
  };

  useInput((input, key) => {
    if (key.ctrl && input === "c") return exit();
    if (tab === "console") {
      if (key.escape || (key.tab && !draft)) return setTab(key.shift ? "events" : "missions");
      if (key.return) {
        const text = draft.trim();
        setDraft("");
        if (text && !busy) void send(text);
        return;
      }
      if (key.backspace || key.delete) return setDraft((d) => d.slice(0, -1));
      if (input && !key.ctrl && !key.meta) setDraft((d) => d + input);
      return;
    }
    if (input === "q") return exit();
    const n = Number(input);
    if (n >= 1 && n <= TABS.length) {
      setTab(TABS[n - 1]);
      return setSelected(0);
    }
    if (key.tab || key.rightArrow || key.leftArrow) {
      const dir = key.leftArrow || key.shift ? -1 : 1;
      setTab((t) => TABS[(TABS.indexOf(t) + dir + TABS.length) % TABS.length]);
      return setSelected(0);
    }
    const count = tab === "missions" ? missions.length : tab === "agents" ? agents.length : tab === "approvals" ? approvals.length : events.length;
    if (key.downArrow || input === "j") return setSelected((s) => Math.min(s + 1, Math.max(0, count - 1)));
    if (key.upArrow || input === "k") return setSelected((s) => Math.max(0, s - 1));
    if (input === "g") return void refresh();
    if (tab === "approvals" && input === "a") return void decide(true);
    if (tab === "approvals" && input === "r") return void decide(false);
  });

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
        {tab === "missions" && (
          <>
            <Row cols={["ID", "DOMAIN", "TITLE", "STATUS"]} widths={[28, 28, 36, 10]} />
            {missions.length === 0 ? <Text dimColor>(no missions)</Text> : missions.map((m, i) => <Row key={m.id} cols={[m.id, m.domainId, m.title, m.status]} widths={[28, 28, 36, 10]} selected={i === selected} />)}
          </>
        )}
        {tab === "agents" && (
          <>
            <Row cols={["ID", "NAME", "RUNTIME", "STATE"]} widths={[28, 20, 20, 10]} />
            {agents.length === 0 ? <Text dimColor>(no agents)</Text> : agents.map((a, i) => <Row key={a.id} cols={[a.id, a.name, a.runtime, a.state]} widths={[28, 20, 20, 10]} selected={i === selected} />)}
          </>
        )}
        {tab === "approvals" && (
          <>
            <Row cols={["ACTION", "TOOL", "SUMMARY"]} widths={[28, 22, 50]} />
            {approvals.length === 0 ? <Text dimColor>(nothing waits for approval)</Text> : approvals.map((a, i) => <Row key={a.id} cols={[a.id, a.tool, a.summary]} widths={[28, 22, 50]} selected={i === selected} />)}
            <Text dimColor>a approve · r reject · ↑/↓ select</Text>
          </>
        )}
        {tab === "events" && (
          <>
            {events.length === 0 ? <Text dimColor>(waiting for events)</Text> : events.slice(-20).map((e) => <Text key={e.id}>{`${String(e.id).padStart(6)} ${e.type.padEnd(9)} ${e.name} ${e.status} ${e.detail}`}</Text>)}
          </>
        )}
        {tab === "console" && (
          <>
            {transcript.slice(-20).map((l, i) => (
              <Text key={i} color={l.who === "error" ? "red" : l.who === "info" ? "yellow" : undefined}>{`${l.who === "you" ? "> " : "  "}${l.text}`}</Text>
            ))}
            <Text>{`> ${draft}${busy ? "  (thinking…)" : "▏"}`}</Text>
          </>
        )}
      </Box>
      <Box marginTop={1}>
        <Text dimColor>{`${status} · 1-5/Tab switch · g refresh · q quit`}</Text>
      </Box>
    </Box>
  );
}
