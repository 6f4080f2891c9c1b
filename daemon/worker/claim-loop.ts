// Claiming: one claim at a time per local agent (idle → claiming → busy), a wake-up during a claim
// makes it look once more, and a wake-up for a domain picks an idle agent that can take the task
// (rotating, so work spreads). A claimed task is handed to `start`.
import { toEpError } from "../../common/errors.js";
import type { Task } from "../../gen/ep/tower/v1/resources_pb.js";
import type { LocalAgentRecord } from "./agent-store.js";
import type { Slot, WakeHint, WorkerDeps, WorkerState } from "./worker-types.js";
import { createPushedTasks, ranHere } from "./pushed-tasks.js";

export function createClaimLoop(deps: WorkerDeps, st: WorkerState, start: (agent: LocalAgentRecord, slot: Slot, task: Task) => void) {
  const { tower, agents, log } = deps;
  let rotate = 0;

  /** Everyone who claims here: agents.json, then the enrolled profiles. */
  const allAgents = (): LocalAgentRecord[] => {
    const own = agents.list();
    const ids = new Set(own.map((a) => a.id));
    return [...own, ...(deps.profiles?.list() ?? []).filter((p) => !ids.has(p.id))];
  };
  const findAgent = (id: string): LocalAgentRecord | undefined => agents.find(id) ?? deps.profiles?.list().find((p) => p.id === id);

  const slotOf = (agentId: string): Slot => {
    let s = st.slots.get(agentId);
    if (!s) st.slots.set(agentId, (s = { state: "idle", again: false }));
    return s;
  };

  const { handBack, settlePushed, take } = createPushedTasks(deps, st, { findAgent, slotOf, start });

  /**
   * Claims for one agent; the id of the task it got, or undefined. With `resume` (start, hello) the tower
   * answers first with a task the agent already holds that this daemon never heard of.
   */
  async function claimFor(agent: LocalAgentRecord, resume = false): Promise<string | undefined> {
    const slot = slotOf(agent.id);
    if (resume) slot.resume = true;
    if (st.stopping || st.blocked.has(agent.id)) return undefined;
    if (slot.state !== "idle") {
      if (slot.state === "claiming") slot.again = true;
      return undefined;
    }
    slot.state = "claiming";
    for (;;) {
      slot.again = false;
      const resuming = slot.resume === true || deps.resumeEveryClaim === true;
      slot.resume = false;
      let task: Task | undefined;
      try {
        // the claim is also the start (no StartTask call): the task comes back running
        task = (await tower.work.claimTask({ agentId: agent.id, start: true, resume: resuming })).task;
      } catch (err) {
        const e = toEpError(err);
        // its answer may have been lost with a task in it: the next claim asks for it first
        slot.resume = true;
        log.warn("claim failed", { agent_id: agent.id, code: e.code, error: e.message });
        slot.state = "idle";
        return settlePushed(agent, slot, false);
      }
      // the tower pushed this very task while the claim (resume) was on its way: one run of it
      if (task && slot.pushed?.id === task.id) slot.pushed = undefined;
      // a resumed claim answering a claim that already ran here (pushed, run, its outcome still
      // on its way to the tower, which marks the agent idle when it lands): nothing new to run, and
      // no claim again until then (it would get the same answer)
      if (task && ranHere(st, task)) {
        log.debug("a resumed claim answered a task that already ran here; not run again", { agent_id: agent.id, task_id: task.id, attempt: task.attempts });
        slot.state = "idle";
        return settlePushed(agent, slot, false);
      }
      if (task && st.stopping) {
        slot.state = "idle";
        settlePushed(agent, slot, true);
        await handBack(agent, task);
        return undefined;
      }
      if (task) {
        slot.state = "busy";
        slot.taskId = task.id;
        settlePushed(agent, slot, true);
        start(agent, slot, task);
        return task.id;
      }
      if (!slot.again || st.stopping || slot.pushed) {
        // nothing queued for this agent right now (or the tower pushed it one meanwhile)
        st.backlog.delete(agent.domainId);
        slot.state = "idle";
        return settlePushed(agent, slot, false);
      }
    }
  }

  const canTake = (a: LocalAgentRecord, hint: WakeHint) =>
    hint.runtime === undefined || ((!hint.runtime || hint.runtime === a.runtime) && (hint.capabilities ?? []).every((c) => a.capabilities.includes(c)));

  async function wakeDomain(hint: WakeHint): Promise<void> {
    const list = allAgents().filter((a) => (!hint.domainId || a.domainId === hint.domainId) && canTake(a, hint));
    if (!list.length) return;
    const first = rotate++ % list.length;
    const ordered = [...list.slice(first), ...list.slice(0, first)];
    const idle = ordered.filter((a) => slotOf(a.id).state === "idle" && !st.blocked.has(a.id));
    if (!idle.length) {
      // every agent that could take it is claiming or busy: the claiming ones look once more,
      // and the next one to finish a run claims again
      for (const a of ordered) if (slotOf(a.id).state === "claiming") slotOf(a.id).again = true;
      for (const a of ordered) st.backlog.add(a.domainId);
      return;
    }
    if (hint.runtime === undefined) {
      // the tower did not say what the task needs: idle agents try one after the other
      for (const a of idle) if (await claimFor(a)) return;
      return;
    }
    // One claim per ready task, by an idle agent that can take it. Empty means another claimer
    // took it; a different task (an older or higher-priority one) means this one may still be
    // queued, so the next idle agent tries.
    for (const a of idle) {
      const got = await claimFor(a);
      if (!got || !hint.taskId || got === hint.taskId) return;
    }
  }

  return { allAgents, findAgent, slotOf, claimFor, wakeDomain, handBack, take };
}
