// The task page (/ui/tasks/<id>): what one task is, who runs it, and what it is doing right now.
// The header comes from GetTask (re-read whenever an event about the task or one of its broadcast
// runs arrives); the transcript is the task's progress frames, replayed from the tower when the
// page opens and then appended live from the console's event feed, deduplicated by event id.
import { agentStateOf, kindOf, runtimeWord, statusOf } from "./words.js";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { Agent, Task } from "@gen/ep/tower/v1/resources_pb.js";
import { api, describeError } from "./api.js";
import type { Dashboard } from "./dashboard.js";
import type { StreamEvent } from "./live-stream.js";
import { TerminalPanel } from "./terminal/index.js";
import { Ago, CopyId, ErrorNote, StatusBadge, duration, runtimeLabel, usd, useNow } from "./ui.js";
import { WorkspaceChange } from "./diff.js";
import { DenialsSection, TaskStatusBadge } from "./denials.js";
import { TaskWaitNote } from "./task-wait.js";
import type { TaskWait } from "@gen/ep/tower/v1/work_pb.js";
import { isoOf } from "@common/vocab.js";
import { attemptOfFrame, attemptsOf, ranMs, type Attempt, type TaskEventLite } from "./task-attempts.js";

export interface Frame {
  id: number;
  kind: string;
  text: string;
  data?: Record<string, unknown>;
  at?: string;
}

const FINAL = new Set(["succeeded", "failed", "cancelled", "done"]);
const CANCELLABLE = new Set(["queued", "claimed", "running"]);
const RETRYABLE = new Set(["failed", "cancelled"]);
const PAGE = 500;

function frameOf(id: number, payload: Record<string, unknown> | undefined, at?: string): Frame {
  const p = payload ?? {};
  return {
    id,
    kind: String(p.kind ?? "text"),
    text: String(p.text ?? ""),
    data: (p.data as Record<string, unknown> | undefined) ?? undefined,
    at,
  };
}

/**
 * The task's progress frames and its own matrix events (claims, ends: its attempts): replayed,
 * then live; in id order, each once. The live feed starts at
 * the tower's newest event when it opens, which can be after the first replay read: a frame
 * committed between the two would be in neither, so every time the feed opens the replay runs
 * again from the last frame it saw (frames are kept by id: nothing shows twice).
 */
function useTranscript(
  taskId: string,
  subscribe: Dashboard["subscribe"],
  streamOpen: boolean,
): { frames: Frame[]; attempts: Attempt[]; error?: string } {
  const [frames, setFrames] = useState<Map<number, Frame>>(new Map());
  const [changes, setChanges] = useState<Map<number, TaskEventLite>>(new Map());
  const [error, setError] = useState<string>();
  const add = useCallback((list: Frame[]) => {
    if (!list.length) return;
    setFrames((old) => {
      const next = new Map(old);
      for (const f of list) next.set(f.id, f);
      return next;
    });
  }, []);
  const addChanges = useCallback((list: TaskEventLite[]) => {
    if (!list.length) return;
    setChanges((old) => {
      const next = new Map(old);
      for (const e of list) next.set(e.id, e);
      return next;
    });
  }, []);

  // the last replayed id of this task (the next replay starts after it)
  const replayed = useRef({ taskId, after: 0n });
  const replay = useCallback(
    (stop: () => boolean) => {
      void (async () => {
        try {
          for (;;) {
            const res = await api.events.listEvents({
              afterId: replayed.current.after,
              limit: PAGE,
              filter: { taskId, types: ["progress", "matrix"] },
            });
            if (stop()) return;
            add(
              res.events
                .filter((e) => e.type === "progress")
                .map((e) =>
                  frameOf(Number(e.id), e.payload as Record<string, unknown> | undefined, isoOf(e.createdAt)),
                ),
            );
            addChanges(
              res.events
                .filter((e) => e.type === "matrix")
                .map((e) => ({ id: Number(e.id), name: e.name, at: isoOf(e.createdAt) })),
            );
            if (res.events.length) replayed.current.after = res.events[res.events.length - 1].id;
            if (res.events.length < PAGE) return;
          }
        } catch (err) {
          if (!stop()) setError(`could not load the progress: ${describeError(err)}`);
        }
      })();
    },
    [taskId, add, addChanges],
  );

  useEffect(() => {
    setFrames(new Map());
    setChanges(new Map());
    replayed.current = { taskId, after: 0n };
    // subscribe before replaying, so nothing falls between the two once the feed is open
    const off = subscribe((ev: StreamEvent) => {
      if (ev.task_id !== taskId) return;
      if (ev.type === "progress") add([frameOf(Number(ev.id), ev.payload, ev.created_at)]);
      else if (ev.type === "matrix" && ev.name) addChanges([{ id: Number(ev.id), name: ev.name, at: ev.created_at }]);
    });
    let stopped = false;
    replay(() => stopped);
    return () => {
      stopped = true;
      off();
    };
    // subscribe is stable; the dashboard object changes with every event
  }, [taskId, subscribe, add, addChanges, replay]);

  // the feed opened after the first replay (or again after an outage): what was committed before
  // it started is read once more; a feed already open at mount needs only the first replay
  const wasOpen = useRef(streamOpen);
  useEffect(() => {
    const opened = streamOpen && !wasOpen.current;
    wasOpen.current = streamOpen;
    if (!opened) return;
    let stopped = false;
    replay(() => stopped);
    return () => void (stopped = true);
  }, [streamOpen, replay]);

  const sorted = useMemo(() => [...frames.values()].sort((a, b) => a.id - b.id), [frames]);
  const attempts = useMemo(() => attemptsOf([...changes.values()]), [changes]);
  return { frames: sorted, attempts, error };
}

