// Nodes, agents and the node link: the one outbound stream from each epd over which the tower
// hands work and sends commands (cancel, signal, supervise, attach). The parts: fleet-nodes.ts,
// fleet-agents.ts, fleet-links.ts (links, routing, relays), fleet-wake.ts (who can take work), fleet-push.ts (handing it over).
import type { Auth } from "./auth.js";
import type { Caller } from "./caller.js";
import type { CompleteTaskRequest, FailTaskRequest, ReportProgressRequest } from "../../gen/ep/tower/v1/work_pb.js";
import type { Deps } from "./deps.js";
import type { Replication } from "./replication.js";
import { createWakeIndex, type PushTarget } from "./fleet-wake.js";
import type { ClaimedTask, Handoff } from "./work-push.js";
import { createLinkHub, type LinkStream } from "./fleet-links.js";
import { createNodeOps } from "./fleet-nodes.js";
import { createAgentOps } from "./fleet-agents.js";

export type { LinkStream };

export { createWakeIndex };

export type FleetService = ReturnType<typeof createFleetService>;

export interface FleetOptions {
  towerUrl: string;
  pingMs?: number;
  /** Several replicas (PostgreSQL): link ownership in the store, commands relayed to the owner. */
  replication?: Pick<Replication, "linked" | "send" | "linkToken">;
  /** Claims for an idle agent, gives back what could not be handed over, squares a new link with its daemon (work-push.ts). */
  work?: {
    claimStarted(a: PushTarget): Promise<ClaimedTask | undefined>;
    releaseClaimed(a: PushTarget, taskId: string): Promise<void>;
    reconcile(nodeId: string, agents: readonly { agentId: string; leaseIds: readonly string[]; idle: boolean }[]): Promise<void>;
    /** Outcomes that arrive on a node's session (NodeService.Session), as the unary calls commit them. */
    completeTask(caller: Caller, req: CompleteTaskRequest): Promise<unknown>;
    failTask(caller: Caller, req: FailTaskRequest): Promise<unknown>;
    reportProgress(caller: Caller, req: ReportProgressRequest): Promise<unknown>;
    /** How an outcome's commit hands its agent the next task over this replica's links. */
    setHandoff?(h: Handoff): void;
  };
}

/** What the node and agent operations share. */
export interface FleetContext {
  deps: Deps;
  auth: Auth;
  opts: FleetOptions;
  linkHub: ReturnType<typeof createLinkHub>;
}

export function createFleetService(deps: Deps, auth: Auth, opts: FleetOptions) {
  // the node links this replica holds, routing and targeted wake-ups (fleet-links.ts)
  const linkHub = createLinkHub(deps, opts, (nodeId) => auth.nodeCaller(nodeId));
  const ctx: FleetContext = { deps, auth, opts, linkHub };
  return {
    close: linkHub.close,
    /** Whether this replica holds the node's link (linkedAnywhere: any replica). */
    isLinked: linkHub.isLinked,
    linkedCount: linkHub.linkedCount,
    /** The linked nodes a queued task in this domain would wake (tests, bench). */
    wakeTargets: linkHub.wakeTargets,
    attachSecretOf: linkHub.attachSecretOf,
    /** Pushes a command on a link this replica holds; false otherwise (deliver: any replica). */
    send: linkHub.send,
    deliver: linkHub.deliver,
    linkedAnywhere: linkHub.linkedAnywhere,
    link: linkHub.link,
    session: linkHub.session,
    ...createNodeOps(ctx),
    ...createAgentOps(ctx),
  };
}
