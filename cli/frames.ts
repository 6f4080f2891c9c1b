// A task's progress frames as terminal lines: shared by `ep task watch` and the TUI's task view
// (kept apart from both so the TUI's first frame does not load the tower client).

export interface WatchFrame {
  id: number;
  kind: string;
  text: string;
  data?: Record<string, unknown>;
}

/** One frame as a terminal line: text as written, tool calls and status lines marked, stderr dimmed. */
export function frameLine(f: WatchFrame, color: boolean): string {
  const dim = (s: string) => (color ? `\x1b[2m${s}\x1b[0m` : s);
  const cyan = (s: string) => (color ? `\x1b[36m${s}\x1b[0m` : s);
  const text = f.text.replace(/\n+$/, "");
  if (f.kind === "tool")
    return `${cyan(f.data?.phase === "result" || f.data?.phase === "update" ? "  ↳" : "  ⚙")} ${text}`;
  // a refused tool call (docs/runtimes.md)
  if (f.kind === "status" && f.data?.denial) return color ? `\x1b[33m  ⚠ ${text}\x1b[0m` : `  ⚠ ${text}`;
  if (f.kind === "status") return dim(`  · ${text}`);
  if (f.kind === "json") return dim(`  {} ${text}`);
  return isStderr(f) ? dim(text) : text;
}

/** A line the runtime's process wrote to stderr (kind `stderr`; before it, a text frame marked `data.stream`). */
export function isStderr(f: Pick<WatchFrame, "kind" | "data">): boolean {
  return f.kind === "stderr" || f.data?.stream === "stderr";
}

/** What stands for `n` stderr lines held back: "  ⋯ 3 stderr lines (--stderr to show)". */
export function stderrSummary(n: number, color: boolean, hint = "--stderr to show"): string {
  const text = `  ⋯ ${n} stderr line${n === 1 ? "" : "s"} (${hint})`;
  return color ? `\x1b[2m${text}\x1b[0m` : text;
}

/** Frames with each run of stderr lines in a row folded into a count (the TUI's task view). */
export function collapseStderr<T extends WatchFrame>(
  frames: readonly T[],
): ({ frame: T } | { id: number; stderr: number })[] {
  const rows: ({ frame: T } | { id: number; stderr: number })[] = [];
  for (const f of frames) {
    const last = rows.at(-1);
    if (!isStderr(f)) rows.push({ frame: f });
    else if (last && "stderr" in last) last.stderr += 1;
    else rows.push({ id: f.id, stderr: 1 });
  }
  return rows;
}
