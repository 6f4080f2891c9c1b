// One readable line per event for people (ep events tail on a terminal, and the TUI): time,
// type, name, then what happened in words, with names from the payload where the event has
// them and agents by name. Raw JSON stays available with --json.
const MAX = 200;

const short = (id: unknown): string =>
  typeof id === "string" && id.length > 14 ? `${id.slice(0, 12)}…` : String(id ?? "");
const quote = (s: unknown): string => `"${String(s).replace(/\s+/g, " ").slice(0, 60)}"`;

/** The agent an event is about (who claimed or ran the task, or the agent itself), if any. */
export function agentOf(e: Record<string, unknown>): string | undefined {
  const p = (e.payload ?? {}) as Record<string, unknown>;
  const agent = p.claimed_by || p.agent_id || e.agent_id;
  return typeof agent === "string" && agent ? agent : undefined;
}

/**
 * What an event is about, in words (names from its payload, never raw JSON). `nameOf` gives an
 * agent's name for its id; an agent without a known name shows by its id, shortened.
 */
export function what(e: Record<string, unknown>, nameOf: (id: string) => string | undefined = () => undefined): string {
  const p = (e.payload ?? {}) as Record<string, unknown>;
  const bits: string[] = [];
  const named = p.title ?? p.name ?? p.hostname;
  if (named !== undefined && named !== "") bits.push(quote(named));
  const task = p.task_id ?? e.task_id;
  if (task) bits.push(`task ${short(task)}`);
  const agent = agentOf(e);
  const who = agent && (nameOf(agent) ?? short(agent));
  const isAgentEvent = String(e.name).startsWith("agent.");
  if (who && !isAgentEvent) bits.push(`by ${who}`);
  // an agent event that carries the agent's name in its payload says it once
  else if (who && !(named !== undefined && named !== "" && named === nameOf(agent!))) bits.push(`agent ${who}`);
  if (p.from !== undefined && p.to !== undefined && typeof p.to === "string") bits.push(`${p.from} → ${p.to}`);
  else if (e.status) bits.push(`→ ${e.status}`);
  if (p.reason) bits.push(`(${String(p.reason).slice(0, 60)})`);
  if (p.error) bits.push(`: ${String(p.error).replace(/\s+/g, " ").slice(0, 80)}`);
  if (e.type === "progress") {
    const text =
      p.text ?? (Array.isArray(p.frames) ? (p.frames as { text?: string }[]).map((f) => f.text ?? "").join(" ") : "");
    if (text) bits.push(`${p.kind ? `[${p.kind}] ` : ""}${String(text).replace(/\s+/g, " ").slice(0, 80)}`);
  }
  if (e.type === "inbox" && p.prompt) bits.push(quote(p.prompt));
  const rl = e.rate_limit as { remaining?: number; reset_at?: string } | undefined;
  if (rl) bits.push(`(rate limited: ${rl.remaining} left until ${rl.reset_at})`);
  return bits.join(" ");
}

export function eventLine(
  id: string | number | undefined,
  e: Record<string, unknown>,
  nameOf?: (id: string) => string | undefined,
): string {
  const at = String(e.created_at ?? e.createdAt ?? "");
  const time = /T(\d\d:\d\d:\d\d)/.exec(at)?.[1] ?? "--:--:--";
  const line = (
    `${String(id ?? "-").padStart(5)}  ${time}  ${String(e.type ?? "?").padEnd(8)} ` +
    `${String(e.name ?? "").padEnd(22)} ${what(e, nameOf)}`
  ).trimEnd();
  return line.length > MAX ? `${line.slice(0, MAX - 1)}…` : line;
}
