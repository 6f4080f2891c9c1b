// Agents tab: where each agent runs, its runtime and state, when it was last seen, and the
// supervision actions (restart, pause auto-restart, resume) forwarded to its node.
import { useMemo, useState } from "react";
import { api, describeError } from "./api.js";
import type { Dashboard } from "./dashboard.js";
import { TerminalPanel } from "./terminal/index.js";
import { Ago, Empty, ErrorNote, StatusBadge, useNow } from "./ui.js";

const OPS = [
  { op: "restart", label: "Restart" },
  { op: "pause", label: "Pause" },
  { op: "resume", label: "Resume" },
] as const;

export function AgentsView({ dashboard, canOperate }: { dashboard: Dashboard; canOperate: boolean }) {
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

  return (
    <section className="tab-panel" aria-labelledby="agents-heading">
      <div className="panel-head">
        <h2 id="agents-heading">Agents</h2>
        <span className="muted">
          {agents.length} agent{agents.length === 1 ? "" : "s"} on {nodes.length} node{nodes.length === 1 ? "" : "s"}
        </span>
      </div>
      <ErrorNote error={errors.fleet} />
      {loaded.fleet && agents.length === 0 && <Empty>No agents enrolled. On a node: `ep daemon agent enroll --domain &lt;id&gt; --runtime &lt;runtime&gt;`.</Empty>}
      {agents.length > 0 && (
        <div className="table-scroll" tabIndex={0} role="region" aria-label="Agents">
          <table className="agents">
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col">Node</th>
                <th scope="col" className="col-opt">Runtime</th>
                <th scope="col">State</th>
                <th scope="col" className="col-opt">Last seen</th>
                {canOperate && <th scope="col">Supervise</th>}
              </tr>
            </thead>
            <tbody>
              {agents.map((a) => {
                const node = nodeOf.get(a.nodeId);
                const note = notes[a.id];
                return (
                  <tr key={a.id} data-agent-id={a.id}>
                    <td>
                      <strong>{a.name || a.id}</strong>{" "}
                      <button type="button" className="btn btn-small" onClick={() => setTerminal({ id: a.id, label: a.name || a.id })}>
                        Terminal
                      </button>
                      <div className="muted small">
                        <code>{a.id}</code> · {domainName.get(a.domainId) ?? a.domainId}
                      </div>
                    </td>
                    <td>
                      {node?.hostname ?? (a.nodeId || "—")}
                      {node && (
                        <div>
                          <StatusBadge status={node.status} />
                        </div>
                      )}
                    </td>
                    <td className="col-opt">{a.runtime}</td>
                    <td>
                      <StatusBadge status={a.state} />
                    </td>
                    <td className="col-opt">
                      <Ago iso={a.lastSeenAt} now={now} />
                    </td>
                    {canOperate && (
                      <td>
                        <div className="button-row" role="group" aria-label={`Supervise ${a.name || a.id}`}>
                          {OPS.map(({ op, label }) => (
                            <button key={op} type="button" className="btn btn-small" disabled={busy !== undefined} onClick={() => void supervise(a.id, op)}>
                              {label}
                            </button>
                          ))}
                        </div>
                        {note && <div className={note.ok ? "muted small" : "error-text small"}>{note.text}</div>}
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {terminal && <TerminalPanel key={terminal.id} agentId={terminal.id} label={terminal.label} onClose={() => setTerminal(undefined)} />}
    </section>
  );
}
