// Claimers long-polling for work (ClaimTask with a wait), by domain. A task becoming queued wakes
// one waiter that can take it, not all of them: with N workers polling a domain, waking all made
// every new task cost N claim transactions of which N-1 found nothing (docs/PERFORMANCE.md).
import type { Clock } from "../../../common/clock.js";
import type { EventRow } from "../../store/store.js";
import type { EventHub } from "../event-hub.js";
import type { ActingAgent } from "./support.js";

/** What a queued task asks of its claimer, read from its event; undefined where the event does not say. */
export interface Need {
  taskId: string;
  domainId: string;
  /** claim_policy "assigned": only this agent */
  assignee: string;
  runtime: string;
  capabilities: readonly string[];
}

interface Waiter {
  agent: ActingAgent;
  wake: (woken?: Need) => void;
}

/** The need of a task event that makes work claimable; undefined for any other event. */
export function needOf(e: EventRow): Need | "unknown" | undefined {
  if (e.type !== "matrix" || e.status !== "queued" || !e.taskId) return undefined;
  const p = e.payload;
  if (p.kind !== undefined && p.kind !== "claimable") return undefined;
  if (p.claim_policy === "broadcast") return undefined; // its runs are assigned tasks of their own
  if (typeof p.runtime !== "string" || !Array.isArray(p.capabilities) || typeof p.claim_policy !== "string")
    return "unknown";
  return {
    taskId: e.taskId,
    domainId: e.domainId,
    assignee: p.claim_policy === "assigned" ? e.agentId : "",
    runtime: p.runtime,
    capabilities: p.capabilities.filter((c): c is string => typeof c === "string"),
  };
}

/** The claim statement's eligibility (store claimTask), on what the event says of the task. */
export function canTake(a: ActingAgent, n: Need): boolean {
  if (n.runtime && n.runtime !== a.runtime) return false;
  if (n.assignee) return n.assignee === a.id;
  return n.capabilities.every((c) => a.capabilities.includes(c));
}

export class WorkWaiters {
  /** per domain, in the order they started waiting (the longest waiter is woken first) */
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly unsubscribe: () => void;

  constructor(
    hub: EventHub,
    private readonly clock: Clock,
  ) {
    this.unsubscribe = hub.subscribe((events) => {
      for (const e of events) {
        const need = needOf(e);
        if (need === "unknown") this.wakeAll(e.domainId);
        else if (need) this.pass(need);
      }
    });
  }

  /**
   * Waits for a task the agent could take, at most `ms`. Resolves with the task that woke it,
   * or undefined (the deadline, or close()). Whoever is woken for a task and does not end up
   * with it while it may still be queued calls pass() with it.
   */
  wait(agent: ActingAgent, ms: number): Promise<Need | undefined> {
    return new Promise((resolve) => {
      let set = this.waiters.get(agent.domainId);
      if (!set) this.waiters.set(agent.domainId, (set = new Set()));
      const waiter: Waiter = {
        agent,
        wake: (woken) => {
          this.clock.clearTimeout(timer);
          this.remove(agent.domainId, waiter);
          resolve(woken);
        },
      };
      const timer = this.clock.setTimeout(() => waiter.wake(), ms);
      set.add(waiter);
    });
  }

  /**
   * Claims (`claimOnce`) until there is a task, `deadline` passes or `stop()`, waiting for work
   * in between. A claimer woken for a task that ends up with another one (an older or
   * higher-priority task) or with an error passes it on: that task may still be queued. Nothing
   * at all means someone else took it (the claimer was one that could).
   */
  async claimUntil<T extends { id: string }>(
    agent: ActingAgent,
    deadline: number,
    claimOnce: () => Promise<T | undefined>,
    stop: () => boolean,
  ): Promise<T | undefined> {
    let woken: Need | undefined;
    for (;;) {
      let t: T | undefined;
      try {
        t = await claimOnce();
      } catch (err) {
        if (woken) this.pass(woken);
        throw err;
      }
      if (woken && t && t.id !== woken.taskId) this.pass(woken);
      if (t) return t;
      const left = deadline - this.clock.now();
      if (left <= 0 || stop()) return undefined;
      woken = await this.wait(agent, left);
    }
  }

  /** Wakes the longest-waiting claimer that can take the task, if any. */
  pass(need: Need): void {
    const set = this.waiters.get(need.domainId);
    if (!set) return;
    for (const w of set) {
      if (!canTake(w.agent, need)) continue;
      w.wake(need);
      return;
    }
  }

  /** Releases every waiter (they answer "no task"). */
  close(): void {
    this.unsubscribe();
    for (const domainId of [...this.waiters.keys()]) this.wakeAll(domainId);
  }

  private wakeAll(domainId: string): void {
    for (const w of [...(this.waiters.get(domainId) ?? [])]) w.wake();
  }

  private remove(domainId: string, w: Waiter): void {
    const set = this.waiters.get(domainId);
    if (!set?.delete(w)) return;
    if (!set.size) this.waiters.delete(domainId);
  }
}
