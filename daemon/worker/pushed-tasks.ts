// Tasks the tower pushes over the link, claimed and started for an agent it saw idle (docs/daemon.md,
// "Pushed work"): run at once on an idle slot, kept while the slot claims or reports, otherwise
// given back with FailTask release (queued again, the attempt not counted).
import type { Task } from "../../gen/ep/tower/v1/resources_pb.js";
import type { LocalAgentRecord } from "./agent-store.js";
import type { Slot, WorkerDeps, WorkerState } from "./worker-types.js";

/** How many started tasks WorkerState.ran remembers: far more than can be in flight at once. */
export const RAN_KEPT = 1024;

/**
 * What tells one claim of a task from another: its attempt and the time the claim (or its start)
 * was written. Two copies of one claim (the push, and a resumed claim's answer) carry both alike;
 * a new claim writes a new time — including after an operator's retry, which sets the attempts
 * back to 0, and after a give-back, which takes one attempt back.
 */
const claimKey = (task: Task): string => `${task.attempts}@${task.updatedAt?.seconds ?? 0n}.${task.updatedAt?.nanos ?? 0}`;

/** Notes that this claim of the task runs here. */
export function noteRun(st: WorkerState, task: Task): void {
  st.ran.delete(task.id);
  st.ran.set(task.id, claimKey(task));
  if (st.ran.size > RAN_KEPT) st.ran.delete(st.ran.keys().next().value!);
}

/**
 * Whether this very claim of the task was already started here: a second delivery of one claim
 * (the push of a task that a claim with resume took up first, arriving once that run had ended, or
 * the resumed claim's answer while the run's outcome is on its way), not a new one.
 */
export function ranHere(st: WorkerState, task: Task): boolean {
  return st.ran.get(task.id) === claimKey(task);
}

export function createPushedTasks(
  deps: WorkerDeps,
  st: WorkerState,
  { findAgent, slotOf, start }: { findAgent(id: string): LocalAgentRecord | undefined; slotOf(agentId: string): Slot; start(agent: LocalAgentRecord, slot: Slot, task: Task): void },
) {
  const { tower, log } = deps;

  /**
   * A task this daemon holds but will not run goes straight back, queued again without counting
   * the attempt (release; a tower without it counts a retryable failure). If the tower does not
   * hear it, the lease expires.
   */
  async function handBack(agent: { id: string }, task: Task, why = "epd is shutting down"): Promise<void> {
    await tower.work.failTask({ taskId: task.id, agentId: agent.id, release: true, retryable: true, brief: true, result: { output: "", error: why } }).catch(() => undefined);
  }

  /** A pushed task that waited for the slot's claim: it runs if the claim found nothing, else it goes back. */
  function settlePushed(agent: LocalAgentRecord, slot: Slot, claimed: boolean): string | undefined {
    const pushed = slot.pushed;
    slot.pushed = undefined;
    if (!pushed) return undefined;
    if (claimed || st.stopping || slot.state !== "idle") return void handBack(agent, pushed, st.stopping ? "epd is shutting down" : "the agent claimed another task");
    slot.state = "busy";
    slot.taskId = pushed.id;
    start(agent, slot, pushed);
    return pushed.id;
  }

  function take(agentId: string, task: Task): void {
    const agent = findAgent(agentId);
    if (!agent) {
      log.warn("the tower pushed a task for an agent not on this node; giving it back", { agent_id: agentId, task_id: task.id });
      return void handBack({ id: agentId }, task, "the agent is not on this node");
    }
    const slot = slotOf(agent.id);
    // already running here: a claim with resume took it up before its push arrived
    const run = st.runs.get(task.id);
    if ((run && !run.reporting) || slot.pushed?.id === task.id) return;
    // this very claim ran here already (a resumed claim took it up and the run has ended or is
    // reporting): its outcome is the tower's answer, not a second run; a new claim of the task
    // (pushed again after a retryable failure) waits below like any other
    if (ranHere(st, task)) return void log.debug("a pushed task already ran here; not run again", { agent_id: agentId, task_id: task.id, attempt: task.attempts });
    // the outcome of the slot's run is on its way: the tower, which has it, saw the agent idle
    const reporting = slot.state === "busy" && slot.taskId !== undefined && st.runs.get(slot.taskId)?.reporting === true;
    if (reporting && !slot.pushed && !st.stopping) {
      slot.pushed = task;
      return;
    }
    if (st.stopping || st.blocked.has(agent.id) || slot.state === "busy" || slot.pushed) {
      // the tower thought the agent idle: work may be queued for it after this run
      if (slot.state === "busy") st.backlog.add(agent.domainId);
      return void handBack(agent, task, st.stopping ? "epd is shutting down" : "the agent is busy");
    }
    if (slot.state === "claiming") {
      slot.pushed = task;
      return;
    }
    slot.state = "busy";
    slot.taskId = task.id;
    start(agent, slot, task);
  }

  return { handBack, settlePushed, take };
}