/** The task and its runs, reloaded when their own events arrive (a burst is one load). */
function useTask(taskId: string, subscribe: Dashboard["subscribe"], streamOpen: boolean) {
  const [task, setTask] = useState<Task>();
  const [runs, setRuns] = useState<Task[]>([]);
  const [wait, setWait] = useState<TaskWait>();
  const [error, setError] = useState<string>();
  const load = useCallback(async () => {
    try {
      const res = await api.work.getTask({ taskId });
      setTask(res.task);
      setRuns(res.runs);
      setWait(res.wait);
      setError(undefined);
    } catch (err) {
      setError(describeError(err));
    }
  }, [taskId]);

  // the header follows the task's own events and its runs'
  const runIds = useRef(new Set<string>());
  runIds.current = new Set(runs.map((r) => r.id));
  useEffect(() => {
    void load();
    let timer: number | undefined;
    const off = subscribe((ev) => {
      if (ev.type === "progress" || !ev.task_id || (ev.task_id !== taskId && !runIds.current.has(ev.task_id))) return;
      window.clearTimeout(timer);
      timer = window.setTimeout(() => void load(), 80);
    });
    return () => {
      off();
      window.clearTimeout(timer);
    };
  }, [taskId, subscribe, load]);
  // the feed opened after the first load (or again after an outage): a change committed before it started is read now
  const wasOpen = useRef(streamOpen);
  useEffect(() => {
    const opened = streamOpen && !wasOpen.current;
    wasOpen.current = streamOpen;
    if (opened) void load();
  }, [streamOpen, load]);
  return { task, setTask, runs, wait, reload: load, error };
}

