// The TUI's screens: lists with a selection, the task view (header, live transcript, output) and
// the AI console's transcript. Stateless: app.tsx owns the data and the keys.
import { Box, Text } from "ink";
import { collapseStderr, frameLine, stderrSummary } from "../frames.js";
import { statusWithDenials } from "../denials.js";
import type { EventItem, FrameItem, TaskDetail } from "./data-source.js";
import { cellText, fit, tableLines } from "./view-spec-text.js";

/** A table whose rows can be selected; `rows` are cells, the selected one is drawn inverse. */
export function List({
  columns,
  rows,
  selected,
  empty,
  width,
}: {
  columns: string[];
  rows: string[][];
  selected: number;
  empty: string;
  width: number;
}) {
  if (rows.length === 0) return <Text dimColor>{empty}</Text>;
  // only the rows around the selection fit on a terminal; keep the selection in view
  const visible = 20;
  const start = Math.max(0, Math.min(selected - Math.floor(visible / 2), rows.length - visible));
  const lines = tableLines(columns, rows, width);
  return (
    <>
      <Text bold>{lines[0]}</Text>
      {lines.slice(1 + start, 1 + start + visible).map((l, i) => (
        <Text key={start + i} inverse={start + i === selected}>
          {l}
        </Text>
      ))}
      {rows.length > visible && <Text dimColor>{`${selected + 1} of ${rows.length}`}</Text>}
    </>
  );
}

/** One event as one readable line: time, what happened, its state, and what it concerns. */
export function eventLine(e: EventItem, width: number): string {
  const at = e.at ? new Date(e.at).toLocaleTimeString([], { hour12: false }) : String(e.id);
  return fit(
    `${at.padEnd(8)}  ${e.name.padEnd(18)} ${(e.status || "").padEnd(10)} ` +
      `${cellText(e.detail === "" ? undefined : e.detail)}`,
    width,
  );
}

const TONE: Record<string, string> = {
  succeeded: "green",
  done: "green",
  failed: "red",
  cancelled: "yellow",
  running: "cyan",
  claimed: "cyan",
};

/** A task: header facts, the transcript so far (newest at the bottom), then output or error. */
export function TaskScreen({
  task,
  frames,
  width,
  error,
}: {
  task?: TaskDetail;
  frames: FrameItem[];
  width: number;
  error?: string;
}) {
  if (!task) return <Text dimColor>{error ? `error: ${error}` : "loading the task…"}</Text>;
  const facts = [
    task.agent ? `agent ${task.agent}` : "not claimed yet",
    task.runtime || "",
    `attempt ${task.attempts} of ${task.maxAttempts}`,
    task.usage,
  ]
    .filter(Boolean)
    .join(" · ");
  const rows = collapseStderr(frames);
  const shown = rows.slice(-30);
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>{fit(task.title, width - 14)}</Text>{" "}
        <Text color={task.denials ? "yellow" : TONE[task.status]}>
          [{statusWithDenials(task.status, task.denials?.length ?? 0)}]
        </Text>
      </Text>
      <Text dimColor>{fit(`${task.id} · ${facts}`, width)}</Text>
      {task.wait && <Text color="yellow">{`waiting: ${task.wait}`}</Text>}
      <Box flexDirection="column" marginTop={1}>
        {frames.length === 0 ? (
          <Text dimColor>
            {task.status === "running" || task.status === "claimed"
              ? "waiting for the agent's first output…"
              : "no progress was reported"}
          </Text>
        ) : (
          <>
            {rows.length > shown.length && (
              <Text
                dimColor
              >{`… ${rows.length - shown.length} earlier frames (ep task watch ${task.id} shows all)`}</Text>
            )}
            {shown.map((r) =>
              "stderr" in r ? (
                <Text key={r.id} dimColor>
                  {fit(stderrSummary(r.stderr, false, `ep task watch ${task.id} --stderr shows them`), width)}
                </Text>
              ) : (
                <Text
                  key={r.frame.id}
                  dimColor={r.frame.kind === "status" && !r.frame.data?.denial}
                  color={r.frame.kind === "tool" ? "cyan" : r.frame.data?.denial ? "yellow" : undefined}
                >
                  {fit(frameLine(r.frame, false), width)}
                </Text>
              ),
            )}
          </>
        )}
      </Box>
      {task.output !== "" && (
        <Box flexDirection="column" marginTop={1}>
          <Text bold>output</Text>
          {task.output
            .replace(/\n+$/, "")
            .split("\n")
            .slice(-15)
            .map((l, i) => (
              <Text key={i}>{fit(l, width)}</Text>
            ))}
        </Box>
      )}
      {task.workspace && (
        <Box flexDirection="column" marginTop={1}>
          <Text bold>changes</Text>
          <Text dimColor>{fit(task.workspace.branch, width)}</Text>
          {task.workspace.stat
            .split("\n")
            .slice(-12)
            .map((l, i) => (
              <Text key={i}>{fit(l, width)}</Text>
            ))}
        </Box>
      )}
      {task.denials && (
        <Box flexDirection="column" marginTop={1}>
          <Text bold color="yellow">
            refused
          </Text>
          {task.denials.slice(0, 12).map((l, i) => (
            <Text key={i}>{fit(l, width)}</Text>
          ))}
        </Box>
      )}
      {task.error !== "" && <Text color="red">{fit(`error: ${task.error}`, width)}</Text>}
      {error && <Text color="red">{fit(error, width)}</Text>}
    </Box>
  );
}

export interface ChatBlock {
  who: "you" | "ai" | "info" | "error";
  lines: string[];
}

export function ChatScreen({
  blocks,
  draft,
  busy,
  width,
}: {
  blocks: ChatBlock[];
  draft: string;
  busy: boolean;
  width: number;
}) {
  // the newest lines that fit, whole blocks where possible
  const lines: { text: string; who: ChatBlock["who"]; key: string }[] = [];
  blocks.forEach((b, bi) =>
    b.lines.forEach((l, li) =>
      lines.push({ text: `${b.who === "you" && li === 0 ? "> " : "  "}${l}`, who: b.who, key: `${bi}.${li}` }),
    ),
  );
  return (
    <>
      {blocks.length === 0 && (
        <Text dimColor>
          Ask the tower: “list missions”, “submit task "Run tests" to mission Release with command "npm test"”.
        </Text>
      )}
      {lines.slice(-30).map((l) => (
        <Text
          key={l.key}
          color={l.who === "error" ? "red" : l.who === "info" ? "yellow" : undefined}
          bold={l.who === "you"}
        >
          {fit(l.text, width)}
        </Text>
      ))}
      <Text>{`> ${draft}${busy ? "  (thinking…)" : "▏"}`}</Text>
    </>
  );
}
