// view_spec: the planner's structured output, rendered by the consoles as plain text inside
// fixed components. The schema is declarative and closed (`additionalProperties: false`
// everywhere), and every string is checked for anything a careless renderer could execute:
// HTML tags, entity-encoded tags, script URLs. Read-tool results are turned into view_specs here.
import { Ajv } from "ajv";
import { EpError } from "../../../common/errors.js";
import { describeAjvError } from "../tools/index.js";

export type Cell = string | number | boolean | null;
export interface KvItem {
  key: string;
  value: Cell;
}

export interface TableView {
  type: "table";
  title?: string;
  columns: string[];
  rows: Cell[][];
}
export interface KvView {
  type: "kv";
  title?: string;
  items: KvItem[];
}
export interface Card {
  title: string;
  subtitle?: string;
  status?: string;
  fields?: KvItem[];
}
export interface CardsView {
  type: "cards";
  title?: string;
  cards: Card[];
}
export interface TimelineItem {
  at: string;
  title: string;
  detail?: string;
}
export interface TimelineView {
  type: "timeline";
  title?: string;
  items: TimelineItem[];
}
export interface LogStreamView {
  type: "log_stream";
  title?: string;
  lines: string[];
}
export interface ActionButton {
  action_id: string;
  label: string;
  kind: "approve" | "reject";
}
export interface ActionBarView {
  type: "action_bar";
  title?: string;
  actions: ActionButton[];
}
export type ViewSpec = TableView | KvView | CardsView | TimelineView | LogStreamView | ActionBarView;
export type ViewSpecType = ViewSpec["type"];
export const VIEW_SPEC_TYPES: readonly ViewSpecType[] = [
  "cards",
  "kv",
  "table",
  "timeline",
  "log_stream",
  "action_bar",
];

export const VIEW_SPEC_LIMITS = {
  stringLength: 10_000,
  items: 1_000,
  columns: 50,
  logLines: 5_000,
  actions: 50,
} as const;

const str = { type: "string", maxLength: VIEW_SPEC_LIMITS.stringLength } as const;
const shortStr = { type: "string", maxLength: 500 } as const;
const cell = { type: ["string", "number", "boolean", "null"], maxLength: VIEW_SPEC_LIMITS.stringLength } as const;
const kvItem = {
  type: "object",
  additionalProperties: false,
  required: ["key", "value"],
  properties: { key: shortStr, value: cell },
} as const;
const title = shortStr;

function view(type: ViewSpecType, required: string[], properties: Record<string, unknown>): Record<string, unknown> {
  return {
    type: "object",
    additionalProperties: false,
    required: ["type", ...required],
    properties: { type: { const: type }, title, ...properties },
  };
}

/** The declarative schema for one view_spec (JSON Schema, draft-07 style, Ajv discriminator on `type`). */
export const VIEW_SPEC_SCHEMA = {
  type: "object",
  required: ["type"],
  properties: { type: { enum: ["cards", "kv", "table", "timeline", "log_stream", "action_bar"] } },
  discriminator: { propertyName: "type" },
  oneOf: [
    view("cards", ["cards"], {
      cards: {
        type: "array",
        maxItems: VIEW_SPEC_LIMITS.items,
        items: {
          type: "object",
          additionalProperties: false,
          required: ["title"],
          properties: {
            title: shortStr,
            subtitle: shortStr,
            status: { type: "string", maxLength: 40 },
            fields: { type: "array", maxItems: 100, items: kvItem },
          },
        },
      },
    }),
    view("kv", ["items"], { items: { type: "array", maxItems: VIEW_SPEC_LIMITS.items, items: kvItem } }),
    view("table", ["columns", "rows"], {
      columns: { type: "array", minItems: 1, maxItems: VIEW_SPEC_LIMITS.columns, items: shortStr },
      rows: {
        type: "array",
        maxItems: VIEW_SPEC_LIMITS.items,
        items: { type: "array", maxItems: VIEW_SPEC_LIMITS.columns, items: cell },
      },
    }),
    view("timeline", ["items"], {
      items: {
        type: "array",
        maxItems: VIEW_SPEC_LIMITS.items,
        items: {
          type: "object",
          additionalProperties: false,
          required: ["at", "title"],
          properties: { at: { type: "string", maxLength: 64 }, title: shortStr, detail: str },
        },
      },
    }),
    view("log_stream", ["lines"], { lines: { type: "array", maxItems: VIEW_SPEC_LIMITS.logLines, items: str } }),
    view("action_bar", ["actions"], {
      actions: {
        type: "array",
        minItems: 1,
        maxItems: VIEW_SPEC_LIMITS.actions,
        items: {
          type: "object",
          additionalProperties: false,
          required: ["action_id", "label", "kind"],
          properties: {
            action_id: { type: "string", pattern: "^act_[0-9a-z]{1,64}$" },
            label: { type: "string", minLength: 1, maxLength: 100 },
            kind: { enum: ["approve", "reject"] },
          },
        },
      },
    }),
  ],
} as const;

