// Missions tab: every mission with its tasks and their states, live from the event feed.
import { claimPolicyOf, kindOf, statusOf, missionStatusOf } from "./words.js";
import { useMemo, useState } from "react";
import type { Task } from "@gen/ep/tower/v1/resources_pb.js";
import type { Dashboard } from "./dashboard.js";
import { NewDomainForm, NewMissionForm, NewTaskForm } from "./forms.js";
import { Ago, Empty, ErrorNote, StatusBadge, usd, useNow } from "./ui.js";
import { TaskStatusBadge } from "./denials.js";
import { isoOf, msOf } from "@common/vocab.js";
import { hasDependencies, PipelineGraph } from "./pipeline-graph.js";

/** Tokens and cost of tasks as their runtimes reported them; undefined when none did. */
function usageSum(list: readonly Task[]): { input: number; output: number; cost: number } | undefined {
  let sum: { input: number; output: number; cost: number } | undefined;
  for (const t of list) {
    const u = t.result?.usage;
    if (!u) continue;
    sum ??= { input: 0, output: 0, cost: 0 };
    sum.input += Number(u.inputTokens);
    sum.output += Number(u.outputTokens);
    sum.cost += u.costUsd;
  }
  return sum;
}

const tokens = new Intl.NumberFormat("en-US");

export function MissionsView({
  dashboard,
  navigate,
  canOperate,
}: {
  dashboard: Dashboard;
  navigate(to: string): void;
  canOperate: boolean;
}) {
  const [creating, setCreating] = useState<"domain" | "mission" | { taskIn: string }>();
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
  const shown = missions
    .filter((m) => !domainId || m.domainId === domainId)
    .sort((a, b) => msOf(b.createdAt) - msOf(a.createdAt));

  return (
    <section className="tab-panel" aria-labelledby="missions-heading">
      <div className="panel-head">
        <h2 id="missions-heading">Missions</h2>
        <span className="muted">
          {shown.length} mission{shown.length === 1 ? "" : "s"} ·{" "}
          {tasks.filter((t) => !t.parentTaskId && (!domainId || t.domainId === domainId)).length} tasks
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
        {canOperate && (
          <div className="button-row panel-actions">
            <button type="button" className="btn btn-small" onClick={() => setCreating("domain")}>
              New domain
            </button>
            <button type="button" className="btn btn-small btn-primary" onClick={() => setCreating("mission")}>
              New mission
            </button>
          </div>
        )}
      </div>
      {creating === "domain" && (
        <NewDomainForm
          onCancel={() => setCreating(undefined)}
          onDone={() => {
            setCreating(undefined);
            dashboard.refresh("work");
          }}
        />
      )}
      {creating === "mission" && (
        <NewMissionForm
          domains={domainId ? domains.filter((d) => d.id === domainId) : domains}
          onCancel={() => setCreating(undefined)}
          onDone={() => {
            setCreating(undefined);
            dashboard.refresh("work");
          }}
        />
      )}
      <ErrorNote error={errors.work} />
      {loaded.work && shown.length === 0 && (
        <Empty>No missions yet. Create one with New mission, ask the console, or run `ep mission create`.</Empty>
      )}
      {shown.map((m) => {
        const list = tasksByMission.get(m.id) ?? [];
        // broadcast runs carry the usage; the parent has none of its own
        const usage = usageSum(tasks.filter((t) => t.missionId === m.id));
        return (
          <article className="mission" key={m.id} id={m.id} aria-label={`Mission ${m.title}`} data-mission-id={m.id}>
            <header className="card-head">
              <h3>{m.title}</h3>
              <StatusBadge status={missionStatusOf(m)} />
              {canOperate && (
                <button
                  type="button"
                  className="btn btn-small card-action"
                  onClick={() => setCreating({ taskIn: m.id })}
                  aria-label={`New task in ${m.title}`}
                >
                  New task
                </button>
              )}
            </header>
            {typeof creating === "object" && creating.taskIn === m.id && (
              <NewTaskForm
                missionId={m.id}
                agents={agents.filter((a) => a.domainId === m.domainId)}
                onCancel={() => setCreating(undefined)}
                onDone={(taskId) => {
                  setCreating(undefined);
                  navigate(`/ui/tasks/${taskId}`);
                }}
              />
            )}
            <p className="muted small">
              {domainName.get(m.domainId) ?? m.domainId} · <code>{m.id}</code> · created{" "}
              <Ago iso={isoOf(m.createdAt)} now={now} />
              {usage && (
                <span className="mission-usage" title="the sum of what its tasks' runtimes reported">
                  {" "}
                  · {tokens.format(usage.input)} tokens in, {tokens.format(usage.output)} out
                  {usage.cost > 0 ? ` · ${usd(usage.cost)}` : ""}
                </span>
              )}
            </p>
            {m.description && <p>{m.description}</p>}
            {list.length === 0 ? (
              <p className="muted small">No tasks.</p>
            ) : (
              <>
                {hasDependencies(list) && <PipelineGraph title={m.title} list={list} navigate={navigate} />}
                <MissionTasks title={m.title} list={list} agentNames={agentNames} now={now} navigate={navigate} />
              </>
            )}
          </article>
        );
      })}
    </section>
  );
}