export function TaskView({
  taskId,
  dashboard,
  canOperate,
  canAdmin,
  navigate,
}: {
  taskId: string;
  dashboard: Dashboard;
  canOperate: boolean;
  canAdmin: boolean;
  navigate(to: string): void;
}) {
  const { subscribe } = dashboard;
  const { task, setTask, runs, wait, reload, error } = useTask(taskId, subscribe, dashboard.stream.status === "open");
  const [busy, setBusy] = useState<string>();
  // what the last button did; a success note holds until the task ends in another state than the
  // one it left it in ("Queued again." is gone once the retry failed: the badge says how it ended)
  const [note, setNote] = useState<{ ok: boolean; text: string; status?: string }>();
  const [terminal, setTerminal] = useState(false);
  const now = useNow(5_000);
  const {
    frames,
    attempts,
    error: transcriptError,
  } = useTranscript(taskId, subscribe, dashboard.stream.status === "open");
  const { agents, nodes, missions, domains } = dashboard.data;
  const agentOf = useMemo(() => new Map(agents.map((a) => [a.id, a])), [agents]);
  const nodeName = useMemo(() => new Map(nodes.map((n) => [n.id, n.hostname])), [nodes]);

  const act = async (op: "cancel" | "retry") => {
    setBusy(op);
    setNote(undefined);
    try {
      const res =
        op === "cancel"
          ? await api.work.cancelTask({ taskId, reason: "cancelled from the console" })
          : await api.work.retryTask({ taskId });
      if (res.task) setTask(res.task);
      setNote({
        ok: true,
        text: op === "cancel" ? "Cancelled." : "Queued again.",
        status: res.task ? statusOf(res.task) : undefined,
      });
    } catch (err) {
      setNote({ ok: false, text: `${op === "cancel" ? "Cancel" : "Retry"} failed: ${describeError(err)}` });
    } finally {
      setBusy(undefined);
    }
  };

  const link = (to: string) => (e: React.MouseEvent) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
    e.preventDefault();
    navigate(to);
  };

  if (!task) return <TaskMissing taskId={taskId} error={error} link={link} />;

  const mission = missions.find((m) => m.id === task.missionId);
  const domain = domains.find((d) => d.id === task.domainId);
  const agentId = task.claimedBy || task.assigneeAgentId;
  const agent = agentOf.get(agentId);
  const final = FINAL.has(statusOf(task));
  const lastRan = final ? ranMs(attempts.at(-1)) : undefined;
  const shownNote = note && (!note.ok || !note.status || note.status === statusOf(task) || !final) ? note : undefined;
  const attachable = !!agent && !final && agentStateOf(agent) !== "dead";

  return (
    <section className="tab-panel task-page" aria-labelledby="task-title" data-task-id={task.id}>
      <nav className="crumbs small muted" aria-label="Breadcrumb">
        <a href="/ui/missions" onClick={link("/ui/missions")}>
          Missions
        </a>{" "}
        › {domain?.name ?? task.domainId} › {mission?.title ?? task.missionId}
        {task.parentTaskId && (
          <>
            {" "}
            ›{" "}
            <a href={`/ui/tasks/${task.parentTaskId}`} onClick={link(`/ui/tasks/${task.parentTaskId}`)}>
              broadcast
            </a>
          </>
        )}
      </nav>
      <header className="task-head">
        <h2 id="task-title">{task.title}</h2>
        <TaskStatusBadge status={statusOf(task)} denials={task.result?.denials ?? []} />
        <div className="button-row task-actions">
          {canOperate && CANCELLABLE.has(statusOf(task)) && (
            <button type="button" className="btn" disabled={busy !== undefined} onClick={() => void act("cancel")}>
              Cancel
            </button>
          )}
          {canOperate && RETRYABLE.has(statusOf(task)) && (
            <button
              type="button"
              className="btn btn-primary"
              disabled={busy !== undefined}
              onClick={() => void act("retry")}
            >
              Retry
            </button>
          )}
          {attachable && (
            <button type="button" className="btn" onClick={() => setTerminal((v) => !v)}>
              {terminal ? "Hide terminal" : "Attach terminal"}
            </button>
          )}
        </div>
      </header>
      {shownNote && (
        <p className={shownNote.ok ? "muted small" : "error-note"} role={shownNote.ok ? "status" : "alert"}>
          {shownNote.text}
        </p>
      )}
      <ErrorNote error={error} />
      <TaskFacts
        task={task}
        agent={agent}
        agentId={agentId}
        nodeName={nodeName}
        now={now}
        final={final}
        ranMs={lastRan}
      />
      {wait && !final && (
        <TaskWaitNote
          wait={wait}
          domainId={task.domainId}
          nodeName={nodeName}
          canAdmin={canAdmin}
          onEnrolled={() => void reload()}
        />
      )}
      {terminal && agent && (
        <TerminalPanel
          key={agent.id}
          agentId={agent.id}
          label={agent.name || agent.id}
          onClose={() => setTerminal(false)}
        />
      )}
      {runs.length > 0 && <RunsTable runs={runs} agentOf={agentOf} now={now} link={link} />}
      <section aria-labelledby="progress-heading">
        <h3 id="progress-heading">
          Progress <span className="muted small">{final ? `${frames.length} frames` : "live"}</span>
        </h3>
        <ErrorNote error={transcriptError} />
        <Transcript frames={frames} live={!final} attempts={attempts} />
      </section>
      <DenialsSection denials={task.result?.denials ?? []} />
      {task.result?.workspace && (
        <WorkspaceChange
          ws={task.result.workspace}
          mergeable={canOperate && statusOf(task) === "succeeded" ? task.id : undefined}
        />
      )}
      {task.result?.error && (
        <section aria-labelledby="error-heading">
          <h3 id="error-heading">Error</h3>
          <pre className="task-error">{task.result.error}</pre>
        </section>
      )}
      {task.result && (task.result.output || final) && (
        <section aria-labelledby="output-heading">
          <h3 id="output-heading">Output</h3>
          {task.result.output ? (
            <pre className="task-output">{task.result.output}</pre>
          ) : (
            <p className="muted small">
              {frames.length
                ? `No final ` +
                  `output${statusOf(task) === "cancelled" ? ": it was cancelled before it reported one" : ""}. ` +
                  `What it printed is in the progress above.`
                : "No output."}
            </p>
          )}
        </section>
      )}
    </section>
  );
}

