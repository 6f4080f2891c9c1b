// Approvals tab: every pending action across the caller's AI sessions, with counts.
import { useCallback } from "react";
import { ActionCard, useDecisions } from "./actions.js";
import { approvalsOf, type Dashboard } from "./dashboard.js";
import { Empty, ErrorNote } from "./ui.js";

export function ApprovalsView({ dashboard }: { dashboard: Dashboard }) {
  const { sessions, errors, loaded, aiAvailable } = dashboard.data;
  const { pending, counts } = approvalsOf(sessions);
  const onDecided = useCallback(() => {
    dashboard.refresh("approvals");
    dashboard.refresh("work");
  }, [dashboard]);
  const decisions = useDecisions(onDecided);
  return (
    <section className="tab-panel" aria-labelledby="approvals-heading">
      <div className="panel-head">
        <h2 id="approvals-heading">Approvals</h2>
        <ul className="counts" aria-label="Action counts">
          <li>
            <strong>{counts.pending}</strong> pending
          </li>
          <li>
            <strong>{counts.approved}</strong> approved
          </li>
          <li>
            <strong>{counts.rejected}</strong> rejected
          </li>
        </ul>
      </div>
      {!aiAvailable ? <ErrorNote error="AI sessions are not available on this tower, so there is nothing to approve." /> : <ErrorNote error={errors.approvals} />}
      {loaded.approvals && aiAvailable && pending.length === 0 && <Empty>Nothing waits for a decision.</Empty>}
      <div className="approval-list">
        {pending.map(({ action, session }) => (
          <ActionCard key={action.id} action={action} decisions={decisions} context={`Session: ${session.title || session.id} · proposed ${action.createdAt.replace("T", " ").slice(0, 19)}`} />
        ))}
      </div>
    </section>
  );
}