const ajv = new Ajv({ discriminator: true, allErrors: false, strict: true, allowUnionTypes: true });
const validateSchema = ajv.compile(VIEW_SPEC_SCHEMA);

// A tag opener as browsers parse it (`<a`, `</a`, `<!--`, `<?`), and its entity-encoded forms.
const HTML_TAG = /<[/!?]?[a-z]/i;
const HTML_TAG_PAIR = /<[^<>]*>/;
const ENCODED_TAG = /&(?:lt|gt|#0*60|#0*62|#x0*3c|#x0*3e);?/i;
// Schemes that run code or smuggle documents, after stripping what URL parsers ignore.
const SCRIPT_URL = /(?:^|[^a-z0-9+.-])(?:javascript|vbscript|livescript|mocha):/;
const DATA_URL = /(?:^|[^a-z0-9+.-])data:\s*(?:[a-z]+\/[a-z0-9.+-]+|[,;])/;
// eslint-disable-next-line no-control-regex -- control characters are what we strip
const IGNORED_BY_URL_PARSERS = /[\u0000-\u001f\u007f\u00ad\u200b-\u200d\u2060\ufeff]/g;
const EVENT_HANDLER_KEY = /^on[a-z]/i;

/** Why a string could carry script, or undefined when it is plain text. */
export function scriptHazard(value: string): string | undefined {
  if (HTML_TAG.test(value) || HTML_TAG_PAIR.test(value)) return "must not contain HTML tags";
  if (ENCODED_TAG.test(value)) return "must not contain HTML-encoded angle brackets";
  const folded = value.replace(IGNORED_BY_URL_PARSERS, "").toLowerCase();
  if (SCRIPT_URL.test(folded)) return "must not contain a script URL";
  if (DATA_URL.test(folded)) return "must not contain a data: URL";
  return undefined;
}

function pathOf(parts: (string | number)[]): string {
  let out = "";
  for (const p of parts) out += typeof p === "number" ? `[${p}]` : out === "" ? p : `.${p}`;
  return out;
}

function reject(path: string, message: string): never {
  const field = path === "" ? "view_spec" : `view_spec.${path}`;
  throw new EpError("invalid_argument", `${field} ${message}`, { field, path });
}

// The deepest valid view_spec is spec.cards[i].fields[j].value (6 levels); stop well before a stack overflow.
const MAX_DEPTH = 8;

function scan(value: unknown, parts: (string | number)[]): void {
  if (parts.length > MAX_DEPTH) reject(pathOf(parts), "is nested too deeply");
  if (typeof value === "string") {
    const hazard = scriptHazard(value);
    if (hazard) reject(pathOf(parts), hazard);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => scan(v, [...parts, i]));
  } else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (EVENT_HANDLER_KEY.test(k)) reject(pathOf([...parts, k]), "is an event-handler field and is not allowed");
      if (k === "__proto__" || k === "constructor" || k === "prototype")
        reject(pathOf([...parts, k]), "is not allowed");
      scan(v, [...parts, k]);
    }
  }
}

/**
 * Validates one view_spec. Returns it typed, or throws EpError `invalid_argument` naming the
 * JSON path (`view_spec.rows[2][0]`). Rejected: unknown types or fields, `on*` keys, HTML,
 * `javascript:`/`data:` URLs, rows that do not match the columns, oversized content.
 */
