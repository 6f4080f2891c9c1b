// Agents tab: where each agent runs, its runtime and state (offline when its node is not linked),
// the task it is running, and the actions that apply to it: a terminal while its node is linked,
// and for supervised agents restart, pause auto-restart and resume, forwarded to its node.
import { NodeStatus } from "@gen/ep/tower/v1/resources_pb.js";
import { agentStateOf, runtimeWord, statusOf } from "./words.js";
import { useMemo, useState } from "react";
import type { Agent } from "@gen/ep/tower/v1/resources_pb.js";
import { api, describeError } from "./api.js";
import type { Dashboard } from "./dashboard.js";
import { TerminalPanel } from "./terminal/index.js";
import { Ago, CopyId, Empty, ErrorNote, StatusBadge, runtimeLabel, useNow } from "./ui.js";
import { isoOf } from "@common/vocab.js";

const OPS = [
  { op: "restart", label: "Restart" },
  { op: "pause", label: "Pause" },
  { op: "resume", label: "Resume" },
] as const;

export function AgentsView({
  dashboard,
  canOperate,
  navigate,
}: {
  dashboard: Dashboard;
  canOperate: boolean;
  navigate(to: string): void;
}) {
  const { agents, nodes, domains, errors, loaded } = dashboard.data;
  const now = useNow();
  const [busy, setBusy] = useState<string>();
  const [notes, setNotes] = useState<Record<string, { ok: boolean; text: string }>>({});
  const [terminal, setTerminal] = useState<{ id: string; label: string }>();
  const nodeOf = useMemo(() => new Map(nodes.map((n) => [n.id, n])), [nodes]);
  const domainName = useMemo(() => new Map(domains.map((d) => [d.id, d.name])), [domains]);

  const supervise = async (agentId: string, op: string) => {
    setBusy(`${agentId}:${op}`);
    try {
      await api.agents.superviseAgent({ agentId, op });
      setNotes((s) => ({ ...s, [agentId]: { ok: true, text: `${op} sent` } }));
      dashboard.refresh("fleet");
    } catch (err) {
      setNotes((s) => ({ ...s, [agentId]: { ok: false, text: `${op} failed: ${describeError(err)}` } }));
    } finally {
      setBusy(undefined);
    }
  };

  // the task each agent is running, from the dashboard's tasks
  const runningOf = useMemo(() => {
    const m = new Map<string, { id: string; title: string }>();
    for (const t of dashboard.data.tasks)
      if (t.claimedBy && (statusOf(t) === "claimed" || statusOf(t) === "running"))
        m.set(t.claimedBy, { id: t.id, title: t.title });
    return m;
  }, [dashboard.data.tasks]);

  return (
    <section className="tab-panel" aria-labelledby="agents-heading">
      <div className="panel-head">
        <h2 id="agents-heading">Agents</h2>
        <span className="muted">
          {agents.length} agent{agents.length === 1 ? "" : "s"} on {nodes.length} node{nodes.length === 1 ? "" : "s"}
        </span>
      </div>
      <ErrorNote error={errors.fleet} />
      {loaded.fleet && agents.length === 0 && (
        <Empty>
          No agents enrolled. On a node: `ep daemon agent enroll --domain &lt;id&gt; --runtime &lt;runtime&gt;`.
        </Empty>
      )}
      {agents.length > 0 && (
        <div className="table-scroll" tabIndex={0} role="region" aria-label="Agents">
          <table className="agents">
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col">Node</th>
                <th scope="col" className="col-opt">
                  Runtime
                </th>
                <th scope="col">State</th>
                <th scope="col" className="col-opt">
                  Running
                </th>
                <th scope="col" className="col-opt">
                  Last seen
                </th>
                {canOperate && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {agents.map((a) => {
                const node = nodeOf.get(a.nodeId);
                const note = notes[a.id];
                const linked = node?.status === NodeStatus.ONLINE;
                // what the agent is now: offline when its node is not linked, else what the node reports
                const state = agentStateOf(a) === "dead" ? "dead" : !linked ? "offline" : agentStateOf(a);
                const running = runningOf.get(a.id);
                return (
                  <tr key={a.id} data-agent-id={a.id}>
                    <td>
                      <strong title={a.id}>{a.name || a.id}</strong>
                      <CopyId id={a.id} />
                      <div className="muted small">{domainName.get(a.domainId) ?? a.domainId}</div>
                    </td>
                    <td>{node?.hostname ?? (a.nodeId || "—")}</td>
                    <td className="col-opt" title={runtimeWord(a.runtime)}>
                      {runtimeLabel(runtimeWord(a.runtime))}
                    </td>
                    <td>
                      <StatusBadge status={state} />
                      {a.supervised && <div className="muted small">supervised</div>}
                    </td>
                    <td className="col-opt">
                      {running ? (
                        <a
                          href={`/ui/tasks/${running.id}`}
                          onClick={(e) => {
                            if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
                            e.preventDefault();
                            navigate(`/ui/tasks/${running.id}`);
                          }}
                        >
                          {running.title}
                        </a>
                      ) : (
                        <span className="muted">—</span>
                      )}
                    </td>
                    <td className="col-opt">
                      {linked && state !== "dead" ? (
                        <span title="its node is connected now">connected</span>
                      ) : (
                        <Ago iso={isoOf(a.lastSeenAt)} now={now} />
                      )}
                    </td>
                    {canOperate && (
                      <AgentActions
                        agent={a}
                        linked={linked}
                        state={state}
                        busy={busy !== undefined}
                        note={note}
                        onTerminal={() => setTerminal({ id: a.id, label: a.name || a.id })}
                        onSupervise={(op) => void supervise(a.id, op)}
                      />
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {terminal && (
        <TerminalPanel
          key={terminal.id}
          agentId={terminal.id}
          label={terminal.label}
          onClose={() => setTerminal(undefined)}
        />
      )}
    </section>
  );
}

/**
 * What an operator can do with an agent: a terminal while its node is linked; restart, pause and resume when
 * supervised.
 */
function AgentActions(props: {
  agent: Agent;
  linked: boolean;
  state: string;
  busy: boolean;
  note: { ok: boolean; text: string } | undefined;
  onTerminal(): void;
  onSupervise(op: string): void;
}) {
  const { agent, linked, state, busy, note, onTerminal, onSupervise } = props;
  return (
    <td>
      <div className="button-row" role="group" aria-label={`Actions for ${agent.name || agent.id}`}>
        {linked && state !== "dead" && (
          <button type="button" className="btn btn-small" onClick={onTerminal}>
            Terminal
          </button>
        )}
        {agent.supervised &&
          OPS.filter(({ op }) =>
            op === "pause"
              ? agentStateOf(agent) !== "paused"
              : op === "resume"
                ? agentStateOf(agent) === "paused"
                : true,
          ).map(({ op, label }) => (
            <button
              key={op}
              type="button"
              className="btn btn-small"
              disabled={busy || !linked}
              title={linked ? undefined : "its node is not connected"}
              onClick={() => onSupervise(op)}
            >
              {label}
            </button>
          ))}
      </div>
      {note && <div className={note.ok ? "muted small" : "error-text small"}>{note.text}</div>}
    </td>
  );
}
