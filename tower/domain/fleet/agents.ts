// The fleet's agents: enrolment (within the domains the node serves), listing and cost, the state
// nodes report, and the signals and supervision commands the tower sends them over their link.
import { create } from "@bufbuild/protobuf";
import { iso } from "../../../common/clock.js";
import { EpError, invalidField } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import * as fleet from "../../../gen/ep/tower/v1/fleet_pb.js";
import { authorize, scopeDomains, type Caller } from "../caller.js";
import { agentMsg, usageMsg, wordOf } from "../convert.js";
import { AgentStateSchema, RuntimeSchema } from "../../../gen/ep/tower/v1/resources_pb.js";
import { commit } from "../event-hub.js";
import type { FleetContext } from "./context.js";
import { RUNTIMES, sumUsage } from "../work/index.js";
import { paginate } from "../paging.js";
import type { Store } from "../../store/store.js";

const AGENT_STATES = ["starting", "idle", "busy", "paused", "restarting", "dead", "offline"] as const;

/**
 * The name of an agent enrolled without one: `<runtime>-<n>`, the lowest n not taken on its node
 * (among the agents without a node when it has none), so every surface can show a name.
 */
export async function defaultAgentName(
  store: Pick<Store, "listAgents">,
  nodeId: string,
  runtime: string,
): Promise<string> {
  const onNode = (await store.listAgents({ nodeId: nodeId || undefined })).filter((a) => a.nodeId === nodeId);
  const taken = new Set(onNode.map((a) => a.name));
  let n = 1;
  while (taken.has(`${runtime}-${n}`)) n++;
  return `${runtime}-${n}`;
}

