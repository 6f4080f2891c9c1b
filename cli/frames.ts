// A task's progress frames as terminal lines: shared by `ep task watch` and the TUI's task view
// (kept apart from both so the TUI's first frame does not load the tower client).

export interface WatchFrame {
  id: number;
  kind: string;
  text: string;
  data?: Record<string, unknown>;
}

/** One frame as a terminal line: text as written, tool calls and status lines marked. */
export function frameLine(f: WatchFrame, color: boolean): string {
  const dim = (s: string) => (color ? `\x1b[2m${s}\x1b[0m` : s);
  const cyan = (s: string) => (color ? `\x1b[36m${s}\x1b[0m` : s);
  const text = f.text.replace(/\n+$/, "");
  if (f.kind === "tool") return `${cyan(f.data?.phase === "result" || f.data?.phase === "update" ? "  ↳" : "  ⚙")} ${text}`;
  if (f.kind === "status" && f.data?.denial) return color ? `\x1b[33m  ⚠ ${text}\x1b[0m` : `  ⚠ ${text}`; // a refused tool call (docs/runtimes.md)
  if (f.kind === "status") return dim(`  · ${text}`);
  if (f.kind === "json") return dim(`  {} ${text}`);
  return f.data?.stream === "stderr" ? dim(text) : text;
}

