// Who can take new work: the agents of the nodes linked to this replica, by domain, runtime and
// capabilities, with their state as the tower knows it (docs/PERFORMANCE.md, fleet simulator).

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
  // Queued-task events seen per domain. A claim that found nothing compares the count from
  // before it looked: a task queued meanwhile may have missed both the claim (not committed yet
  // when it looked) and its own offer (the agent was busy claiming), so the agent looks again.
  const queued = new Map<string, number>();
  /** agent -> the count its outcome's claim saw when it found nothing (Handoff.lookedEmpty) */
  const lookedEmpty = new Map<string, { domainId: string; mark: number }>();

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
    add(a: {
      id: string;
      domainId: string;
      nodeId: string;
      runtime: string;
      capabilities: string[];
      state?: string;
    }): void {
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
    /** A task event with status queued, in the domain. */
    noteQueued(domainId: string): void {
      queued.set(domainId, (queued.get(domainId) ?? 0) + 1);
    },
    /** What has been queued in the domain so far, to compare after a claim. */
    queuedMark: (domainId: string): number => queued.get(domainId) ?? 0,
    /**
     * The agent's outcome claimed nothing at `mark`: its idle event that follows needs no second claim unless work was
     * queued since.
     */
    lookedEmpty(agentId: string, mark: number): void {
      const domainId = agentDomain.get(agentId);
      if (domainId !== undefined) lookedEmpty.set(agentId, { domainId, mark });
    },
    /**
     * At the agent's next state event: whether work may be queued for it that its outcome's claim did not see (true
     * when it did not look).
     */
    mayHaveWork(agentId: string): boolean {
      const seen = lookedEmpty.get(agentId);
      if (!seen) return true;
      lookedEmpty.delete(agentId);
      return (queued.get(seen.domainId) ?? 0) !== seen.mark;
    },
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
     * The idle agent that could take a task needing runtime and capabilities that has been idle the longest; marked
     * "claiming" so the next task picks another. O(agents of the domain).
     */
    claimable(domainId: string, runtime: string, capabilities: readonly string[]): PushTarget | undefined {
      const inDomain = byDomain.get(domainId);
      if (!inDomain) return undefined;
      for (const [id, a] of inDomain) {
        if (
          a.state !== "idle" ||
          (runtime && a.runtime !== runtime) ||
          !capabilities.every((c) => a.capabilities.includes(c))
        )
          continue;
        a.state = "claiming";
        return { id, domainId, nodeId: a.nodeId, runtime: a.runtime, capabilities: a.capabilities };
      }
      return undefined;
    },
    /** The agent, if it is idle here (marked "claiming"): a task may be waiting for it. */
    take(agentId: string): PushTarget | undefined {
      const domainId = agentDomain.get(agentId);
      const a = domainId === undefined ? undefined : byDomain.get(domainId)?.get(agentId);
      if (!a || a.state !== "idle") return undefined;
      a.state = "claiming";
      return { id: agentId, domainId: domainId!, nodeId: a.nodeId, runtime: a.runtime, capabilities: a.capabilities };
    },
    /** The idle agents of a node. */
    idleOn(nodeId: string): string[] {
      return [...(nodeAgents.get(nodeId) ?? [])].filter(
        (id) => byDomain.get(agentDomain.get(id)!)?.get(id)?.state === "idle",
      );
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
