// How the heuristic planner reads a message: quoted spans taken verbatim, names and ids masked
// so intent patterns never look inside them, and references resolved to domains, missions,
// tasks and agents through the caller's lookups (names as written first, then trimmed).
import type { AgentRef, DomainRef, MissionRef, PlannerContext, TaskRef } from "./planner.js";

export const Q_OPEN = "\uE000";
export const Q_CLOSE = "\uE001";
export const QUOTE = `${Q_OPEN}\\d+${Q_CLOSE}`;
const STOP_WORDS =
  "in|into|to|for|from|on|with|using|under|within|at|and|please|now|saying|priority|runtime|that|which|as|" +
  "assigned|assign|needing|requiring|requires|by|via|of|command|prompt|description|capabilities|capability";
const BOUNDARY = `(?=\\s+(?:${STOP_WORDS})\\b|\\s*[,;:!?]|\\s*\\.(?:\\s|$)|\\s*$)`;
/** A reference: a quoted span, or a few words up to the next stop word or punctuation. */
export const NAME = `(${QUOTE}|[^\\s,;:!?]+?(?:\\s+[^\\s,;:!?]+?)*?)${BOUNDARY}`;

export type Kind = "domain" | "mission" | "task" | "agent";
export const ID_PREFIX: Record<Kind, string> = { domain: "dom", mission: "msn", task: "tsk", agent: "agt" };
export const NOUN: Record<Kind, string> = { domain: "domain", mission: "mission", task: "task", agent: "agent" };

/**
 * A word joined to others by `-`, `_`, `.` or `/` (`ai-approve`, `builder-1`, `tsk_…`, `plan.md`):
 * a name or an id, never a command word, so intent detection does not look inside it.
 */
const COMPOUND = /[\p{L}\p{N}]+(?:[-_./][\p{L}\p{N}]+)+/gu;
/** The compounds that are the planner's own vocabulary rather than names. */
const VOCABULARY =
  /^(?:re-(?:run|try|queue|enable)|un-pause|auto-restarts?|high-priority|low-priority|in[-_]progress)$/i;
/** Stands in for a masked compound in `lower`: not a word character, so `\b` and `\S` see a token. */
const NAME_MARK = "\uE002";

/** One message, with quoted spans masked so patterns never look inside them. */
export class Message {
  readonly raw: string;
  readonly masked: string;
  /**
   * What intents detect verbs and nouns in: `masked`, lower-cased, with names and ids
   * (compounds) also masked, so `create mission "X" in domain ai-approve` holds no "approve".
   */
  readonly lower: string;
  readonly quotes: string[] = [];

