// What a stream subscriber asks for: the query parameters and Last-Event-ID of /events/stream
// (parsed with the field at fault named), and whether an event matches the filter.
import { EpError, invalidField } from "../../../common/errors.js";
import type { EventQuery, EventRow } from "../../store/store.js";

export const EVENT_TYPES = ["approval", "inbox", "matrix", "progress"] as const;

export interface StreamFilterInput {
  types?: readonly string[];
  domainId?: string;
  missionId?: string;
  agentId?: string;
  sessionId?: string;
  taskId?: string;
}

export interface StreamRequest {
  /** resume after this id; undefined starts at the newest event (live only) */
  afterId?: number;
  filter: StreamFilterInput;
}

const ID_RE = /^\d{1,16}$/;

/** Parses an event id sent by a client (Last-Event-ID header or last_event_id parameter). */
export function parseEventId(raw: string, field: string): number {
  const s = raw.trim();
  if (!ID_RE.test(s))
    throw invalidField(field, `must be a non-negative integer event id (got ${JSON.stringify(raw.slice(0, 40))})`);
  if (!Number.isSafeInteger(Number(s)))
    throw invalidField(
      field,
      `is larger than any event id this tower can hold (at most ${Number.MAX_SAFE_INTEGER}; got ${s.slice(0, 40)})`,
    );
  return Number(s);
}

const FILTER_PARAMS = new Set([
  "type",
  "domain_id",
  "mission_id",
  "agent_id",
  "session_id",
  "task_id",
  "last_event_id",
]);

/**
 * Reads the stream's query parameters and Last-Event-ID header, naming the field at fault.
 * `type` may repeat or be a comma list. The header wins over the parameter: browsers keep
 * the original URL when they reconnect and send the newer id in the header.
 */
export function parseStreamParams(
  query: Record<string, unknown>,
  lastEventIdHeader: string | string[] | undefined,
  extraParams: readonly string[] = [],
): StreamRequest {
  for (const key of Object.keys(query)) {
    if (!FILTER_PARAMS.has(key) && !extraParams.includes(key)) {
      throw new EpError(
        "invalid_argument",
        `${key}: unknown parameter; use type, domain_id, mission_id, agent_id, session_id, task_id or last_event_id`,
        { field: key },
      );
    }
  }
  const one = (key: string): string | undefined => {
    const v = query[key];
    if (v === undefined) return undefined;
    if (Array.isArray(v)) {
      if (v.length !== 1) throw invalidField(key, "give it once");
      return String(v[0]);
    }
    return String(v);
  };
  const rawTypes =
    query.type === undefined ? [] : Array.isArray(query.type) ? query.type.map(String) : [String(query.type)];
  const types: string[] = [];
  for (const part of rawTypes.flatMap((t) => t.split(","))) {
    const t = part.trim();
    if (!t) continue;
    if (!EVENT_TYPES.includes(t as (typeof EVENT_TYPES)[number]))
      throw invalidField("type", `must be one of ${EVENT_TYPES.join(", ")} (got ${JSON.stringify(t.slice(0, 40))})`);
    if (!types.includes(t)) types.push(t);
  }
  if (rawTypes.length && !types.length) throw invalidField("type", "is empty");
  const filter: StreamFilterInput = { types };
  for (const [key, prop] of [
    ["domain_id", "domainId"],
    ["mission_id", "missionId"],
    ["agent_id", "agentId"],
    ["session_id", "sessionId"],
    ["task_id", "taskId"],
  ] as const) {
    const v = one(key);
    if (v === undefined) continue;
    if (!/^[\w.:-]{1,128}$/.test(v))
      throw invalidField(key, `is not a valid id (got ${JSON.stringify(v.slice(0, 40))})`);
    filter[prop] = v;
  }
  let afterId: number | undefined;
  const header = Array.isArray(lastEventIdHeader) ? lastEventIdHeader[0] : lastEventIdHeader;
  if (header !== undefined && header.trim() !== "") afterId = parseEventId(header, "Last-Event-ID");
  else {
    const q = one("last_event_id");
    if (q !== undefined) afterId = parseEventId(q, "last_event_id");
  }
  return { afterId, filter };
}

/** True when the query lets every event through (no type, domain, mission, agent or session filter). */
export function matchesAll(q: EventQuery): boolean {
  return !q.types?.length && !q.domainId && !q.domainIds && !q.missionId && !q.agentId && !q.sessionId && !q.taskId;
}

export function matches(q: EventQuery, row: EventRow): boolean {
  if (q.types?.length && !q.types.includes(row.type)) return false;
  if (q.domainId && row.domainId !== q.domainId) return false;
  if (q.domainIds && !q.domainIds.includes(row.domainId)) return false;
  if (q.missionId && row.missionId !== q.missionId) return false;
  if (q.agentId && row.agentId !== q.agentId) return false;
  if (q.sessionId && row.sessionId !== q.sessionId) return false;
  if (q.taskId && row.taskId !== q.taskId) return false;
  return true;
}
