// What the nodes report about themselves (NodeService.ReportNodeState: cron jobs, supervised
// agents, config errors), as callers may see it: one node or all, a caller confined to some
// domains seeing only the nodes (and supervised agents) of those domains. Behind the
// list_cron_jobs and get_supervision tools.
import { EpError } from "../../../common/errors.js";
import { authorize, scopeDomains, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import type { FleetService } from "./fleet.js";

export function createNodeStateReads(deps: Deps, fleet: Pick<FleetService, "visibleNodeIds">) {
  /**
   * The nodes (one, or every node) with their latest state report, if any; a caller confined to
   * some domains (an agent token, a narrowed node) sees only the nodes with agents there.
   */
  async function nodeReports(caller: Caller, nodeId: string) {
    const visible = await fleet.visibleNodeIds(caller);
    if (nodeId) {
      const node = await deps.store.getNode(nodeId);
      if (!node || (visible && !visible.has(node.id)))
        throw new EpError("node_not_found", `node ${nodeId} does not exist`, { field: "node_id" });
      const [state] = await deps.store.listNodeStates(nodeId);
      return [{ node, state }];
    }
    const states = new Map((await deps.store.listNodeStates()).map((s) => [s.nodeId, s]));
    return (await deps.store.listNodes())
      .filter((n) => states.has(n.id) && (!visible || visible.has(n.id)))
      .map((node) => ({ node, state: states.get(node.id) }));
  }
  const nodeHead = (node: { id: string; hostname: string; status: string }, reportedAt: string | undefined) => ({
    node_id: node.id,
    hostname: node.hostname,
    node_status: node.status,
    // "" when the node never reported (an older epd, or it has not connected since)
    reported_at: reportedAt ?? "",
  });

  return {
    async listCronJobs(c: Caller, nodeId: string) {
      authorize(c, "read");
      const reports = await nodeReports(c, nodeId);
      return {
        nodes: reports.map(({ node, state }) => ({
          ...nodeHead(node, state?.reportedAt),
          jobs: state?.cronJobs ?? [],
          config_errors: state?.configErrors ?? [],
        })),
      };
    },

    async getSupervision(c: Caller, q: { agentId: string; nodeId: string }) {
      authorize(c, "read");
      const agentId = q.agentId;
      let nodeId = q.nodeId;
      if (agentId) {
        const agent = await deps.store.getAgent(agentId);
        if (!agent) throw new EpError("agent_not_found", `agent ${agentId} does not exist`, { field: "agent_id" });
        authorize(c, "read", { domainId: agent.domainId });
        if (nodeId && agent.nodeId !== nodeId)
          throw new EpError("agent_not_found", `agent ${agentId} does not run on node ${nodeId}`, {
            field: "agent_id",
          });
        nodeId = agent.nodeId;
        if (!nodeId) return { nodes: [] };
      }
      const scope = scopeDomains(c);
      const reports = await nodeReports(c, nodeId);
      const nodes = [];
      for (const { node, state } of reports) {
        const towerAgents = new Map((await deps.store.listAgents({ nodeId: node.id })).map((r) => [r.id, r]));
        const agents = (state?.supervised ?? [])
          .filter((x) => !agentId || x.agent_id === agentId)
          .filter((x) => !scope || scope.includes(String(x.domain_id)))
          .map((x) => {
            const t = typeof x.agent_id === "string" ? towerAgents.get(x.agent_id) : undefined;
            return t ? { ...x, tower_state: t.state, tower_last_seen_at: t.lastSeenAt } : x;
          });
        nodes.push({ ...nodeHead(node, state?.reportedAt), agents });
      }
      return { nodes };
    },
  };
}