/** The page while the task loads, or when it cannot be read. */
function TaskMissing({
  taskId,
  error,
  link,
}: {
  taskId: string;
  error: string | undefined;
  link(to: string): (e: React.MouseEvent) => void;
}) {
  return (
    <section className="tab-panel task-page" aria-label="Task">
      {error ? <ErrorNote error={`Task ${taskId}: ${error}`} /> : <p className="muted">Loading task…</p>}
      <p>
        <a href="/ui/missions" onClick={link("/ui/missions")}>
          Back to missions
        </a>
      </p>
    </section>
  );
}

/** Who runs the task, where, with what, how long, and what it cost. */
function TaskFacts({
  task,
  agent,
  agentId,
  nodeName,
  now,
  final,
  ranMs,
}: {
  task: Task;
  agent: Agent | undefined;
  agentId: string;
  nodeName: Map<string, string>;
  now: number;
  final: boolean;
  ranMs: number | undefined;
}) {
  const usage = task.result?.usage;
  return (
    <dl className="facts">
      <div>
        <dt>Agent</dt>
        <dd title={agentId || undefined}>
          {agent
            ? agent.name || agent.id
            : agentId || (kindOf(task) === "claimable" ? "not claimed yet" : "unassigned")}
        </dd>
      </div>
      <div>
        <dt>Node</dt>
        <dd>{agent ? (nodeName.get(agent.nodeId) ?? agent.nodeId) : "—"}</dd>
      </div>
      <div>
        <dt>Runtime</dt>
        <dd title={runtimeWord(task.runtime) || undefined}>
          {task.runtime
            ? runtimeLabel(runtimeWord(task.runtime))
            : agent
              ? runtimeLabel(runtimeWord(agent.runtime))
              : "any"}
        </dd>
      </div>
      <div>
        <dt>Attempts</dt>
        <dd>{kindOf(task) === "claimable" ? `${task.attempts} of ${task.maxAttempts}` : "—"}</dd>
      </div>
      <div>
        <dt>Created</dt>
        <dd>
          <Ago iso={isoOf(task.createdAt)} now={now} />
        </dd>
      </div>
      <div>
        <dt>{final ? "Ended" : "Updated"}</dt>
        <dd>
          <Ago iso={isoOf(task.updatedAt)} now={now} />
          {final && ranMs !== undefined && <span className="muted task-ran"> · ran {duration(ranMs)}</span>}
        </dd>
      </div>
      {usage && (
        <div className="fact-wide">
          <dt>Usage</dt>
          <dd className="task-usage">
            {Number(usage.inputTokens).toLocaleString("en-US")} tokens in (
            {Number(usage.cachedInputTokens).toLocaleString("en-US")} cached),{" "}
            {Number(usage.outputTokens).toLocaleString("en-US")} out
            {usage.costUsd > 0 && ` · ${usd(usage.costUsd)}`}
            {usage.model && <span className="muted"> · {usage.model}</span>}
          </dd>
        </div>
      )}
      <div className="fact-wide">
        <dt>Id</dt>
        <dd>
          <code>{task.id}</code> <CopyId id={task.id} />
        </dd>
      </div>
    </dl>
  );
}

