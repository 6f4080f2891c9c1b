// What an agent could not do: the tool calls its CLI, its sandbox, its confinement or a person
// refused. Each runtime's parser finds them in its CLI's own events; this module holds what they
// share: the record, the words that mark a refusal in a tool's output, and the list (deduplicated
// by call, capped) that becomes the result's `denials`. It imports nothing of the runtimes (runtime.ts
// imports it).

/** Where a refusal came from (proto DenialSource, as its lowercase word). */
export type DenialSource = "policy" | "sandbox" | "unknown_tool" | "person";

export interface Denial {
  /** the tool as the agent named it */
  tool: string;
  /** what it tried: the command, path or URL, else its input as JSON */
  tried: string;
  /** why, in the refusing side's words */
  reason: string;
  source: DenialSource;
  /** the agent's id for the call, when it has one */
  callId?: string;
}

export { DENIAL_FIELD_LIMIT, DENIAL_LIMIT } from "../../common/denials.js";
import { DENIAL_FIELD_LIMIT, DENIAL_LIMIT } from "../../common/denials.js";

/**
 * Words in a failed tool call's output that say the call was refused rather than that it ran and
 * failed, with where the refusal came from. The first match wins. Data, not code: a CLI that words
 * a refusal differently gets a row here.
 */
const REFUSAL_MARKERS: readonly { pattern: RegExp; source: DenialSource }[] = [
  // epd's permission tool answering for a person (permission = "ask", daemon/mcp/permission-tool.ts)
  { pattern: /a person did not allow this|could not ask a person/i, source: "person" },
  // the kernel, under codex's sandbox or EP's bubblewrap confinement
  { pattern: /read-only file system/i, source: "sandbox" },
  { pattern: /operation not permitted/i, source: "sandbox" },
  { pattern: /permission denied/i, source: "sandbox" },
  // codex's own words when its sandbox stops a command
  { pattern: /sandbox (?:denied|error|violation)|blocked by (?:the )?sandbox|rejected by sandbox/i, source: "sandbox" },
  // the CLI's own permission rules (claude: "… needs approval", "… requires approval"; "not allowed")
  { pattern: /needs approval|requires approval|requires permission/i, source: "policy" },
  { pattern: /haven't granted|not been granted|is not allowed|not permitted by/i, source: "policy" },
  { pattern: /denied by (?:the )?(?:policy|permission)|execution (?:denied|blocked)/i, source: "policy" },
  // the agent called a tool its CLI does not have
  {
    pattern: /tool "[^"]*" not found|no such tool|unknown tool|tool not (?:found|registered)/i,
    source: "unknown_tool",
  },
];

/** Where a failed tool call's output says it was refused, or undefined when it reads as an ordinary failure. */
export function refusalIn(text: string): DenialSource | undefined {
  return REFUSAL_MARKERS.find((m) => m.pattern.test(text))?.source;
}

/** The line of `text` that names the refusal (the reason a person reads), else its start. */
export function refusalLine(text: string): string {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  return lines.find((l) => refusalIn(l) !== undefined) ?? lines[0] ?? "";
}

const TRIED_KEYS = ["command", "cmd", "file_path", "filePath", "path", "notebook_path", "url", "pattern"];

/** What a tool call tried, from its input: the command, path or URL when it names one, else the input as JSON. */
export function triedOf(input: unknown): string {
  if (typeof input === "string") return input;
  if (!input || typeof input !== "object") return "";
  const r = input as Record<string, unknown>;
  for (const key of TRIED_KEYS) {
    const v = r[key];
    if (typeof v === "string" && v) return v;
    if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v.join(" ");
  }
  return Object.keys(r).length ? JSON.stringify(r) : "";
}

const clipField = (s: string) => (s.length > DENIAL_FIELD_LIMIT ? `${s.slice(0, DENIAL_FIELD_LIMIT)}…` : s);

/** A status frame for a denial as it happens (`data.denial`), for `ep task watch` and the console. */
export function denialFrame(d: Denial): { kind: "status"; text: string; data: { denial: Denial } } {
  const tried = d.tried ? ` ${d.tried.length > 120 ? `${d.tried.slice(0, 120)}…` : d.tried}` : "";
  return { kind: "status", text: `refused (${d.source}): ${d.tool}${tried}: ${d.reason}`, data: { denial: { ...d } } };
}

export interface DenialList {
  /**
   * Records a denial, clipped; returns it, or undefined when it is not new (the same call seen
   * again, e.g. in claude's closing `permission_denials`) or the list is full. A later sighting of
   * the same call fills in what the first lacked (a reason, a command).
   */
  add(d: Denial): Denial | undefined;
  list(): Denial[];
}

export function createDenialList(): DenialList {
  const items: Denial[] = [];
  return {
    add(raw) {
      const d: Denial = {
        tool: clipField(raw.tool || "tool"),
        tried: clipField(raw.tried),
        reason: clipField(raw.reason),
        source: raw.source,
      };
      if (raw.callId) d.callId = clipField(raw.callId);
      const seen = d.callId ? items.find((x) => x.callId === d.callId) : undefined;
      if (seen) {
        if (!seen.reason) seen.reason = d.reason;
        if (!seen.tried) seen.tried = d.tried;
        return undefined;
      }
      if (items.length >= DENIAL_LIMIT) return undefined;
      items.push(d);
      return d;
    },
    list: () => items.map((d) => ({ ...d })),
  };
}
