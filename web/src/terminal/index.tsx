// The Agents tab's terminal: a panel that loads xterm.js only when an operator opens it.
import { lazy, Suspense } from "react";

const AgentTerminal = lazy(() => import("./agent-terminal.js"));

export function TerminalPanel({ agentId, label, onClose }: { agentId: string; label: string; onClose(): void }) {
  return (
    <section className="terminal-panel" aria-label={`Terminal of ${label}`}>
      <div className="panel-head">
        <h3>Terminal · {label}</h3>
        <button type="button" className="btn btn-small" onClick={onClose}>
          Close
        </button>
      </div>
      <Suspense fallback={<div className="muted small">loading the terminal…</div>}>
        <AgentTerminal agentId={agentId} />
      </Suspense>
    </section>
  );
}
