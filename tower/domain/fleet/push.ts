// Handing work to nodes (docs/daemon.md, "How work reaches a node"): the one way a task reaches a
// node. The tower claims and starts a task for an idle agent of a node linked here and sends it
// over the link (TaskAssignment), its lease in the task. It happens when work may meet an idle
// agent: a task queued (an idle agent that can take it is picked, idle the longest first), an agent
// idle again (its outcome, or its link opened), an assigned task queued for an idle assignee. The
// claim is authorized as the node's own would be. A task that cannot be sent (the link went away)
// goes back to the queue uncounted (work/push.ts).
import { create } from "@bufbuild/protobuf";
import type { EpError } from "../../../common/errors.js";
import * as fleet from "../../../gen/ep/tower/v1/fleet_pb.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import type { FleetOptions } from "./options.js";
import type { PushTarget, WakeIndex } from "./wake.js";
import { AgentNotIdle, assignment } from "../work/index.js";
import type { ClaimedTask } from "../work/types.js";

export type Offers = ReturnType<typeof createOffers>;

export function createOffers(
  deps: Deps,
  work: NonNullable<FleetOptions["work"]>,
  {
    reach,
    push,
    nodeCaller,
    cachedNodeCaller,
  }: {
    reach: WakeIndex;
    push: (nodeId: string, msg: fleet.LinkResponse) => boolean;
    nodeCaller?: (nodeId: string) => Promise<Caller>;
    cachedNodeCaller?: (nodeId: string) => Caller | undefined;
  },
) {
  /**
   * Claims the agent's next task and sends it; the task sent, or undefined when there was none (or it could not go).
   */
  async function handTo(a: PushTarget): Promise<ClaimedTask | undefined> {
    let t: ClaimedTask | undefined;
    const mark = reach.queuedMark(a.domainId);
    try {
      // as the node's own ClaimTask would be: only in a domain the node serves now
      if (nodeCaller) authorize(await nodeCaller(a.nodeId), "work", { domainId: a.domainId });
      t = await work.claimStarted(a);
    } catch (err) {
      if (err instanceof AgentNotIdle)
        reach.setState(a.id, "busy"); // as its event will say
      else {
        reach.unclaim(a.id);
        // forbidden: the node no longer serves the domain
        if ((err as EpError).code !== "forbidden")
          deps.log.warn("claiming for a node's idle agent failed", { agent_id: a.id, error: (err as Error).message });
      }
      return undefined;
    }
    if (!t) {
      reach.unclaim(a.id);
      // a task queued while this claim looked may have missed it, and its offer skipped the
      // agent (claiming): look again
      if (reach.queuedMark(a.domainId) !== mark) offerAgent(a.id);
      return undefined;
    }
    if (push(a.nodeId, create(fleet.LinkResponseSchema, { command: { case: "assign", value: assignment(a.id, t) } })))
      return t;
    const id = t.id;
    await work.releaseClaimed(a, id).catch((err: Error) =>
      deps.log.warn("a task claimed for a node that went away could not be given back (its lease expires)", {
        task_id: id,
        error: err.message,
      }),
    );
    return undefined;
  }

  /**
   * A task was queued: idle agents that can take it claim until one gets it. A claim may get an
   * older or higher-priority task instead; this one may then still be queued, so the next idle
   * agent tries.
   */
  async function offerTask(
    taskId: string,
    domainId: string,
    runtime: string,
    capabilities: readonly string[],
  ): Promise<void> {
    for (;;) {
      const a = reach.claimable(domainId, runtime, capabilities);
      if (!a) return;
      const t = await handTo(a);
      if (!t || t.id === taskId) return;
    }
  }

  /**
   * For a task being created (work/push.ts, claimForNew), inside its commit: the idle agent that would be offered it,
   * marked as being claimed for, when its node may take work in the domain now; undefined when there is none. Nothing
   * is read (a read outside the commit would wait for it): a node whose caller is not at hand is left to the offer.
   */
  function pick(domainId: string, runtime: string, capabilities: readonly string[]): PushTarget | undefined {
    const a = reach.claimable(domainId, runtime, capabilities);
    if (!a) return undefined;
    try {
      if (nodeCaller) {
        const caller = cachedNodeCaller?.(a.nodeId);
        if (!caller) throw new Error("not at hand");
        authorize(caller, "work", { domainId: a.domainId });
      }
    } catch {
      reach.unclaim(a.id); // the offer reads the caller, or says the node no longer serves the domain
      return undefined;
    }
    return a;
  }

  /** The agent may take work (idle again, or its link opened): its next task, if one is queued. */
  function offerAgent(agentId: string): void {
    const a = reach.take(agentId);
    if (a) void handTo(a);
  }

  return {
    offerTask: (taskId: string, domainId: string, runtime: string, capabilities: readonly string[]) =>
      void offerTask(taskId, domainId, runtime, capabilities),
    offerAgent,
    pick,
  };
}
