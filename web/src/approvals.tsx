// Approvals tab: what waits for a person — agents' tool-permission requests (ApprovalService)
// and pending actions across the caller's AI sessions, with counts.
import { useCallback, useState } from "react";
import type { Approval } from "@gen/ep/tower/v1/approvals_pb.js";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { ActionCard, useDecisions } from "./actions.js";
import { api, describeError } from "./api.js";
import { approvalsOf, type Dashboard } from "./dashboard.js";
import { AppLink, Empty, ErrorNote } from "./ui.js";
import { KvList } from "./view-spec.js";
import { isoOf } from "@common/vocab.js";
import { PermissionOptionKind } from "@gen/ep/tower/v1/approvals_pb.js";

export function ApprovalsView({ dashboard }: { dashboard: Dashboard }) {
  const { sessions, permissions, errors, loaded, aiAvailable } = dashboard.data;
  const { pending, counts } = approvalsOf(sessions);
  const onDecided = useCallback(() => {
    dashboard.refresh("approvals");
    dashboard.refresh("work");
  }, [dashboard]);
  const decisions = useDecisions(onDecided);
  const nothing = loaded.approvals && permissions.length === 0 && (!aiAvailable || pending.length === 0);
  return (
    <section className="tab-panel" aria-labelledby="approvals-heading">
      <div className="panel-head">
        <h2 id="approvals-heading">Approvals</h2>
        <ul className="counts" aria-label="Action counts">
          <li>
            <strong>{counts.pending + permissions.length}</strong> pending
          </li>
          <li>
            <strong>{counts.approved}</strong> approved
          </li>
          <li>
            <strong>{counts.rejected}</strong> rejected
          </li>
        </ul>
      </div>
      <ErrorNote error={aiAvailable ? errors.approvals : undefined} />
      {nothing && <Empty>Nothing waits for a decision.</Empty>}
      {permissions.length > 0 && (
        <>
          <h3 className="section-title">Agents asking to use a tool</h3>
          <div className="approval-list">
            {permissions.map((a) => (
              <PermissionCard key={a.id} approval={a} onDecided={onDecided} />
            ))}
          </div>
        </>
      )}
      {pending.length > 0 && permissions.length > 0 && <h3 className="section-title">AI session actions</h3>}
      <div className="approval-list">
        {pending.map(({ action, session }) => (
          <ActionCard
            key={action.id}
            action={action}
            decisions={decisions}
            context={
              `Session: ${session.title || session.id} · proposed ` +
              `${isoOf(action.createdAt).replace("T", " ").slice(0, 19)}`
            }
          />
        ))}
      </div>
    </section>
  );
}

const when = (t: Approval["createTime"]) => (t ? timestampDate(t).toISOString().replace("T", " ").slice(0, 19) : "");

/** One agent's tool-permission request: what it wants to run, where, and the choices it offers. */
function PermissionCard({ approval: a, onDecided }: { approval: Approval; onDecided: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string>();
  const always = a.options.find((o) => o.kind === PermissionOptionKind.ALLOW_ALWAYS);
  const decide = async (how: "approve" | "always" | "reject") => {
    setBusy(true);
    setError(undefined);
    try {
      if (how === "reject") await api.approvals.reject({ approvalId: a.id });
      else
        await api.approvals.approve({ approvalId: a.id, optionId: how === "always" ? (always?.optionId ?? "") : "" });
      onDecided();
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  const label = `${a.tool}${a.title ? `: ${a.title}` : ""}`;
  const args = Object.entries(a.arguments ?? {}).map(([key, value]) => ({
    key,
    value:
      typeof value === "string" || typeof value === "number" || typeof value === "boolean" || value === null
        ? value
        : JSON.stringify(value),
  }));
  return (
    <article className="action-card" aria-label={`Permission ${label}`} data-approval-id={a.id}>
      <header className="card-head">
        <span>
          <strong>{label}</strong>
        </span>
        <span className="muted small">expires {when(a.expireTime)}</span>
      </header>
      <p className="muted small">
        Task <AppLink href={`/ui/tasks/${a.taskId}`}>{a.taskId}</AppLink> · agent {a.agentId} · asked{" "}
        {when(a.createTime)}
      </p>
      {a.paths.length > 0 && <p className="small">Paths: {a.paths.join(", ")}</p>}
      <KvList items={args} />
      <div className="action-bar" role="group" aria-label={`Decide ${label}`}>
        <button type="button" className="btn btn-approve" disabled={busy} onClick={() => void decide("approve")}>
          Allow once
        </button>
        {always && (
          <button
            type="button"
            className="btn"
            disabled={busy}
            onClick={() => void decide("always")}
            title={always.name}
          >
            Always allow {a.tool}
          </button>
        )}
        <button type="button" className="btn btn-reject" disabled={busy} onClick={() => void decide("reject")}>
          Reject
        </button>
      </div>
      <ErrorNote error={error} />
    </article>
  );
}