/** One mission's tasks: state, kind, attempts, agent, cost; the title opens the task page. */
function MissionTasks({
  title,
  list,
  agentNames,
  now,
  navigate,
}: {
  title: string;
  list: Task[];
  agentNames: Map<string, string>;
  now: number;
  navigate(to: string): void;
}) {
  return (
    <div className="table-scroll" tabIndex={0} role="region" aria-label={`Tasks of ${title}`}>
      <table className="tasks">
        <thead>
          <tr>
            <th scope="col">Task</th>
            <th scope="col">State</th>
            <th scope="col" className="col-opt">
              Kind
            </th>
            <th scope="col" className="col-opt">
              Priority
            </th>
            <th scope="col" className="col-opt">
              Attempts
            </th>
            <th scope="col" className="col-opt">
              Agent
            </th>
            <th scope="col" className="col-opt">
              Cost
            </th>
            <th scope="col">Updated</th>
          </tr>
        </thead>
        <tbody>
          {list.map((t) => (
            <tr key={t.id} data-task-id={t.id}>
              <td>
                <a
                  className="task-title"
                  href={`/ui/tasks/${t.id}`}
                  onClick={(e) => {
                    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
                    e.preventDefault();
                    navigate(`/ui/tasks/${t.id}`);
                  }}
                >
                  {t.title}
                </a>
                {t.result?.error && <span className="error-text small"> — {t.result.error}</span>}
              </td>
              <td>
                <TaskStatusBadge status={statusOf(t)} denials={t.result?.denials ?? []} />
              </td>
              <td
                className="col-opt"
                title={kindOf(t) === "claimable" ? `claim policy: ${claimPolicyOf(t) || "first_claim"}` : undefined}
              >
                {kindOf(t) === "claimable" ? "claimable" : "kanban"}
              </td>
              <td className="col-opt">{t.priority}</td>
              <td className="col-opt">{kindOf(t) === "claimable" ? `${t.attempts}/${t.maxAttempts}` : "—"}</td>
              <td className="col-opt" title={t.claimedBy || t.assigneeAgentId || undefined}>
                {agentNames.get(t.claimedBy || t.assigneeAgentId) ?? (t.claimedBy || t.assigneeAgentId || "—")}
              </td>
              <td
                className="col-opt"
                title={
                  t.result?.usage
                    ? `${tokens.format(Number(t.result.usage.inputTokens))} tokens ` +
                      `in, ${tokens.format(Number(t.result.usage.outputTokens))} ` +
                      `out${t.result.usage.model ? ` · ${t.result.usage.model}` : ""}`
                    : undefined
                }
              >
                {t.result?.usage?.costUsd ? usd(t.result.usage.costUsd) : "—"}
              </td>
              <td>
                <Ago iso={isoOf(t.updatedAt)} now={now} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
