// An agent's state told to the tower when nothing else tells it (a run that ended with no outcome
// to report — cancelled, lease lost — leaves its agent idle): the newest wanted state per agent,
// sent one call at a time and coalesced. Claims and outcomes set the state at the tower
// themselves; a new link carries every agent's state. An agent the tower does not know is skipped.
import { AgentStateSchema, type AgentState } from "../../gen/ep/tower/v1/resources_pb.js";
import { enumOf } from "../../common/vocab.js";
import { toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { TowerClients } from "../link/tower-client.js";

export function createAgentStates(deps: { tower: TowerClients; log: Logger; closed(): boolean }) {
  const { tower, log } = deps;
  /** states waiting to be sent, the newest per agent */
  const waiting = new Map<string, string>();
  let sending = false;

  async function push(): Promise<void> {
    if (sending) return;
    sending = true;
    try {
      for (const [agentId, state] of waiting) {
        if (deps.closed()) return;
        waiting.delete(agentId);
        await tower.agents
          .updateAgentState({ agentId, state: enumOf<AgentState>(AgentStateSchema, state, "state"), reason: "epd" })
          .catch((err: unknown) => {
            // not sent (the tower is away): the next link carries the agent's state anyway
            log.debug("agent state not sent", { agent_id: agentId, error: toEpError(err).message });
          });
      }
    } finally {
      sending = false;
    }
  }

  return {
    set(agentId: string, state: string): void {
      waiting.set(agentId, state);
      void push();
    },
  };
}