export function validateViewSpec(x: unknown): ViewSpec {
  if (x === null || typeof x !== "object" || Array.isArray(x)) reject("", "must be an object");
  scan(x, []);
  const type = (x as { type?: unknown }).type;
  if (typeof type !== "string" || !(VIEW_SPEC_TYPES as readonly string[]).includes(type)) {
    reject("type", `must be one of ${VIEW_SPEC_TYPES.join(", ")}`);
  }
  if (!validateSchema(x)) {
    const { path, message } = describeAjvError(validateSchema.errors![0]);
    reject(path, message);
  }
  const spec = x as ViewSpec;
  if (spec.type === "table") {
    spec.rows.forEach((row, i) => {
      if (row.length !== spec.columns.length)
        reject(`rows[${i}]`, `must have ${spec.columns.length} cells, one per column`);
    });
  }
  return spec;
}

/** Validates a list of view_specs (the planner's `viewSpecs`); the error path carries the index. */
export function validateViewSpecs(list: unknown): ViewSpec[] {
  if (!Array.isArray(list)) reject("", "must be a list of view_specs");
  if (list.length > 20) reject("", "must hold at most 20 view_specs");
  return list.map((x, i) => {
    try {
      return validateViewSpec(x);
    } catch (err) {
      if (err instanceof EpError && typeof err.details?.path === "string") {
        const at = err.details.path;
        const path = `[${i}]${at === "" ? "" : at.startsWith("[") ? at : `.${at}`}`;
        const message = err.message.replace(/^view_spec\S*\s/, "");
        throw new EpError("invalid_argument", `view_specs${path} ${message}`, { field: `view_specs${path}`, path });
      }
      throw err;
    }
  });
}

