// What the fleet is given (createFleetService): the tower's URL, the replicas' links, the work path.
import type { Caller } from "../caller.js";
import type { CompleteTaskRequest, FailTaskRequest, ReportProgressRequest } from "../../../gen/ep/tower/v1/work_pb.js";
import type { Replication } from "../replication/types.js";
import type { PushTarget } from "./wake.js";
import type { ClaimedTask, Handoff } from "../work/types.js";

export interface FleetOptions {
  towerUrl: string;
  pingMs?: number;
  /** Several replicas (PostgreSQL): link ownership in the store, commands relayed to the owner. */
  replication?: Pick<Replication, "linked" | "send" | "linkToken">;
  /**
   * Claims for an idle agent, gives back what could not be handed over, squares a new link with its daemon
   * (work/push.ts).
   */
  work?: {
    claimStarted(a: PushTarget): Promise<ClaimedTask | undefined>;
    releaseClaimed(a: PushTarget, taskId: string): Promise<void>;
    reconcile(
      nodeId: string,
      agents: readonly { agentId: string; leaseIds: readonly string[]; idle: boolean }[],
    ): Promise<void>;
    /** Outcomes that arrive on a node's session (NodeService.Session), as the unary calls commit them. */
    completeTask(caller: Caller, req: CompleteTaskRequest): Promise<unknown>;
    failTask(caller: Caller, req: FailTaskRequest): Promise<unknown>;
    reportProgress(caller: Caller, req: ReportProgressRequest): Promise<unknown>;
    /** How an outcome's commit hands its agent the next task over this replica's links. */
    setHandoff?(h: Handoff): void;
  };
}
