// Renderers for the planner's view_specs. Everything is React text: no HTML from the server,
// no links or URLs built from data, no script. A malformed spec renders as a short notice
// (with its JSON as text) instead of breaking the transcript.
import { Component, createContext, useContext, type ReactNode } from "react";
import { AppLink, StatusBadge } from "./ui.js";

/** Resolves a resource id to its name (the console's loaded data); undefined when unknown. */
export const NamesContext = createContext<(id: string) => string | undefined>(() => undefined);

const ID_RE = /^(dom|msn|tsk|agt|nod)_[0-9a-z]{4,}$/;
const HEADERS: Record<string, string> = {
  claimed_by: "agent",
  assignee_agent_id: "assignee",
  agent_id: "agent",
  mission_id: "mission",
  domain_id: "domain",
  node_id: "node",
  claim_policy: "claim policy",
  created_at: "created",
  updated_at: "updated",
  last_seen_at: "last seen",
  max_attempts: "max attempts",
};

/** A cell: a known id reads as its name (id in the tooltip; a task links to its page), else text. */
function CellValue({ value }: { value: unknown }) {
  const nameOf = useContext(NamesContext);
  const text = cellText(value);
  if (typeof value !== "string" || !ID_RE.test(value)) return <>{text}</>;
  const name = nameOf(value);
  if (value.startsWith("tsk_")) return <AppLink href={`/ui/tasks/${value}`}>{name ?? value}</AppLink>;
  return name ? <span title={value}>{name}</span> : text;
}

export type Cell = string | number | boolean | null;
export interface KvItem {
  key: string;
  value: Cell;
}
export interface ActionButtonSpec {
  action_id: string;
  label: string;
  kind: "approve" | "reject";
}
export type ViewSpec =
  | { type: "table"; title?: string; columns: string[]; rows: Cell[][] }
  | { type: "kv"; title?: string; items: KvItem[] }
  | { type: "cards"; title?: string; cards: { title: string; subtitle?: string; status?: string; fields?: KvItem[] }[] }
  | { type: "timeline"; title?: string; items: { at: string; title: string; detail?: string }[] }
  | { type: "log_stream"; title?: string; lines: string[] }
  | { type: "action_bar"; title?: string; actions: ActionButtonSpec[] };

export const VIEW_SPEC_TYPES = ["cards", "kv", "table", "timeline", "log_stream", "action_bar"] as const;

/** What an action bar needs from its surroundings: each action's state and a way to decide. */
export interface ActionContext {
  statusOf(actionId: string): string | undefined;
  /** what the action would do, when known (its summary or tool) */
  summaryOf?(actionId: string): string | undefined;
  busy(actionId: string): boolean;
  decide(actionId: string, decision: "approve" | "reject"): void;
  /** what a decided action did (its outcome line) */
  outcome?(actionId: string): ReactNode;
}

export function cellText(v: unknown): string {
  if (v === null || v === undefined || v === "") return "—";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  return JSON.stringify(v) ?? "";
}

const arr = <T,>(v: unknown): T[] => (Array.isArray(v) ? (v as T[]) : []);
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

function Title({ text }: { text?: string }) {
  return text ? <h4 className="vs-title">{text}</h4> : null;
}

