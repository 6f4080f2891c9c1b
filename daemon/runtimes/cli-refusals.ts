// Where each vendor CLI's JSON stream says a tool call was refused. One detector per CLI, fed
// every event of its run (it remembers the calls it saw, to name what a refusal tried); a
// refusal watch turns what they find into the run's denial list and a status frame per new one.
import { createDenialList, denialFrame, refusalIn, refusalLine, triedOf, type Denial } from "./denials.js";
import type { StreamParser } from "./process-runtime.js";
import { threadRefusals } from "./codex-rollout.js";

type Event = Record<string, unknown>;
/** Reads one event; returns the refusals it reports (possibly ones seen before: the list drops repeats). */
export type RefusalDetector = (event: Event) => Denial[];

const rec = (v: unknown): Event | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Event) : undefined;
const str = (v: unknown): string => (typeof v === "string" ? v : "");
const textOf = (v: unknown): string =>
  typeof v === "string"
    ? v
    : Array.isArray(v)
      ? v.map((x) => str(rec(x)?.text) || str(x)).join("\n")
      : v == null
        ? ""
        : JSON.stringify(v);

export interface RefusalWatch {
  /** The denials `event` reports that are new, as status frames (`data.denial`). */
  see(event: Event): { kind: "status"; text: string; data: { denial: Denial } }[];
  list(): Denial[];
}

export function createRefusalWatch(detect: RefusalDetector): RefusalWatch {
  const denials = createDenialList();
  return {
    see(event) {
      const found = detect(event);
      return found
        .map((d) => denials.add(d))
        .filter((d): d is Denial => !!d)
        .map(denialFrame);
    },
    list: () => denials.list(),
  };
}

/**
 * A vendor's parser with its refusal detector beside it: the parser's frames, then a status frame
 * per new refusal; the outcome carries the denials. The parsers stay about frames and answers.
 */
export function refusing(
  parser: (env: Record<string, string>) => StreamParser,
  detector: (env: Record<string, string>) => RefusalDetector,
): (env?: Record<string, string>) => StreamParser {
  return (env = {}) => {
    const inner = parser(env);
    const watch = createRefusalWatch(detector(env));
    return {
      // the CLI's stderr lines (retries) go to the parser as they are
      ...(inner.stderr ? { stderr: (line: string) => inner.stderr!(line) } : {}),
      event(event) {
        const frames = inner.event(event);
        const refused = watch.see(event);
        return refused.length ? [...frames, ...refused] : frames;
      },
      outcome() {
        const o = inner.outcome();
        const denials = watch.list();
        return denials.length ? { ...o, denials } : o;
      },
    };
  };
}

/**
 * claude -p: `system` events of subtype `permission_denied` (tool_name, tool_use_id, message)
 * as they happen, a `tool_result` with is_error whose text is a refusal, and the closing
 * `result`'s `permission_denials` ({tool_name, tool_use_id, tool_input}), which repeats them.
 */
export function claudeRefusals(): RefusalDetector {
  const calls = new Map<string, { name: string; input: unknown }>();
  const call = (id: string, tool: string, reason: string, source: Denial["source"], input?: unknown): Denial => {
    const known = calls.get(id);
    return {
      tool: tool || known?.name || "tool",
      tried: triedOf(input ?? known?.input),
      reason,
      source,
      ...(id ? { callId: id } : {}),
    };
  };
  return (event) => {
    const content = rec(event.message)?.content;
    const blocks = Array.isArray(content) ? content.map(rec).filter((b): b is Event => !!b) : [];
    switch (event.type) {
      case "assistant":
        for (const b of blocks)
          if (b.type === "tool_use" && typeof b.id === "string") calls.set(b.id, { name: str(b.name), input: b.input });
        return [];
      case "system": {
        if (event.subtype !== "permission_denied") return [];
        const why = str(event.message) || "permission denied";
        return [call(str(event.tool_use_id), str(event.tool_name), why, refusalIn(why) ?? "policy")];
      }
      case "user": {
        const out: Denial[] = [];
        for (const b of blocks) {
          if (b.type !== "tool_result" || b.is_error !== true) continue;
          const text = textOf(b.content);
          const source = refusalIn(text);
          if (source) out.push(call(str(b.tool_use_id), "", refusalLine(text), source));
        }
        return out;
      }
      case "result": {
        const listed = Array.isArray(event.permission_denials)
          ? event.permission_denials.map(rec).filter((d): d is Event => !!d)
          : [];
        return listed.map((d) => call(str(d.tool_use_id), str(d.tool_name), "", "policy", d.tool_input));
      }
      default:
        return [];
    }
  };
}