export function createAgentOps({ deps, linkHub }: FleetContext) {
  const { store, clock } = deps;
  const { deliver, linkedAnywhere } = linkHub;

  async function mustAgent(id: string) {
    if (!id) throw invalidField("agent_id", "is required");
    const a = await store.getAgent(id);
    if (!a) throw new EpError("agent_not_found", `agent ${id} does not exist`);
    return a;
  }

  return {
    async enrollAgent(caller: Caller, req: fleet.EnrollAgentRequest): Promise<fleet.EnrollAgentResponse> {
      const runtime = wordOf(RuntimeSchema, req.runtime, "runtime");
      if (!runtime) throw invalidField("runtime", `is required: one of ${RUNTIMES.join(", ")}`);
      const nodeId = caller.role === "node" ? caller.nodeId! : req.nodeId;
      if (caller.role === "node" && req.nodeId && req.nodeId !== caller.nodeId)
        throw new EpError("forbidden", "a node enrolls agents only on itself");
      if (caller.role !== "node") authorize(caller, "admin");
      return commit(deps, async (tx, emit) => {
        if (!req.domainId) throw invalidField("domain_id", "is required");
        const d = await tx.getDomain(req.domainId);
        if (!d) throw new EpError("domain_not_found", `domain ${req.domainId} does not exist`);
        const node = nodeId ? await tx.getNode(nodeId) : undefined;
        if (nodeId && !node) throw new EpError("node_not_found", `node ${nodeId} does not exist`);
        // a node takes agents only in the domains it serves (registered, or set by an admin)
        if (node && !node.domains.includes("*") && !node.domains.includes(d.id)) {
          throw new EpError(
            "forbidden",
            `node ${node.id} serves only ${node.domains.join(", ")}, not ` +
              `domain ${d.id}; an admin can widen it with 'ep node domains set'`,
            { node_id: node.id, domain_id: d.id },
          );
        }
        const ts = iso(clock.now());
        const name = req.name.trim().slice(0, 200) || (await defaultAgentName(tx, nodeId ?? "", runtime));
        const row = {
          id: newId("agt", clock.now()),
          domainId: d.id,
          nodeId: nodeId ?? "",
          name,
          runtime,
          capabilities: req.capabilities.map((c) => c.trim()).filter(Boolean),
          state: "idle",
          lastSeenAt: ts,
          createdAt: ts,
          supervised: req.supervised,
        };
        await tx.insertAgent(row);
        linkHub.enrolled(row);
        emit({
          type: "matrix",
          name: "agent.enrolled",
          domainId: d.id,
          agentId: row.id,
          status: "idle",
          payload: { agent_id: row.id, name: row.name, runtime, node_id: row.nodeId },
        });
        return create(fleet.EnrollAgentResponseSchema, { agent: agentMsg(row) });
      });
    },

    async listAgents(caller: Caller, req: fleet.ListAgentsRequest): Promise<fleet.ListAgentsResponse> {
      const scope = scopeDomains(caller);
      if (req.domainId) authorize(caller, "read", { domainId: req.domainId });
      else authorize(caller, "read");
      const rows = (await store.listAgents({ domainId: req.domainId || undefined, nodeId: req.nodeId })).filter(
        (a) => !scope || scope.includes(a.domainId),
      );
      const { page, nextPageToken } = paginate(rows, (a) => a.id, req);
      return create(fleet.ListAgentsResponseSchema, { agents: page.map(agentMsg), nextPageToken });
    },

    async getAgent(caller: Caller, req: fleet.GetAgentRequest): Promise<fleet.GetAgentResponse> {
      const a = await mustAgent(req.agentId);
      authorize(caller, "read", { domainId: a.domainId });
      // what the tasks this agent ran cost, as their runtimes reported it
      // (its tasks only, read by claimant in SQL: not the domain's first 100,000 filtered here)
      const usage = sumUsage(await store.listTasks({ domainId: a.domainId, claimedBy: a.id }));
      return create(fleet.GetAgentResponseSchema, { agent: agentMsg(a), usage: usage && usageMsg(usage) });
    },

    async updateAgentState(
      caller: Caller,
      req: fleet.UpdateAgentStateRequest,
    ): Promise<fleet.UpdateAgentStateResponse> {
      authorize(caller, "node");
      const a = await mustAgent(req.agentId);
      if (a.nodeId !== caller.nodeId) throw new EpError("forbidden", `agent ${a.id} runs on another node`);
      // an unspecified state keeps it: the call only says whether the node supervises the agent
      const state = wordOf(AgentStateSchema, req.state, "state");
      if (!state && req.supervised === undefined) throw invalidField("state", "is required unless supervised is given");
      if (state && !AGENT_STATES.includes(state as (typeof AGENT_STATES)[number]))
        throw invalidField("state", `must be one of ${AGENT_STATES.join(", ")}`);
      return commit(deps, async (tx, emit) => {
        const patch = {
          ...(state ? { state } : {}),
          ...(req.supervised !== undefined ? { supervised: req.supervised } : {}),
          lastSeenAt: iso(clock.now()),
        };
        const updated = (await tx.updateAgent(a.id, patch))!;
        if (state && a.state !== state) {
          emit({
            type: "matrix",
            name: "agent.state",
            domainId: a.domainId,
            agentId: a.id,
            status: state,
            payload: { agent_id: a.id, from: a.state, to: state, reason: req.reason },
          });
        }
        return create(fleet.UpdateAgentStateResponseSchema, { agent: agentMsg(updated) });
      });
    },

    async signalAgent(caller: Caller, req: fleet.SignalAgentRequest): Promise<fleet.SignalAgentResponse> {
      const a = await mustAgent(req.agentId);
      authorize(caller, "operate", { domainId: a.domainId });
      const prompt = req.prompt.trim();
      if (!prompt) throw invalidField("prompt", "is required");
      if (prompt.length > 100_000) throw invalidField("prompt", "is longer than 100000 characters");
      if (!a.nodeId || !(await linkedAnywhere(a.nodeId)))
        throw new EpError("node_offline", `agent ${a.id}'s node is not connected; the signal was not delivered`);
      const [written] = await store.transaction((tx) =>
        tx.appendEvents(
          [
            {
              type: "inbox",
              name: "agent.signal",
              domainId: a.domainId,
              agentId: a.id,
              payload: { agent_id: a.id, prompt, from: caller.subject },
            },
          ],
          iso(clock.now()),
        ),
      );
      deps.hub.publish([written]);
      const id = written.id;
      await deliver(a.nodeId, { command: { case: "signal", value: { agentId: a.id, prompt } } });
      return create(fleet.SignalAgentResponseSchema, { eventId: BigInt(id) });
    },

    async superviseAgent(caller: Caller, req: fleet.SuperviseAgentRequest): Promise<fleet.SuperviseAgentResponse> {
      const a = await mustAgent(req.agentId);
      authorize(caller, "operate", { domainId: a.domainId });
      if (!["restart", "pause", "resume"].includes(req.op))
        throw invalidField("op", "must be restart, pause or resume");
      if (!a.supervised) {
        throw new EpError(
          "agent_not_supervised",
          `agent ${a.name || a.id} is not supervised by its node, so there is ` +
            `nothing to ${req.op}; only agents.toml profiles with supervise = true are`,
          { agent_id: a.id },
        );
      }
      if (
        !a.nodeId ||
        !(await deliver(a.nodeId, { command: { case: "supervise", value: { agentId: a.id, op: req.op } } }))
      ) {
        throw new EpError("node_offline", `agent ${a.id}'s node is not connected`);
      }
      await commit(deps, async (_tx, emit) =>
        emit({
          type: "matrix",
          name: `agent.${req.op}_requested`,
          domainId: a.domainId,
          agentId: a.id,
          payload: { agent_id: a.id, op: req.op, by: caller.subject },
        }),
      );
      return create(fleet.SuperviseAgentResponseSchema, { agent: agentMsg(a) });
    },
  };
}
