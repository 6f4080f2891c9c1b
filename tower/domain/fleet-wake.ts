// Who to wake for new work: the agents of linked nodes by domain, runtime and capabilities, and
// the coalesced task_ready of one committed batch per node (docs/PERFORMANCE.md, fleet simulator).
import type { JsonObject } from "@bufbuild/protobuf";
import type { EventRow } from "../store/store.js";

interface Reachable {
  nodeId: string;
  runtime: string;
  capabilities: string[];
  /** the agent's state as its events say (idle, busy, offline…); "claiming" while the tower claims for it */
  state: string;
}

/** An agent the tower can claim for and push work to. */
export interface PushTarget {
  id: string;
  domainId: string;
  nodeId: string;
  runtime: string;
  capabilities: string[];
}

/**
 * Agents of linked nodes by domain. nodesFor() is O(agents of the task's domain on linked nodes):
 * a task never looks at nodes that serve only other domains.
 */
export function createWakeIndex() {
  const byDomain = new Map<string, Map<string, Reachable>>();
  const agentDomain = new Map<string, string>();
  const nodeAgents = new Map<string, Set<string>>();

  function remove(agentId: string): void {
    const domainId = agentDomain.get(agentId);
    if (domainId === undefined) return;
    agentDomain.delete(agentId);
    const inDomain = byDomain.get(domainId)!;
    const nodeId = inDomain.get(agentId)!.nodeId;
    inDomain.delete(agentId);
    if (!inDomain.size) byDomain.delete(domainId);
    nodeAgents.get(nodeId)?.delete(agentId);
  }

  return {
    add(a: { id: string; domainId: string; nodeId: string; runtime: string; capabilities: string[]; state?: string }): void {
      if (!a.nodeId) return;
      remove(a.id);
      let inDomain = byDomain.get(a.domainId);
      if (!inDomain) byDomain.set(a.domainId, (inDomain = new Map()));
      inDomain.set(a.id, { nodeId: a.nodeId, runtime: a.runtime, capabilities: a.capabilities, state: a.state ?? "" });
      agentDomain.set(a.id, a.domainId);
      let mine = nodeAgents.get(a.nodeId);
      if (!mine) nodeAgents.set(a.nodeId, (mine = new Set()));
      mine.add(a.id);
    },
    remove,
    dropNode(nodeId: string): void {
      for (const id of nodeAgents.get(nodeId) ?? []) remove(id);
      nodeAgents.delete(nodeId);
    },
    /**
     * An agent.state event: the agent's state as the tower now knows it. An agent that becomes idle
     * goes to the end of its domain's order, so claimable() picks the one idle the longest and work
     * spreads over the agents and their nodes.
     */
    setState(agentId: string, state: string): void {
      const domainId = agentDomain.get(agentId);
      const inDomain = domainId === undefined ? undefined : byDomain.get(domainId);
      const a = inDomain?.get(agentId);
      if (!a) return;
      if (state === "idle" && a.state !== "idle" && a.state !== "claiming") {
        inDomain!.delete(agentId);
        inDomain!.set(agentId, a);
      }
      a.state = state;
    },
    /** A claim for the agent found nothing: idle again (unless an event said otherwise meanwhile). */
    unclaim(agentId: string): void {
      const domainId = agentDomain.get(agentId);
      const a = domainId === undefined ? undefined : byDomain.get(domainId)?.get(agentId);
      if (a?.state === "claiming") a.state = "idle";
    },
    /**
     * The idle agent that could take a task needing runtime and capabilities, on a node `takes`
     * says accepts pushed work, that has been idle the longest; marked "claiming" so the next task
     * picks another. O(agents of the domain).
     */
    claimable(domainId: string, runtime: string, capabilities: readonly string[], takes: (nodeId: string) => boolean): PushTarget | undefined {
      const inDomain = byDomain.get(domainId);
      if (!inDomain) return undefined;
      for (const [id, a] of inDomain) {
        if (a.state !== "idle" || (runtime && a.runtime !== runtime) || !capabilities.every((c) => a.capabilities.includes(c)) || !takes(a.nodeId)) continue;
        a.state = "claiming";
        return { id, domainId, nodeId: a.nodeId, runtime: a.runtime, capabilities: a.capabilities };
      }
      return undefined;
    },
    /** Nodes with an agent in the domain that runs the runtime (any when empty) and has every capability. */
    nodesFor(domainId: string, runtime: string, capabilities: readonly string[]): Set<string> {
      const out = new Set<string>();
      for (const a of byDomain.get(domainId)?.values() ?? []) {
        if (out.has(a.nodeId)) continue;
        if (runtime && a.runtime !== runtime) continue;
        if (capabilities.every((c) => a.capabilities.includes(c))) out.add(a.nodeId);
      }
      return out;
    },
  };
}

export type WakeIndex = ReturnType<typeof createWakeIndex>;

/**
 * The task_ready messages for the queued unassigned tasks of one committed batch: one message
 * per node with an agent that could claim one of them, the tasks coalesced in data.tasks (the
 * first one also in the message's own fields, for an epd that reads only those). Assigned work
 * goes to the assignee's node elsewhere; a broadcast parent wakes nobody (its runs are assigned).
 */
export function wakeUps(
  events: readonly EventRow[],
  reach: WakeIndex,
  /** the task is pushed, claimed for an idle agent (fleet-links.ts): no node needs waking for it */
  pushed: (taskId: string, domainId: string, runtime: string, capabilities: readonly string[]) => boolean = () => false,
): Map<string, { kind: string; taskId: string; data: JsonObject }> {
  const perNode = new Map<string, JsonObject[]>();
  for (const e of events) {
    if (e.type !== "matrix" || !e.taskId || e.status !== "queued" || e.agentId || e.payload.claim_policy === "broadcast") continue;
    // runtime and capabilities let the node pick one agent that can take the task
    const runtime = typeof e.payload.runtime === "string" ? e.payload.runtime : "";
    const capabilities = Array.isArray(e.payload.capabilities) ? e.payload.capabilities.filter((c): c is string => typeof c === "string") : [];
    if (pushed(e.taskId, e.domainId, runtime, capabilities)) continue;
    const hint: JsonObject = { task_id: e.taskId, domain_id: e.domainId };
    if (typeof e.payload.runtime === "string") hint.runtime = runtime;
    if (Array.isArray(e.payload.capabilities)) hint.capabilities = capabilities;
    for (const nodeId of reach.nodesFor(e.domainId, runtime, capabilities)) {
      const list = perNode.get(nodeId);
      if (list) list.push(hint);
      else perNode.set(nodeId, [hint]);
    }
  }
  const out = new Map<string, { kind: string; taskId: string; data: JsonObject }>();
  for (const [nodeId, tasks] of perNode) {
    const { task_id, ...data } = tasks[0];
    if (tasks.length > 1) data.tasks = tasks;
    out.set(nodeId, { kind: "task_ready", taskId: task_id as string, data });
  }
  return out;
}