export function TableView({ spec }: { spec: Extract<ViewSpec, { type: "table" }> }) {
  const columns = arr<string>(spec.columns);
  const rows = arr<Cell[]>(spec.rows);
  return (
    <div className="vs vs-table">
      <Title text={str(spec.title)} />
      <div className="table-scroll" tabIndex={0} role="region" aria-label={str(spec.title) ?? "table"}>
        <table>
          <thead>
            <tr>
              {columns.map((c, i) => (
                <th key={i} scope="col">
                  {HEADERS[cellText(c)] ?? cellText(c).replace(/_/g, " ")}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.length === 0 ? (
              <tr>
                <td colSpan={Math.max(1, columns.length)} className="muted">
                  No rows
                </td>
              </tr>
            ) : (
              rows.map((row, r) => (
                <tr key={r}>
                  {arr<Cell>(row).map((cell, c) => (
                    <td key={c}>
                      {columns[c] === "status" || columns[c] === "state" ? (
                        <StatusBadge status={cellText(cell)} />
                      ) : columns[c] === "id" ? (
                        <code className="muted">{cellText(cell)}</code>
                      ) : (
                        <CellValue value={cell} />
                      )}
                    </td>
                  ))}
                </tr>
              ))
            )}
          </tbody>
        </table>
      </div>
    </div>
  );
}

export function KvList({ items }: { items: KvItem[] }) {
  return (
    <dl className="kv">
      {items.map((it, i) => (
        <div className="kv-row" key={i}>
          <dt>{HEADERS[cellText(it?.key)] ?? cellText(it?.key).replace(/_/g, " ")}</dt>
          <dd>
            <CellValue value={it?.value} />
          </dd>
        </div>
      ))}
    </dl>
  );
}

export function KvView({ spec }: { spec: Extract<ViewSpec, { type: "kv" }> }) {
  return (
    <div className="vs vs-kv">
      <Title text={str(spec.title)} />
      <KvList items={arr<KvItem>(spec.items)} />
    </div>
  );
}

export function CardsView({ spec }: { spec: Extract<ViewSpec, { type: "cards" }> }) {
  return (
    <div className="vs vs-cards">
      <Title text={str(spec.title)} />
      <div className="cards">
        {arr<Extract<ViewSpec, { type: "cards" }>["cards"][number]>(spec.cards).map((card, i) => (
          <article className="card" key={i}>
            <header className="card-head">
              <strong>{cellText(card?.title)}</strong>
              {str(card?.status) && <StatusBadge status={card.status!} />}
            </header>
            {str(card?.subtitle) && <p className="muted">{card.subtitle}</p>}
            {arr<KvItem>(card?.fields).length > 0 && <KvList items={arr<KvItem>(card.fields)} />}
          </article>
        ))}
      </div>
    </div>
  );
}

export function TimelineView({ spec }: { spec: Extract<ViewSpec, { type: "timeline" }> }) {
  return (
    <div className="vs vs-timeline">
      <Title text={str(spec.title)} />
      <ol className="timeline">
        {arr<{ at: string; title: string; detail?: string }>(spec.items).map((it, i) => (
          <li key={i}>
            <time className="muted">{cellText(it?.at)}</time>
            <span className="tl-title">{cellText(it?.title)}</span>
            {str(it?.detail) && <span className="tl-detail">{it.detail}</span>}
          </li>
        ))}
      </ol>
    </div>
  );
}

export function LogStreamView({ spec }: { spec: Extract<ViewSpec, { type: "log_stream" }> }) {
  const lines = arr<string>(spec.lines).map(cellText);
  return (
    <div className="vs vs-log">
      <Title text={str(spec.title)} />
      {/* biome-ignore lint/a11y/useAriaPropsSupportedByRole: console a11y follow-up (issue 36) */}
      <pre className="log" tabIndex={0} aria-label={str(spec.title) ?? "log"}>
        {lines.join("\n")}
      </pre>
    </div>
  );
}

export function ActionBarView({ spec, ctx }: { spec: Extract<ViewSpec, { type: "action_bar" }>; ctx?: ActionContext }) {
  const actions = arr<ActionButtonSpec>(spec.actions);
  const ids = [...new Set(actions.map((a) => a?.action_id).filter((x): x is string => typeof x === "string"))];
  return (
    <div className="vs vs-actions">
      <Title text={str(spec.title)} />
      {ids.map((id) => {
        const status = ctx?.statusOf(id) ?? "pending";
        const buttons = actions.filter((a) => a.action_id === id);
        return (
          <div className="action-bar" key={id} role="group" aria-label={`action ${id}`}>
            <span className="action-summary" title={id}>
              {ctx?.summaryOf?.(id) ?? "Proposed action"}
            </span>
            {status === "pending" && ctx ? (
              buttons.map((b, i) => (
                <button
                  key={i}
                  type="button"
                  className={b.kind === "approve" ? "btn btn-approve" : "btn btn-reject"}
                  disabled={ctx.busy(id)}
                  onClick={() => ctx.decide(id, b.kind === "reject" ? "reject" : "approve")}
                >
                  {cellText(b.label)}
                </button>
              ))
            ) : (
              <StatusBadge status={status} />
            )}
            {status !== "pending" && ctx?.outcome?.(id)}
          </div>
        );
      })}
    </div>
  );
}

class SpecBoundary extends Component<{ raw: unknown; children: ReactNode }, { failed: boolean }> {
  state = { failed: false };
  static getDerivedStateFromError() {
    return { failed: true };
  }
  render() {
    return this.state.failed ? <UnknownView raw={this.props.raw} reason="could not be shown" /> : this.props.children;
  }
}

function UnknownView({ raw, reason }: { raw: unknown; reason: string }) {
  return (
    <div className="vs vs-unknown">
      <p className="muted">This view {reason}; its data:</p>
      <pre className="log">{JSON.stringify(raw, null, 2)}</pre>
    </div>
  );
}

/** One view_spec of any type. */
export function ViewSpecView({ spec, ctx }: { spec: unknown; ctx?: ActionContext }) {
  const s = spec as ViewSpec | null;
  let body: ReactNode;
  switch (s && typeof s === "object" ? s.type : undefined) {
    case "table":
      body = <TableView spec={s as Extract<ViewSpec, { type: "table" }>} />;
      break;
    case "kv":
      body = <KvView spec={s as Extract<ViewSpec, { type: "kv" }>} />;
      break;
    case "cards":
      body = <CardsView spec={s as Extract<ViewSpec, { type: "cards" }>} />;
      break;
    case "timeline":
      body = <TimelineView spec={s as Extract<ViewSpec, { type: "timeline" }>} />;
      break;
    case "log_stream":
      body = <LogStreamView spec={s as Extract<ViewSpec, { type: "log_stream" }>} />;
      break;
    case "action_bar":
      body = <ActionBarView spec={s as Extract<ViewSpec, { type: "action_bar" }>} ctx={ctx} />;
      break;
    default:
      body = <UnknownView raw={spec} reason="has an unknown type" />;
  }
  return <SpecBoundary raw={spec}>{body}</SpecBoundary>;
}