/** A broadcast task's runs, one per agent. */
function RunsTable({
  runs,
  agentOf,
  now,
  link,
}: {
  runs: Task[];
  agentOf: Map<string, Agent>;
  now: number;
  link(to: string): (e: React.MouseEvent) => void;
}) {
  return (
    <section aria-labelledby="runs-heading">
      <h3 id="runs-heading">Runs ({runs.length})</h3>
      <div className="table-scroll" tabIndex={0} role="region" aria-label="Runs">
        <table className="tasks">
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">State</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((r) => (
              <tr key={r.id} data-task-id={r.id}>
                <td>
                  <a href={`/ui/tasks/${r.id}`} onClick={link(`/ui/tasks/${r.id}`)} title={r.id}>
                    {agentOf.get(r.assigneeAgentId)?.name || r.assigneeAgentId}
                  </a>
                </td>
                <td>
                  <StatusBadge status={statusOf(r)} />
                </td>
                <td>
                  <Ago iso={isoOf(r.updatedAt)} now={now} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

/** A frame, or a run of the runtime's stderr lines in a row (shown folded). */
type TranscriptRow = { frame: Frame } | { id: number; stderr: Frame[] };

const isStderr = (f: Frame) => f.kind === "stderr" || f.data?.stream === "stderr";

function transcriptRows(frames: Frame[]): TranscriptRow[] {
  const rows: TranscriptRow[] = [];
  for (const f of frames) {
    const last = rows.at(-1);
    if (!isStderr(f)) rows.push({ frame: f });
    else if (last && "stderr" in last) last.stderr.push(f);
    else rows.push({ id: f.id, stderr: [f] });
  }
  return rows;
}

/** What a divider says about an attempt: its number, how it ended, how long it ran. */
function attemptLabel(a: Attempt): string {
  const ran = ranMs(a);
  const outcome = a.outcome === "requeued" ? "lease expired, queued again" : (a.outcome ?? "running");
  return `Attempt ${a.n} · ${outcome}${ran !== undefined ? ` · ran ${duration(ran)}` : ""}`;
}

/**
 * The frames as a log: text as written, tool calls and results marked, status lines muted, stderr
 * folded; with more than one attempt, a divider before each attempt's frames.
 */
export function Transcript({ frames, live, attempts = [] }: { frames: Frame[]; live: boolean; attempts?: Attempt[] }) {
  const end = useRef<HTMLDivElement>(null);
  const box = useRef<HTMLOListElement>(null);
  // follow the tail while the reader is at the bottom (like a CI log), not when they scrolled up
  // biome-ignore lint/correctness/useExhaustiveDependencies: the trigger: a frame arrived
  useEffect(() => {
    const el = box.current;
    if (!el || !live) return;
    if (el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [frames.length, live]);
  if (!frames.length && attempts.length < 2)
    return (
      <p className="muted small">{live ? "Waiting for the agent's first output…" : "No progress was reported."}</p>
    );
  const divided = attempts.length > 1;
  const groups: { attempt?: Attempt; frames: Frame[] }[] = divided
    ? [{ frames: [] }, ...attempts.map((a) => ({ attempt: a, frames: [] as Frame[] }))]
    : [{ frames }];
  if (divided) for (const f of frames) groups[attemptOfFrame(attempts, f.id)?.n ?? 0].frames.push(f);
  return (
    <>
      <ol className="frames" ref={box} aria-live={live ? "polite" : undefined} aria-label="Progress frames">
        {groups.flatMap((g) => [
          ...(g.attempt
            ? [
                <li
                  key={`attempt-${g.attempt.n}`}
                  className={`attempt-divider attempt-${g.attempt.outcome ?? "running"}`}
                  // biome-ignore lint/a11y/noNoninteractiveElementToInteractiveRole: a separator, not focusable
                  role="separator"
                  aria-label={attemptLabel(g.attempt)}
                >
                  {attemptLabel(g.attempt)}
                  {g.frames.length === 0 && <span className="muted"> · no progress</span>}
                </li>,
              ]
            : []),
          ...transcriptRows(g.frames).map((r) => <TranscriptLine key={"stderr" in r ? r.id : r.frame.id} row={r} />),
        ])}
      </ol>
      <div ref={end} />
    </>
  );
}

function TranscriptLine({ row: r }: { row: TranscriptRow }) {
  if ("stderr" in r)
    return (
      <li className="frame frame-stderr" data-frame-id={r.id}>
        <details className="stderr-lines">
          <summary>{`${r.stderr.length} stderr line${r.stderr.length === 1 ? "" : "s"}`}</summary>
          <pre>{r.stderr.map((f) => f.text).join("\n")}</pre>
        </details>
      </li>
    );
  const f = r.frame;
  return (
    <li className={`frame frame-${f.kind}${f.data?.denial ? " frame-denial" : ""}`} data-frame-id={f.id}>
      {f.kind === "tool" && (
        <span className="frame-tag">
          {f.data?.phase === "result" || f.data?.phase === "update" ? "result" : "tool"}
        </span>
      )}
      {f.kind === "status" && <span className="frame-tag">{f.data?.denial ? "refused" : "status"}</span>}
      {f.kind === "json" ? (
        <details>
          <summary>{f.text}</summary>
          <pre>{JSON.stringify(f.data ?? {}, null, 2)}</pre>
        </details>
      ) : (
        <span className="frame-body">{f.text}</span>
      )}
    </li>
  );
}
