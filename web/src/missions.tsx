// Missions tab: every mission with its tasks and their states, live from the event feed.
import { useMemo, useState } from "react";
import type { Task } from "@gen/ep/tower/v1/resources_pb.js";
import type { Dashboard } from "./dashboard.js";
import { Ago, Empty, ErrorNote, StatusBadge, useNow } from "./ui.js";

export function MissionsView({ dashboard }: { dashboard: Dashboard }) {
  const { domains, missions, tasks, errors, loaded, agents } = dashboard.data;
  // agents by id, so the table shows a name (the id stays in the tooltip)
  const agentNames = useMemo(() => new Map(agents.map((a) => [a.id, a.name || a.id])), [agents]);
  const [domainId, setDomainId] = useState("");
  const now = useNow();
  const domainName = useMemo(() => new Map(domains.map((d) => [d.id, d.name])), [domains]);
  const tasksByMission = useMemo(() => {
    const m = new Map<string, Task[]>();
    for (const t of tasks) {
      if (t.parentTaskId) continue; // broadcast runs are shown through their parent's state
      const list = m.get(t.missionId) ?? [];
      list.push(t);
      m.set(t.missionId, list);
    }
    return m;
  }, [tasks]);
  const shown = missions.filter((m) => !domainId || m.domainId === domainId).sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));

  return (
    <section className="tab-panel" aria-labelledby="missions-heading">
      <div className="panel-head">
        <h2 id="missions-heading">Missions</h2>
        <span className="muted">
          {shown.length} mission{shown.length === 1 ? "" : "s"} · {tasks.filter((t) => !t.parentTaskId && (!domainId || t.domainId === domainId)).length} tasks
        </span>
        <label className="inline-field">
          <span>Domain</span>
          <select value={domainId} onChange={(e) => setDomainId(e.target.value)}>
            <option value="">All domains</option>
            {domains.map((d) => (
              <option key={d.id} value={d.id}>
                {d.name}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorNote error={errors.work} />
      {loaded.work && shown.length === 0 && <Empty>No missions yet. Ask the console to create one, or use `ep missions create`.</Empty>}
      {shown.map((m) => {
        const list = tasksByMission.get(m.id) ?? [];
        return (
          <article className="mission" key={m.id} aria-label={`Mission ${m.title}`} data-mission-id={m.id}>
            <header className="card-head">
              <h3>{m.title}</h3>
              <StatusBadge status={m.status} />
            </header>
            <p className="muted small">
              {domainName.get(m.domainId) ?? m.domainId} · <code>{m.id}</code> · created <Ago iso={m.createdAt} now={now} />
            </p>
            {m.description && <p>{m.description}</p>}
            {list.length === 0 ? (
              <p className="muted small">No tasks.</p>
            ) : (
              <div className="table-scroll" tabIndex={0} role="region" aria-label={`Tasks of ${m.title}`}>
                <table className="tasks">
                  <thead>
                    <tr>
                      <th scope="col">Task</th>
                      <th scope="col">State</th>
                      <th scope="col" className="col-opt">Kind</th>
                      <th scope="col" className="col-opt">Priority</th>
                      <th scope="col" className="col-opt">Attempts</th>
                      <th scope="col" className="col-opt">Agent</th>
                      <th scope="col">Updated</th>
                    </tr>
                  </thead>
                  <tbody>
                    {list.map((t) => (
                      <tr key={t.id} data-task-id={t.id}>
                        <td>
                          <span className="task-title">{t.title}</span>
                          {t.result?.error && <span className="error-text small"> — {t.result.error}</span>}
                        </td>
                        <td>
                          <StatusBadge status={t.status} />
                        </td>
                        <td className="col-opt" title={t.kind === "claimable" ? `claim policy: ${t.claimPolicy || "first_claim"}` : undefined}>
                          {t.kind === "claimable" ? "claimable" : "kanban"}
                        </td>
                        <td className="col-opt">{t.priority}</td>
                        <td className="col-opt">{t.kind === "claimable" ? `${t.attempts}/${t.maxAttempts}` : "—"}</td>
                        <td className="col-opt" title={t.claimedBy || t.assigneeAgentId || undefined}>
                          {agentNames.get(t.claimedBy || t.assigneeAgentId) ?? (t.claimedBy || t.assigneeAgentId || "—")}
                        </td>
                        <td>
                          <Ago iso={t.updatedAt} now={now} />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </article>
        );
      })}
    </section>
  );
}
