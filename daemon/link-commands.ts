// What the daemon does with a command from the tower's link: profile commands go to the fleet
// (signal, supervise, config_reload); task_ready wakes the worker (several tasks of one committed
// batch come coalesced in data.tasks); task brings one claimed and started for an idle agent; cancel stops a run; signal reaches an enrolled agent;
// attach dials back to the tower; merge merges a task's branch here (daemon/worker/merge-requests.ts).
import type { Logger } from "../common/log.js";
import type { LinkResponse } from "../gen/ep/tower/v1/fleet_pb.js";
import type { AttachGateway } from "./attach/index.js";
import type { Fleet } from "./fleet/fleet.js";
import type { AgentStore } from "./worker/agent-store.js";
import type { createMergeRequests } from "./worker/merge-requests.js";
import type { createSignalRunner } from "./worker/signal-runner.js";
import type { TaskWorker, WakeHint } from "./worker/worker.js";

export interface LinkCommandTargets {
  fleet: Pick<Fleet, "handleLink">;
  worker: Pick<TaskWorker, "wake" | "cancel" | "take">;
  agents: Pick<AgentStore, "find">;
  signals: Pick<ReturnType<typeof createSignalRunner>, "deliver">;
  attach: Pick<AttachGateway, "handleLink">;
  merges: Pick<ReturnType<typeof createMergeRequests>, "handle">;
  log: Logger;
  /** commands this daemon does not handle (tests) */
  other?: (msg: LinkResponse) => void;
}

export function routeLinkCommand(msg: LinkResponse, t: LinkCommandTargets): void {
  const { fleet, worker, agents, signals, attach, log } = t;
  if (fleet.handleLink(msg)) return; // signal/supervise for a profile agent, config_reload
  switch (msg.kind) {
    case "task_ready":
      for (const hint of wakeHints(msg)) worker.wake(hint);
      return;
    case "task":
      if (!msg.task) return log.warn("a pushed task without its task", { agent_id: msg.agentId, task_id: msg.taskId });
      worker.take(msg.agentId, msg.task);
      return;
    case "cancel":
      worker.cancel(msg.taskId, typeof msg.data?.reason === "string" ? msg.data.reason : "cancelled on the tower");
      return;
    case "signal": {
      const agent = agents.find(msg.agentId);
      const prompt = typeof msg.data?.prompt === "string" ? msg.data.prompt : "";
      if (!agent) return log.warn("signal for an agent not on this node", { agent_id: msg.agentId });
      try {
        signals.deliver(agent, prompt);
      } catch (err) {
        log.warn("signal not delivered", { agent_id: agent.id, error: (err as Error).message });
      }
      return;
    }
    case "attach":
      attach.handleLink(msg);
      return;
    case "merge":
      void t.merges.handle(msg); // answers with an event; never rejects
      return;
    default:
      if (t.other) t.other(msg);
      else log.info("link command not handled by this daemon", { kind: msg.kind, agent_id: msg.agentId });
  }
}

/** The wake-up hints of a task_ready command, one per task. */
export function wakeHints(msg: LinkResponse): WakeHint[] {
  const tasks: unknown[] = Array.isArray(msg.data?.tasks) ? msg.data.tasks : [{ ...msg.data, task_id: msg.taskId }];
  const hints: WakeHint[] = [];
  for (const t of tasks) {
    if (t === null || typeof t !== "object" || Array.isArray(t)) continue;
    const { domain_id, task_id, runtime, capabilities } = t as Record<string, unknown>;
    hints.push({
      agentId: msg.agentId || undefined,
      domainId: typeof domain_id === "string" && domain_id ? domain_id : undefined,
      taskId: typeof task_id === "string" && task_id ? task_id : undefined,
      runtime: typeof runtime === "string" ? runtime : undefined,
      capabilities: Array.isArray(capabilities) ? capabilities.filter((c): c is string => typeof c === "string") : undefined,
    });
  }
  return hints;
}
