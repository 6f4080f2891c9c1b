// What the daemon does with a command from the tower's link (fleet.proto LinkResponse): a task
// assignment goes to the worker (the one way work arrives), cancel stops a run, signal and
// supervise reach an agent (a profile's through the fleet), config_reload re-reads the files,
// attach dials back to the tower, merge merges a task's branch here (daemon/worker/merge-requests.ts).
import type { Logger } from "../common/log.js";
import type { LinkResponse } from "../gen/ep/tower/v1/fleet_pb.js";
import type { AttachGateway } from "./attach/index.js";
import type { Fleet } from "./fleet/fleet.js";
import type { AgentStore } from "./worker/agent-store.js";
import type { createMergeRequests } from "./worker/merge-requests.js";
import type { createSignalRunner } from "./worker/signal-runner.js";
import type { TaskWorker } from "./worker/worker.js";

export interface LinkCommandTargets {
  fleet: Pick<Fleet, "handleLink">;
  worker: Pick<TaskWorker, "cancel" | "take">;
  agents: Pick<AgentStore, "find">;
  signals: Pick<ReturnType<typeof createSignalRunner>, "deliver">;
  attach: Pick<AttachGateway, "handleLink">;
  merges: Pick<ReturnType<typeof createMergeRequests>, "handle">;
  log: Logger;
  /**
   * Makes an agent enrolled at the tower for this node (the console's enroll, an admin's
   * EnrollAgent with node_id) known here before its first task runs; resolves either way.
   */
  adopt?: (agentId: string) => Promise<void>;
  /** commands this daemon does not handle (tests) */
  other?: (msg: LinkResponse) => void;
}

export function routeLinkCommand(msg: LinkResponse, t: LinkCommandTargets): void {
  const { fleet, worker, agents, signals, attach, log } = t;
  if (fleet.handleLink(msg)) return; // signal/supervise for a profile agent, config_reload
  const c = msg.command;
  switch (c.case) {
    case "assign":
      if (!c.value.task) return log.warn("a task assignment without its task", { agent_id: c.value.agentId });
      if (!agents.find(c.value.agentId) && t.adopt) {
        const { agentId, task, parents } = c.value;
        void t.adopt(agentId).then(() => worker.take(agentId, task, parents)); // adopt never rejects
        return;
      }
      worker.take(c.value.agentId, c.value.task, c.value.parents);
      return;
    case "cancel":
      worker.cancel(c.value.taskId, c.value.reason || "cancelled on the tower");
      return;
    case "signal": {
      const agent = agents.find(c.value.agentId);
      if (!agent) return log.warn("signal for an agent not on this node", { agent_id: c.value.agentId });
      try {
        signals.deliver(agent, c.value.prompt);
      } catch (err) {
        log.warn("signal not delivered", { agent_id: agent.id, error: (err as Error).message });
      }
      return;
    }
    case "attach":
      attach.handleLink(c.value);
      return;
    case "merge":
      void t.merges.handle(c.value); // answers with an event; never rejects
      return;
    default:
      if (t.other) t.other(msg);
      else log.info("link command not handled by this daemon", { command: c.case ?? "unknown" });
  }
}