/**
 * codex exec --json: a `command_execution` item completed with a non-zero exit whose output reads
 * as a refusal (its sandbox, or the confinement: "Read-only file system") or declined, an
 * `mcp_tool_call` or `file_change` failed the same way; and, when the turn ends, the refused calls
 * of codex's own rollout of the thread (codex-rollout.ts: its `exec_command` calls print no item),
 * less those the items already said.
 */
export function codexRefusals(env: Record<string, string | undefined> = {}): RefusalDetector {
  let threadId = "";
  const said = new Set<string>();
  const items = itemRefusals();
  return (event) => {
    if (event.type === "thread.started") threadId = str(event.thread_id);
    if (event.type === "turn.completed" || event.type === "turn.failed")
      return threadRefusals(env, threadId).filter((d) => !said.has(d.reason));
    const found = items(event);
    for (const d of found) said.add(d.reason);
    return found;
  };
}

function itemRefusals(): RefusalDetector {
  return (event) => {
    if (event.type !== "item.completed") return [];
    const item = rec(event.item);
    if (!item) return [];
    const id = str(item.id);
    const found = (tool: string, tried: string, text: string): Denial[] => {
      const source = refusalIn(text);
      return source ? [{ tool, tried, reason: refusalLine(text), source, ...(id ? { callId: id } : {}) }] : [];
    };
    switch (item.type) {
      case "command_execution": {
        const failed =
          (typeof item.exit_code === "number" && item.exit_code !== 0) ||
          item.status === "failed" ||
          item.status === "declined";
        if (item.status === "declined")
          return [
            {
              tool: "command",
              tried: str(item.command),
              reason: "declined",
              source: "policy",
              ...(id ? { callId: id } : {}),
            },
          ];
        return failed ? found("command", str(item.command), str(item.aggregated_output)) : [];
      }
      case "mcp_tool_call":
        return item.status === "failed"
          ? found(
              `${str(item.server) || "mcp"}.${str(item.tool) || "tool"}`,
              triedOf(item.arguments),
              textOf(rec(item.error)?.message ?? item.result),
            )
          : [];
      case "file_change":
        return item.status === "failed"
          ? found(
              "apply_patch",
              (Array.isArray(item.changes) ? item.changes : []).map((c) => str(rec(c)?.path)).join(" "),
              textOf(item.error ?? ""),
            )
          : [];
      default:
        return [];
    }
  };
}

/**
 * gemini -o stream-json: a `tool_result` with status error whose error type is a refusal (see
 * GEMINI_REFUSALS), or whose output reads as one; or any tool_result whose output says the
 * sandbox stopped it (a shell command under EP's read-only confinement reports success).
 */
export function geminiRefusals(): RefusalDetector {
  const calls = new Map<string, { name: string; input: unknown }>();
  return (event) => {
    if (event.type === "tool_use") {
      calls.set(str(event.tool_id), { name: str(event.tool_name), input: event.parameters });
      return [];
    }
    if (event.type !== "tool_result") return [];
    const id = str(event.tool_id);
    const error = rec(event.error);
    const text = str(error?.message) || str(event.output);
    // a shell command "succeeds" with its output saying the confinement stopped it
    const source =
      event.status === "error"
        ? (GEMINI_REFUSALS[str(error?.type)] ?? refusalIn(text))
        : refusalIn(text) === "sandbox"
          ? "sandbox"
          : undefined;
    if (!source) return [];
    const known = calls.get(id);
    return [
      {
        tool: known?.name || id.split("__")[0] || "tool",
        tried: triedOf(known?.input),
        reason: refusalLine(text),
        source,
        ...(id ? { callId: id } : {}),
      },
    ];
  };
}

/** gemini-cli 0.61's ToolErrorType values that mean "refused", not "ran and failed". */
const GEMINI_REFUSALS: Record<string, Denial["source"]> = {
  tool_not_registered: "unknown_tool",
  policy_violation: "policy",
  path_not_in_workspace: "policy",
  permission_denied: "sandbox",
  sandbox_expansion_required: "sandbox",
};
