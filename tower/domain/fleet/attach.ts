// Who may attach to an agent's terminal, and how (docs/attach.md): a viewer with an attach
// ticket or a credential that reads the agent's domain (rw when it may also operate there), never
// a node or an agent token; the node's dial-back only with its own token and the proof of its
// current link's attach secret. The WebSocket edge (edges/attach/attach-ws.ts) only moves bytes.
import type { LinkCommand } from "./types.js";
import { createHmac, timingSafeEqual } from "node:crypto";
import { EpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import type { AgentRow, Store } from "../../store/store.js";
import type { Auth } from "../auth/index.js";
import { authorize, can, type Caller } from "../caller.js";
import type { FleetService } from "./fleet.js";

/** The dial-back proof; the daemon computes the same (daemon/attach/gateway.ts). */
export function attachProof(secret: string, attachId: string): string {
  return createHmac("sha256", secret).update(attachId).digest("base64url");
}

/**
 * How an attach reaches the node's link when this replica may not hold it (PostgreSQL, several
 * replicas). The single-replica default uses the local links. A multi-replica relay delivers the
 * command to the replica holding the link and asks that replica for the expected proof, so the
 * attach secret never leaves the replica it was announced to.
 */
export interface AttachRelay {
  /** Whether some replica holds the node's link now. */
  isLinked(nodeId: string): Promise<boolean>;
  /** Delivers the `attach` command on the node's link; false when no replica holds it. */
  send(nodeId: string, msg: LinkCommand): Promise<boolean>;
  /** attachProof(current attach secret of the node's link, attachId), or undefined without a link. */
  proof(nodeId: string, attachId: string): Promise<string | undefined>;
}

export function localAttachRelay(fleet: Pick<FleetService, "isLinked" | "send" | "attachSecretOf">): AttachRelay {
  return {
    isLinked: async (nodeId) => fleet.isLinked(nodeId),
    send: async (nodeId, msg) => fleet.send(nodeId, msg),
    async proof(nodeId, attachId) {
      const secret = fleet.attachSecretOf(nodeId);
      return secret ? attachProof(secret, attachId) : undefined;
    },
  };
}

export interface ViewerRequest {
  /** a one-time attach ticket (used when the request has no Authorization header) */
  ticket?: string;
  /** reads the request's credential (bearer or session cookie) */
  credential(): string | undefined;
  agentId: string;
  /** "rw", "ro" or null (the most the caller may) */
  mode: string | null;
}

export interface DialRequest {
  attachId: string;
  /** the node's bearer token */
  credential?: string;
  /** the node the attach was asked of (undefined: no such pending attach) */
  askedOf?: string;
  proof: string;
}

export function createAttachAdmission(deps: { auth: Auth; store: Store; relay: AttachRelay; log: Logger }) {
  const { auth, store, relay, log } = deps;
  return {
    async admitViewer(r: ViewerRequest): Promise<{ caller: Caller; agent: AgentRow; mode: "rw" | "ro" }> {
      let caller: Caller;
      let agentId = r.agentId;
      if (r.ticket) {
        const redeemed = await auth.redeemTicket(r.ticket, "attach");
        if (redeemed.agentId && agentId && redeemed.agentId !== agentId)
          throw new EpError("forbidden", `the ticket was issued for agent ${redeemed.agentId}, not ${agentId}`);
        agentId = redeemed.agentId || agentId;
        caller = redeemed;
      } else {
        caller = await auth.authenticate(r.credential());
      }
      if (!agentId)
        throw new EpError("invalid_argument", "say which agent: a ticket created with agent_id, or ?agent_id=", {
          field: "agent_id",
        });
      if (caller.role === "node" || caller.role === "agent")
        throw new EpError(
          "forbidden",
          `role ${caller.role} may not attach to terminals; use an operator or viewer token`,
        );
      const agent = await store.getAgent(agentId);
      if (!agent) throw new EpError("agent_not_found", `agent ${agentId} does not exist`);
      authorize(caller, "read", { domainId: agent.domainId });
      if (r.mode !== null && r.mode !== "rw" && r.mode !== "ro")
        throw new EpError("invalid_argument", "mode must be rw or ro", { field: "mode" });
      const mode: "rw" | "ro" = r.mode !== "ro" && can(caller, "operate", { domainId: agent.domainId }) ? "rw" : "ro";
      if (!agent.nodeId || !(await relay.isLinked(agent.nodeId))) {
        throw new EpError(
          "node_offline",
          `agent ${agent.id}'s node is not connected to the tower; attach again once it is`,
        );
      }
      return { caller, agent, mode };
    },

    async admitDial(r: DialRequest): Promise<void> {
      if (!r.credential)
        throw new EpError(
          "unauthenticated",
          "a dial-back carries the node token as 'Authorization: Bearer <node JWT>'",
        );
      const caller = await auth.authenticate(r.credential);
      if (caller.role !== "node") throw new EpError("forbidden", "only a node dials back an attach");
      if (!r.askedOf) throw new EpError("not_found", `attach ${r.attachId} is unknown, already connected or timed out`);
      if (r.askedOf !== caller.nodeId) throw new EpError("forbidden", `attach ${r.attachId} was asked of another node`);
      const expected = await relay.proof(r.askedOf, r.attachId);
      const ok =
        expected !== undefined &&
        r.proof.length === expected.length &&
        timingSafeEqual(Buffer.from(r.proof), Buffer.from(expected));
      if (!ok) {
        log.warn("attach dial-back refused: stale or wrong attach secret", {
          attach_id: r.attachId,
          node_id: r.askedOf,
        });
        throw new EpError(
          "unauthenticated",
          "the attach proof does not match the attach secret of this " +
            "node's current link (a daemon that restarted has a new secret)",
        );
      }
    },
  };
}