  constructor(content: string) {
    this.raw = content.trim().slice(0, 4000);
    const quotes = this.quotes;
    this.masked = this.raw.replace(
      /"([^"]*)"|“([^”]*)”|‘([^’]*)’|(?<=^|[\s(:=[,])'([^']*)'(?=$|[\s).,;:!?\]])|`([^`]*)`/g,
      (_m, a?: string, b?: string, c?: string, d?: string, e?: string) => {
        quotes.push((a ?? b ?? c ?? d ?? e ?? "").trim());
        return `${Q_OPEN}${quotes.length - 1}${Q_CLOSE}`;
      },
    );
    this.lower = this.masked.replace(COMPOUND, (word) => (VOCABULARY.test(word) ? word : NAME_MARK)).toLowerCase();
  }

  /** Puts quoted spans back and trims articles and filler (`keepFiller`: only the spans). */
  unmask(s: string, keepFiller = false): string {
    const quoted = new RegExp(`^${QUOTE}$`).test(s.trim());
    const out = s
      .replace(new RegExp(`${Q_OPEN}(\\d+)${Q_CLOSE}`, "g"), (_m, i: string) => this.quotes[Number(i)] ?? "")
      .trim();
    if (quoted || keepFiller) return out;
    return out
      .replace(/^(?:the|a|an|my|our|this|that)\s+/i, "")
      .replace(/\s+(?:details?|status|info|please|now|agent|mission|task|domain)$/i, "")
      .replace(/['’]s$/i, "")
      .trim();
  }

  has(re: RegExp): boolean {
    return re.test(this.lower);
  }

  /** First capture of a pattern over the masked text (case-insensitive), unmasked. */
  capture(pattern: string, keepFiller = false): string | undefined {
    const m = new RegExp(pattern, "i").exec(this.masked);
    if (!m || m[1] === undefined) return undefined;
    const v = this.unmask(m[1], keepFiller);
    return v === "" ? undefined : v;
  }

  idOf(prefix: string): string | undefined {
    return new RegExp(`\\b${prefix}_[0-9a-z]{4,}\\b`, "i").exec(this.masked)?.[0].toLowerCase();
  }

  /** Index of the first quoted span not introduced by one of the given words. */
  freeQuote(excluded: string[]): string | undefined {
    const re = new RegExp(`(\\S+\\s*)?${Q_OPEN}(\\d+)${Q_CLOSE}`, "g");
    for (const m of this.masked.matchAll(re)) {
      const before = (m[1] ?? "").trim().replace(/[:=]$/, "").toLowerCase();
      if (!excluded.includes(before)) return this.quotes[Number(m[2])];
    }
    return undefined;
  }
}

export interface Resolved<T> {
  ref?: T;
  /** The name the message used, when it did not resolve. */
  missing?: string;
}

export async function resolveRef<T extends { id: string }>(
  msg: Message,
  kind: Kind,
  find: (nameOrId: string) => T | undefined | Promise<T | undefined>,
  extraPatterns: string[] = [],
): Promise<Resolved<T>> {
  const id = msg.idOf(ID_PREFIX[kind]);
  if (id) return { ref: ((await find(id)) ?? { id }) as T };
  const patterns = [
    `\\b${NOUN[kind]}s?\\s+(?:called\\s+|named\\s+|titled\\s+)?${NAME}`,
    `\\bthe\\s+(${QUOTE}|[\\w.-]+)\\s+${NOUN[kind]}\\b`,
    ...extraPatterns,
  ];
  let missing: string | undefined;
  for (const p of patterns) {
    const name = msg.capture(p);
    if (!name || /^(?:s|es|list|ls)$/i.test(name)) continue;
    // "agent reviewer doing" -> try "agent reviewer doing", then "reviewer"... shorter unquoted prefixes;
    // the words as written first ("mission first mission" names "first mission", filler and all)
    const prefixes = (n: string) => {
      const words = n.split(/\s+/);
      return words.map((_, i) => words.slice(0, words.length - i).join(" "));
    };
    const asWritten = msg.capture(p, true) ?? name;
    const candidates = msg.quotes.includes(name) ? [name] : [...new Set([...prefixes(asWritten), ...prefixes(name)])];
    for (const candidate of candidates) {
      const ref = await find(candidate);
      if (ref) return { ref };
    }
    missing ??= name;
  }
  return { missing };
}

export const domainOf = (msg: Message, ctx: PlannerContext, extra: string[] = []): Promise<Resolved<DomainRef>> =>
  resolveRef(msg, "domain", (v) => ctx.findDomain(v), extra);
export const missionOf = (msg: Message, ctx: PlannerContext, extra: string[] = []): Promise<Resolved<MissionRef>> =>
  resolveRef(msg, "mission", (v) => ctx.findMission(v), extra);
export const agentOf = (msg: Message, ctx: PlannerContext, extra: string[] = []): Promise<Resolved<AgentRef>> =>
  resolveRef(msg, "agent", (v) => ctx.findAgent(v), extra);
export const taskOf = (
  msg: Message,
  ctx: PlannerContext,
  missionId?: string,
  extra: string[] = [],
): Promise<Resolved<TaskRef>> => resolveRef(msg, "task", (v) => ctx.findTask(v, missionId), extra);
