// Each local agent's state as the tower shows it (idle, busy): the newest wanted state per agent,
// sent one call at a time and coalesced (ten changes while a call is out become one), so state
// updates never sit on the claim path. An agent the tower does not know is skipped.
import { AgentStateSchema, type AgentState } from "../../gen/ep/tower/v1/resources_pb.js";
import { enumOf } from "../../common/vocab.js";
import { toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { TowerClients } from "../link/tower-client.js";

export function createAgentStates(deps: { tower: TowerClients; log: Logger; closed(): boolean }) {
  const { tower, log } = deps;
  const desired = new Map<string, string>();
  const sent = new Map<string, string>();
  let announcing = false;

  async function push(): Promise<void> {
    if (announcing) return;
    announcing = true;
    try {
      for (;;) {
        const next = [...desired].find(([id, st]) => sent.get(id) !== st);
        if (!next || deps.closed()) return;
        const [agentId, state] = next;
        sent.set(agentId, state);
        await tower.agents.updateAgentState({ agentId, state: enumOf<AgentState>(AgentStateSchema, state, "state"), reason: "epd" }).catch((err: unknown) => {
          sent.delete(agentId);
          log.debug("agent state not sent", { agent_id: agentId, error: toEpError(err).message });
          if (toEpError(err).errorClass !== "not_found") desired.delete(agentId);
        });
      }
    } finally {
      announcing = false;
    }
  }

  return {
    set(agentId: string, state: string): void {
      desired.set(agentId, state);
      void push();
    },
    /** The tower already has this state (a claim that started, an outcome sent with agent_idle): no call. */
    assume(agentId: string, state: string): void {
      desired.set(agentId, state);
      sent.set(agentId, state);
    },
    /** Sends every agent's state again (a new link: the tower may have restarted). */
    announce(all: [agentId: string, state: string][]): void {
      sent.clear();
      for (const [id, st] of all) desired.set(id, st);
      void push();
    },
  };
}