/** True when x is a valid, script-free view_spec. */
export function isViewSpec(x: unknown): x is ViewSpec {
  try {
    validateViewSpec(x);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Read-tool results -> view_specs. Data is shown, never trusted: strings are neutralised so a
// task output containing `<div>` or `javascript:` still renders as text and passes validation.

/** Makes any text safe for a view_spec while keeping it readable. */
export function neutralize(value: string, max: number = VIEW_SPEC_LIMITS.stringLength): string {
  let s = value.replace(IGNORED_BY_URL_PARSERS, (c) => (c === "\n" || c === "\t" ? " " : ""));
  s = s.replace(/</g, "‹").replace(/>/g, "›");
  s = s.replace(/&(?=(?:lt|gt|#0*60|#0*62|#x0*3c|#x0*3e);?)/gi, "& ");
  s = s.replace(/(javascript|vbscript|livescript|mocha|data)(\s*):/gi, "$1 :");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function toCell(v: unknown): Cell {
  if (v === null || v === undefined) return null;
  if (typeof v === "number") return Number.isFinite(v) ? v : String(v);
  if (typeof v === "boolean") return v;
  if (typeof v === "string") return neutralize(v, 500);
  if (typeof v === "bigint") return v.toString();
  if (Array.isArray(v) && v.every((x) => typeof x === "string" || typeof x === "number"))
    return neutralize(v.join(", "), 500);
  return neutralize(JSON.stringify(v) ?? "", 500);
}

function toLabel(k: string): string {
  return neutralize(k, 500);
}

const LIST_COLUMNS: Record<string, { key: string; columns: string[]; title: string }> = {
  // names first, ids last: people read the table, the id column is for copying
  list_domains: { key: "domains", columns: ["name", "created_at", "id"], title: "Domains" },
  list_missions: { key: "missions", columns: ["title", "status", "domain_id", "created_at", "id"], title: "Missions" },
  list_tasks: {
    key: "tasks",
    columns: ["title", "status", "kind", "claim_policy", "priority", "attempts", "claimed_by", "mission_id", "id"],
    title: "Tasks",
  },
  list_agents: { key: "agents", columns: ["name", "runtime", "state", "node_id", "domain_id", "id"], title: "Agents" },
  list_nodes: { key: "nodes", columns: ["hostname", "status", "last_seen_at", "id"], title: "Nodes" },
  list_pending_actions: {
    key: "actions",
    columns: ["summary", "status", "created_at", "tool", "id"],
    title: "Pending actions",
  },
};

/** Tools answering `{nodes: [{node_id, reported_at, <key>: [...]}]}`: one table, a row per item with its node. */
const PER_NODE: Record<
  string,
  {
    key: string;
    columns: string[];
    title: string;
    flatten?: (item: Record<string, unknown>) => Record<string, unknown>;
  }
> = {
  list_cron_jobs: {
    key: "jobs",
    columns: [
      "node_id",
      "name",
      "kind",
      "schedule",
      "interval",
      "dispatch",
      "session",
      "next_fire_at",
      "last_fire",
      "running",
      "reported_at",
    ],
    title: "Cron jobs",
    flatten: (j) => {
      const f = isRecord(j.last_fire) ? j.last_fire : undefined;
      return {
        ...j,
        last_fire: f ? [f.status, f.fired_at, f.error].filter((x) => typeof x === "string" && x !== "").join(" ") : "",
      };
    },
  },
  get_supervision: {
    key: "agents",
    columns: [
      "node_id",
      "profile",
      "agent_id",
      "name",
      "state",
      "paused",
      "restarts",
      "last_restart_at",
      "last_restart_reason",
      "next_retry_at",
      "reported_at",
    ],
    title: "Supervision",
  },
};

function perNodeViews(toolName: string, nodes: unknown[]): ViewSpec[] {
  const meta = PER_NODE[toolName]!;
  const rows: Record<string, unknown>[] = [];
  const errors: Record<string, unknown>[] = [];
  for (const n of nodes) {
    if (!isRecord(n)) continue;
    const head = { node_id: n.node_id, reported_at: n.reported_at };
    const items = Array.isArray(n[meta.key]) ? (n[meta.key] as unknown[]) : [];
    for (const item of items) if (isRecord(item)) rows.push({ ...(meta.flatten ? meta.flatten(item) : item), ...head });
    if (Array.isArray(n.config_errors))
      for (const e of n.config_errors) if (isRecord(e)) errors.push({ ...head, ...e });
  }
  const out: ViewSpec[] = [tableOf(meta.title, rows, meta.columns)];
  if (errors.length)
    out.push(tableOf("Configuration errors", errors, ["node_id", "file", "line", "field", "item", "message"]));
  return out;
}

const SINGLE_KEYS: Record<string, { key: string; title: string }> = {
  get_mission: { key: "mission", title: "Mission" },
  get_task: { key: "task", title: "Task" },
  get_agent: { key: "agent", title: "Agent" },
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** The array a list result carries: the result itself, `result[key]`, or its only array field. */
function listOf(result: unknown, key: string | undefined): unknown[] | undefined {
  if (Array.isArray(result)) return result;
  if (!isRecord(result)) return undefined;
  if (key && Array.isArray(result[key])) return result[key] as unknown[];
  const arrays = Object.values(result).filter(Array.isArray);
  return arrays.length === 1 ? (arrays[0] as unknown[]) : undefined;
}

function columnsFor(rows: unknown[], preferred: string[] | undefined): string[] {
  const seen = new Set<string>();
  for (const r of rows.slice(0, 50)) if (isRecord(r)) for (const k of Object.keys(r)) seen.add(k);
  if (preferred) {
    const present = preferred.filter((c) => seen.has(c));
    if (present.length > 0 || seen.size === 0) return present.length > 0 ? present : preferred;
  }
  const cols = [...seen].slice(0, VIEW_SPEC_LIMITS.columns);
  return cols.length > 0 ? cols : ["value"];
}

export function tableOf(title: string, items: unknown[], preferred?: string[]): TableView {
  const columns = columnsFor(items, preferred);
  const rows = items
    .slice(0, VIEW_SPEC_LIMITS.items)
    .map((item) =>
      isRecord(item) ? columns.map((c) => toCell(item[c])) : columns.map((_, i) => (i === 0 ? toCell(item) : null)),
    );
  return { type: "table", title: neutralize(title, 500), columns: columns.map(toLabel), rows };
}

export function kvOf(title: string, obj: Record<string, unknown>): KvView {
  const items = Object.entries(obj)
    .slice(0, VIEW_SPEC_LIMITS.items)
    .map(([key, value]) => ({ key: toLabel(key), value: toCell(value) }));
  return { type: "kv", title: neutralize(title, 500), items };
}

function eventsTimeline(events: unknown[]): TimelineView {
  const items = events.slice(-VIEW_SPEC_LIMITS.items).map((e) => {
    const ev = isRecord(e) ? e : {};
    const at = typeof ev.created_at === "string" ? ev.created_at : typeof ev.createdAt === "string" ? ev.createdAt : "";
    const head = [ev.type, ev.name, ev.status].filter((x) => typeof x === "string" && x !== "").join(" · ");
    const ids = ["domain_id", "mission_id", "task_id", "agent_id", "session_id"]
      .filter((k) => typeof ev[k] === "string" && ev[k] !== "")
      .map((k) => `${k}=${String(ev[k])}`);
    const item: TimelineItem = {
      at: neutralize(at, 64),
      title: neutralize(head || `event ${String(ev.id ?? "")}`, 500),
    };
    const detail = [...ids, ev.payload !== undefined ? JSON.stringify(ev.payload) : ""].filter(Boolean).join(" ");
    if (detail) item.detail = neutralize(detail);
    return item;
  });
  return { type: "timeline", title: "Events", items };
}

/**
 * View_specs for a tool result: lists become a table (events a timeline, pending actions also an
 * action bar), single objects a kv (a task's output also a log_stream). Always valid view_specs.
 */
export function toViewSpecs(toolName: string, result: unknown): ViewSpec[] {
  const out: ViewSpec[] = [];
  if (toolName === "list_events") {
    const events = listOf(result, "events");
    if (events) out.push(eventsTimeline(events));
  } else if (PER_NODE[toolName] && isRecord(result) && Array.isArray(result.nodes)) {
    out.push(...perNodeViews(toolName, result.nodes));
  } else if (LIST_COLUMNS[toolName]) {
    const meta = LIST_COLUMNS[toolName];
    const items = listOf(result, meta.key);
    if (items) {
      out.push(tableOf(meta.title, items, meta.columns));
      if (toolName === "list_pending_actions") {
        const ids = items
          .filter((a) => isRecord(a) && (a.status === undefined || a.status === "pending") && typeof a.id === "string")
          .map((a) => (a as { id: string }).id);
        const bar = actionBarFor(ids);
        if (bar) out.push(bar);
      }
    } else if (isRecord(result)) {
      out.push(kvOf(meta.title, result));
    }
  } else if (isRecord(result)) {
    const single = SINGLE_KEYS[toolName];
    const obj = single && isRecord(result[single.key]) ? (result[single.key] as Record<string, unknown>) : result;
    out.push(kvOf(single?.title ?? toolName.replace(/_/g, " "), obj));
    const output = isRecord(obj.result) ? obj.result.output : undefined;
    if (toolName === "get_task" && typeof output === "string" && output !== "") {
      out.push({
        type: "log_stream",
        title: "Output",
        lines: output
          .split("\n")
          .slice(-VIEW_SPEC_LIMITS.logLines)
          .map((l) => neutralize(l)),
      });
    }
  } else if (Array.isArray(result)) {
    out.push(tableOf(toolName.replace(/_/g, " "), result));
  } else if (result !== undefined) {
    out.push({ type: "kv", items: [{ key: "result", value: toCell(result) }] });
  }
  return out.map(validateViewSpec);
}

/** The primary view_spec for a tool result (see toViewSpecs). */
export function toViewSpec(toolName: string, result: unknown): ViewSpec | undefined {
  return toViewSpecs(toolName, result)[0];
}

/** Approve/reject buttons for pending actions; undefined when there are none (or none valid). */
export function actionBarFor(actionIds: string[]): ActionBarView | undefined {
  const actions: ActionButton[] = [];
  for (const id of actionIds) {
    if (!/^act_[0-9a-z]{1,64}$/.test(id)) continue;
    if (actions.length + 2 > VIEW_SPEC_LIMITS.actions) break;
    actions.push(
      { action_id: id, label: "Approve", kind: "approve" },
      { action_id: id, label: "Reject", kind: "reject" },
    );
  }
  return actions.length > 0 ? { type: "action_bar", title: "Pending actions", actions } : undefined;
}
