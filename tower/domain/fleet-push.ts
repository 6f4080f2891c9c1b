// Pushed work (docs/daemon.md, "Pushed work"): a queued task, claimed and started for an idle agent
// of a node whose link takes tasks (LinkRequest.take_tasks), travels as the wake-up itself, so the
// daemon needs no ClaimTask. The claim is authorized as the node's own would be. A claim that found
// a different task (an older or higher-priority one) leaves the first maybe queued: its nodes get
// the task_ready they would have had; so do they when the claim failed. A task that cannot be sent
// (the link went away) goes back to the queue uncounted (work-push.ts).
import type { EpError } from "../../common/errors.js";
import type { TaskRow } from "../store/store.js";
import { authorize, type Caller } from "./caller.js";
import { taskMsg } from "./convert.js";
import type { Deps } from "./deps.js";
import type { FleetOptions } from "./fleet.js";
import type { Send } from "./fleet-links.js";
import type { PushTarget, WakeIndex } from "./fleet-wake.js";
import { AgentNotIdle } from "./work-context.js";

interface Hint {
  taskId: string;
  runtime: string;
  capabilities: readonly string[];
}

/** The wakeUps() hook: true when the task is being pushed to an idle agent (no task_ready for it). */
export function createPusher(
  deps: Deps,
  work: NonNullable<FleetOptions["work"]>,
  { reach, send, nodeCaller, takes }: { reach: WakeIndex; send: Send; nodeCaller?: (nodeId: string) => Promise<Caller>; takes: (nodeId: string) => boolean },
) {
  async function pushTask(a: PushTarget, hint: Hint): Promise<void> {
    let t: TaskRow | undefined;
    let failed = false;
    try {
      // as the node's own ClaimTask would be: only in a domain the node serves now
      if (nodeCaller) authorize(await nodeCaller(a.nodeId), "work", { domainId: a.domainId });
      t = await work.claimStarted(a);
    } catch (err) {
      failed = true;
      if (err instanceof AgentNotIdle) {
        // the node's own claim took the agent first: it is busy, as its event will say
        reach.setState(a.id, "busy");
      } else if ((err as EpError).code !== "forbidden") {
        // forbidden: the node no longer serves the domain (its agents' claims are refused alike)
        deps.log.warn("claiming for a node's idle agent failed; its nodes are woken instead", { agent_id: a.id, error: (err as Error).message });
      }
    }
    if (!t) reach.unclaim(a.id);
    if (failed || (t !== undefined && t.id !== hint.taskId)) {
      const data = { domain_id: a.domainId, runtime: hint.runtime, capabilities: [...hint.capabilities] };
      for (const n of reach.nodesFor(a.domainId, hint.runtime, hint.capabilities)) send(n, { kind: "task_ready", taskId: hint.taskId, data });
    }
    if (!t) return;
    if (send(a.nodeId, { kind: "task", taskId: t.id, agentId: a.id, task: taskMsg(t) })) return;
    const id = t.id;
    await work.releaseClaimed(a, id).catch((err: Error) =>
      deps.log.warn("a task claimed for a node that went away could not be given back (its lease expires)", { task_id: id, error: err.message }),
    );
  }

  return (taskId: string, domainId: string, runtime: string, capabilities: readonly string[]): boolean => {
    const a = reach.claimable(domainId, runtime, capabilities, takes);
    if (a) void pushTask(a, { taskId, runtime, capabilities });
    return a !== undefined;
  };
}
