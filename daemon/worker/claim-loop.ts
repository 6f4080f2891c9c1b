// epd's own claim, the recovery path: while its link is down (docs/daemon.md, "How work reaches a
// node"), each idle agent claims on the poll. A claimed task is handed to `start` under its lease;
// one that comes back after the link handed the agent a task meanwhile goes back.
import { toEpError } from "../../common/errors.js";
import type { Task } from "../../gen/ep/tower/v1/resources_pb.js";
import type { LocalAgentRecord } from "./agent-store.js";
import type { Slot, WorkerDeps, WorkerState } from "./worker-types.js";

export function createClaimLoop(
  deps: WorkerDeps,
  st: WorkerState,
  start: (agent: LocalAgentRecord, slot: Slot, task: Task) => void,
  giveBack: (agent: { id: string }, task: Task, why: string) => Promise<void>,
) {
  const { tower, agents, log } = deps;

  /** Everyone who claims here: agents.json, then the enrolled profiles. */
  const allAgents = (): LocalAgentRecord[] => {
    const own = agents.list();
    const ids = new Set(own.map((a) => a.id));
    return [...own, ...(deps.profiles?.list() ?? []).filter((p) => !ids.has(p.id))];
  };
  const findAgent = (id: string): LocalAgentRecord | undefined =>
    agents.find(id) ?? deps.profiles?.list().find((p) => p.id === id);

  const slotOf = (agentId: string): Slot => {
    let s = st.slots.get(agentId);
    if (!s) st.slots.set(agentId, (s = { state: "idle" }));
    return s;
  };

  /** One claim for an idle agent; the id of the task it got, or undefined. */
  async function claimFor(agent: LocalAgentRecord): Promise<string | undefined> {
    const slot = slotOf(agent.id);
    if (st.stopping || slot.state !== "idle") return undefined;
    slot.state = "claiming";
    let task: Task | undefined;
    try {
      // the claim is also the start: the task comes back running, its lease in task.leaseId
      task = (await tower.work.claimTask({ agentId: agent.id, start: true })).task;
    } catch (err) {
      const e = toEpError(err);
      log.warn("claim failed", { agent_id: agent.id, code: e.code, error: e.message });
    }
    if (slot.state !== "claiming" || st.stopping) {
      // the link handed the agent a task meanwhile (or epd is stopping): this one goes back
      if (task) await giveBack(agent, task, st.stopping ? "epd is shutting down" : "the agent took another task");
      if (slot.state === "claiming") slot.state = "idle";
      return undefined;
    }
    if (!task) {
      slot.state = "idle";
      return undefined;
    }
    slot.state = "busy";
    slot.taskId = task.id;
    start(agent, slot, task);
    return task.id;
  }

  return { allAgents, findAgent, slotOf, claimFor };
}
