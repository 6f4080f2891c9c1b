// Pending actions: approve or reject from the transcript or the Approvals tab.
import { useCallback, useState } from "react";
import type { PendingAction } from "@gen/ep/tower/v1/ai_pb.js";
import { api, describeError } from "./api.js";
import { AppLink, ErrorNote, StatusBadge, toolLabel } from "./ui.js";
import { cellText, KvList } from "./view-spec.js";
import { isoOf } from "@common/vocab.js";
import { ActionStatus } from "@gen/ep/tower/v1/ai_pb.js";
import { actionStatusOf } from "./words.js";

export type Decision = "approve" | "reject";

export interface Decisions {
  busy(actionId: string): boolean;
  error(actionId: string): string | undefined;
  decide(sessionId: string, actionId: string, decision: Decision): Promise<PendingAction | undefined>;
}

/** Sends decisions, tracks which are in flight and what failed; `onDecided` refreshes the views. */
export function useDecisions(onDecided: (action: PendingAction) => void): Decisions {
  const [inFlight, setInFlight] = useState<Record<string, boolean>>({});
  const [errors, setErrors] = useState<Record<string, string | undefined>>({});
  const decide = useCallback(
    async (sessionId: string, actionId: string, decision: Decision) => {
      setInFlight((s) => ({ ...s, [actionId]: true }));
      setErrors((s) => ({ ...s, [actionId]: undefined }));
      try {
        const req = { sessionId, actionId };
        const res = decision === "approve" ? await api.ai.approveAction(req) : await api.ai.rejectAction(req);
        if (res.action) onDecided(res.action);
        return res.action;
      } catch (err) {
        setErrors((s) => ({ ...s, [actionId]: describeError(err) }));
        return undefined;
      } finally {
        setInFlight((s) => ({ ...s, [actionId]: false }));
      }
    },
    [onDecided],
  );
  return {
    busy: (id) => inFlight[id] === true,
    error: (id) => errors[id],
    decide,
  };
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined);
const text = (v: unknown): string => (typeof v === "string" ? v : "");

/** What a decided action did, for people: the resource it made or changed (with a link), or why not. */
export function outcomeOf(
  action: Pick<PendingAction, "status" | "error" | "result" | "tool">,
): { text: string; href?: string; linkText?: string; tone: "ok" | "bad" | "muted" } | undefined {
  if (action.status === ActionStatus.PENDING) return undefined;
  if (action.status === ActionStatus.REJECTED) return { text: "Rejected: nothing was done.", tone: "muted" };
  if (action.error) return { text: `Failed: ${action.error}`, tone: "bad" };
  const r = obj(action.result) ?? {};
  const task = obj(r.task);
  if (task) {
    const verb =
      action.tool === "cancel_task" ? "Cancelled" : action.tool === "retry_mesh_task" ? "Queued again" : "Submitted";
    return {
      text: `${verb} task`,
      linkText: text(task.title) || text(task.id),
      href: `/ui/tasks/${text(task.id)}`,
      tone: "ok",
    };
  }
  const mission = obj(r.mission);
  if (mission)
    return {
      text: "Created mission",
      linkText: text(mission.title) || text(mission.id),
      href: `/ui/missions#${text(mission.id)}`,
      tone: "ok",
    };
  const domain = obj(r.domain);
  if (domain)
    return { text: "Created domain", linkText: text(domain.name) || text(domain.id), href: "/ui/missions", tone: "ok" };
  const doc = obj(r.doc) ?? obj(r.artifact);
  if (doc) return { text: `Wrote ${text(doc.name) || "the document"}`, tone: "ok" };
  if (r.delivered === true) return { text: "Signal delivered", tone: "ok" };
  return { text: `${toolLabel(action.tool)}: done`, tone: "ok" };
}

/** The outcome line of a decided action (nothing while it is pending). */
export function ActionOutcome({ action }: { action: Pick<PendingAction, "status" | "error" | "result" | "tool"> }) {
  const o = outcomeOf(action);
  if (!o) return null;
  return (
    <p className={`action-outcome outcome-${o.tone}`} role="status">
      {o.text}
      {o.href && (
        <>
          {" "}
          <AppLink href={o.href}>{o.linkText}</AppLink>
        </>
      )}
    </p>
  );
}

function argumentItems(args: unknown) {
  if (!args || typeof args !== "object") return [];
  return Object.entries(args as Record<string, unknown>).map(([key, value]) => ({
    key,
    value:
      typeof value === "string" || typeof value === "number" || typeof value === "boolean" || value === null
        ? value
        : JSON.stringify(value),
  }));
}

/** One pending (or decided) action with its arguments and, while pending, approve/reject buttons. */
export function ActionCard({
  action,
  decisions,
  context,
}: {
  action: PendingAction;
  decisions: Decisions;
  context?: string;
}) {
  const pending = action.status === ActionStatus.PENDING;
  const busy = decisions.busy(action.id);
  const label = action.summary || action.tool;
  return (
    <article className="action-card" aria-label={`Action ${label}`} data-action-id={action.id}>
      <header className="card-head">
        <span>
          <strong>{cellText(label)}</strong>
        </span>
        <StatusBadge status={actionStatusOf(action)} />
      </header>
      {context && <p className="muted small">{context}</p>}
      <KvList items={argumentItems(action.arguments)} />
      <ActionOutcome action={action} />
      {!pending && action.decidedBy && (
        <p className="muted small">
          {action.status} by {action.decidedBy}
          {action.decidedAt ? ` at ${isoOf(action.decidedAt)}` : ""}
        </p>
      )}
      {pending && (
        <div className="action-bar" role="group" aria-label={`Decide ${label}`}>
          <button
            type="button"
            className="btn btn-approve"
            disabled={busy}
            onClick={() => void decisions.decide(action.sessionId, action.id, "approve")}
          >
            Approve
          </button>
          <button
            type="button"
            className="btn btn-reject"
            disabled={busy}
            onClick={() => void decisions.decide(action.sessionId, action.id, "reject")}
          >
            Reject
          </button>
        </div>
      )}
      <ErrorNote error={decisions.error(action.id)} />
    </article>
  );
}
