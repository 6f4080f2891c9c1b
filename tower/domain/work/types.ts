// The work folder's shared types: what its parts and the fleet name on both sides of an import.
import type { TaskRow } from "../../store/store.js";
import type { ActingAgent } from "./support.js";

/**
 * How an outcome's commit hands its agent the next task (set by the fleet, fleet/links.ts). An
 * outcome that says its agent is idle claims the agent's next task in its own commit when the
 * agent's node is linked to this replica, and the task goes on the link after the commit: one
 * commit per task where a second claim would follow the agent.state idle event.
 */
export interface Handoff {
  /**
   * A mark of what this replica has seen queued in the agent's domain, when the agent's node is linked here; undefined
   * otherwise (nothing is claimed for it then).
   */
  mark(agent: ActingAgent): number | undefined;
  /**
   * The claim in the outcome's commit found nothing: the agent.state idle event that follows needs no second claim
   * unless work was queued in its domain since `mark`.
   */
  lookedEmpty(agentId: string, mark: number): void;
  /**
   * An idle agent of a node linked here that can take a task of this domain, runtime and capabilities (idle the longest
   * first, authorized as its node's own claim would be), marked as being claimed for; undefined when there is none.
   */
  pick(domainId: string, runtime: string, capabilities: readonly string[]): ActingAgent | undefined;
  /**
   * The agent pick() gave was not claimed for after all: idle again as far as this replica knows, or busy when the
   * store said it was not idle (as its event will say).
   */
  unpick(agentId: string, notIdle?: boolean): void;
  /** After the commit: sends the claimed task (and its parents) on the agent's link; false when the link went away. */
  send(agent: ActingAgent, task: ClaimedTask): boolean;
}

/**
 * A task claimed to be handed over, with its parents (depends_on) read in the claim's commit: they go in its assignment
 * (push.ts).
 */
export type ClaimedTask = TaskRow & { parents?: readonly TaskRow[] };
