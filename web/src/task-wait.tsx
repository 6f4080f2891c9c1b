// Why a queued task waits (GetTaskResponse.wait, computed by the tower on each read), and, when
// no agent serves the domain and this machine's node is linked, a button that enrolls a shell
// agent there (AgentService.EnrollAgent with node_id; admins only, as the API has it).
import { useState } from "react";
import { Runtime } from "@gen/ep/tower/v1/resources_pb.js";
import { TaskWaitReason, type TaskWait } from "@gen/ep/tower/v1/work_pb.js";
import { api, describeError } from "./api.js";

const HEADLINE: Record<TaskWaitReason, string> = {
  [TaskWaitReason.UNSPECIFIED]: "Waiting",
  [TaskWaitReason.NO_AGENT_IN_DOMAIN]: "No agent serves this domain",
  [TaskWaitReason.NO_AGENT_WITH_RUNTIME]: "No agent with this runtime",
  [TaskWaitReason.NO_AGENT_WITH_CAPABILITIES]: "No agent with these capabilities",
  [TaskWaitReason.AGENTS_BUSY]: "All its agents are busy",
  [TaskWaitReason.NODE_OFFLINE]: "Its agents' nodes are offline",
  [TaskWaitReason.AGENTS_UNAVAILABLE]: "Its agents are not ready",
  [TaskWaitReason.AGENT_IDLE]: "About to be handed to an agent",
  [TaskWaitReason.APPROVAL]: "Waiting for an approval",
  [TaskWaitReason.ASSIGNEE_MISSING]: "Its assignee is gone",
  [TaskWaitReason.PARENTS]: "Waiting for the tasks before it",
};

export function TaskWaitNote({
  wait,
  domainId,
  nodeName,
  canAdmin,
  onEnrolled,
}: {
  wait: TaskWait;
  domainId: string;
  nodeName: Map<string, string>;
  canAdmin: boolean;
  onEnrolled(): void;
}) {
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<{ ok: boolean; text: string }>();
  const node = wait.enrollNodeId;
  const enroll = async () => {
    setBusy(true);
    setNote(undefined);
    try {
      const res = await api.agents.enrollAgent({ domainId, runtime: Runtime.SHELL, nodeId: node, name: "shell" });
      setNote({
        ok: true,
        text:
          `Enrolled ${res.agent?.name || res.agent?.id} on ` +
          `${nodeName.get(node) ?? node}; the task is handed to it.`,
      });
      onEnrolled();
    } catch (err) {
      setNote({ ok: false, text: `Enroll failed: ${describeError(err)}` });
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="task-wait" aria-labelledby="wait-heading" data-wait-reason={TaskWaitReason[wait.reason]}>
      <h3 id="wait-heading">{HEADLINE[wait.reason] ?? HEADLINE[TaskWaitReason.UNSPECIFIED]}</h3>
      <p className="small">{wait.message}</p>
      {node && canAdmin && !note?.ok && (
        <button type="button" className="btn btn-primary" disabled={busy} onClick={() => void enroll()}>
          Enroll a shell agent on {nodeName.get(node) ?? node}
        </button>
      )}
      {note && (
        <p className={note.ok ? "muted small" : "error-note"} role={note.ok ? "status" : "alert"}>
          {note.text}
        </p>
      )}
    </section>
  );
}
