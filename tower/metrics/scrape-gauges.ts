// The gauges /metrics computes when it is scraped, never on the work path: tasks by domain and
// state and the queue depth (from the database, tower/store/metrics-store.ts), agents and nodes
// by state, approvals waiting, and what this replica holds in memory (links, stream subscribers,
// the event log's head and the replication cursor). The database counts are cached for
// `cacheMs`, so several scrapers (or one scraping twice) cost one round of queries per interval.
import { Gauge, type Registry } from "prom-client";
import type { MetricCounts } from "../store/metrics-store.js";

export interface ScrapeSources {
  counts(): Promise<MetricCounts>;
  /** the newest event id in the store */
  lastEventId(): Promise<number>;
  /** node links this replica holds */
  linkedNodes(): number;
  /** event stream subscribers (SSE and WebSocket) on this replica */
  streamSubscribers(): number;
  /** the replication cursor (every event ≤ it reached this replica's hub); absent on SQLite */
  replicationCursor?: () => number;
}

/** Domains named in labels at most; the rest are summed under domain="_other" (docs/metrics.md). */
export const MAX_DOMAIN_LABELS = 200;
export const OTHER_DOMAINS = "_other";

/** `fn` at most once per `ms` (one call in flight shared), its last answer reused meanwhile. */
export function cachedFor<T>(ms: number, now: () => number, fn: () => Promise<T>): () => Promise<T> {
  let at = -Infinity;
  let value: Promise<T> | undefined;
  return () => {
    if (!value || now() - at >= ms) {
      at = now();
      const p = fn();
      value = p;
      // a failed read is not kept: the next scrape asks again
      p.catch(() => {
        if (value === p) value = undefined;
      });
    }
    return value;
  };
}

/** Registers the scrape-time gauges on `registry`. */
export function registerScrapeGauges(registry: Registry, src: ScrapeSources, cacheMs: number, now: () => number): void {
  const counts = cachedFor(cacheMs, now, () => src.counts());
  const head = cachedFor(cacheMs, now, () => src.lastEventId());

  new Gauge({
    name: "ep_tasks",
    help:
      "Claimable tasks queued, and tasks claimed or running, by " +
      "domain name and state (finished tasks: ep_task_outcomes_total).",
    labelNames: ["domain", "state"],
    registers: [registry],
    async collect() {
      this.reset();
      const c = await counts();
      for (const [key, n] of byDomain(c, (t) => t.status)) this.set({ domain: key[0], state: key[1] }, n);
    },
  });
  new Gauge({
    name: "ep_queue_depth",
    help: "Claimable tasks waiting to be claimed, by domain name.",
    labelNames: ["domain"],
    registers: [registry],
    async collect() {
      this.reset();
      const c = await counts();
      // every domain has a series (0 when its queue is empty), so a query sees a drained queue as 0, not as no data
      for (const name of domainLabels(c).values()) this.set({ domain: name }, 0);
      for (const [key, n] of byDomain(c, (t) => (t.status === "queued" ? "q" : undefined)))
        this.set({ domain: key[0] }, n);
    },
  });
  new Gauge({
    name: "ep_agents",
    help: "Enrolled agents by state.",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const a of (await counts()).agents) this.set({ state: a.state }, a.count);
    },
  });
  new Gauge({
    name: "ep_nodes",
    help: "Registered nodes by status (online: linked to a replica).",
    labelNames: ["status"],
    registers: [registry],
    async collect() {
      this.reset();
      for (const n of (await counts()).nodes) this.set({ status: n.status }, n.count);
    },
  });
  new Gauge({
    name: "ep_approvals_waiting",
    help: "Permission requests waiting for a person's decision.",
    registers: [registry],
    async collect() {
      this.set((await counts()).approvalsPending);
    },
  });
  new Gauge({
    name: "ep_node_links",
    help: "Node links this replica holds.",
    registers: [registry],
    collect() {
      this.set(src.linkedNodes());
    },
  });
  new Gauge({
    name: "ep_stream_subscribers",
    help: "Event stream subscribers (SSE and WebSocket) on this replica.",
    registers: [registry],
    collect() {
      this.set(src.streamSubscribers());
    },
  });
  new Gauge({
    name: "ep_event_log_head",
    help: "The newest event id in the event log.",
    registers: [registry],
    async collect() {
      this.set(await head());
    },
  });
  if (src.replicationCursor) {
    const cursor = src.replicationCursor;
    new Gauge({
      name: "ep_event_replication_lag",
      help: "Events committed (by any replica) that have not yet reached this replica's hub.",
      registers: [registry],
      async collect() {
        this.set(Math.max(0, (await head()) - cursor()));
      },
    });
  }
}

/**
 * Domain id → the label it is counted under: its name, for the first MAX_DOMAIN_LABELS by name; the rest OTHER_DOMAINS.
 */
function domainLabels(c: MetricCounts): Map<string, string> {
  const sorted = [...c.domains].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return new Map(sorted.map((d, i) => [d.id, i < MAX_DOMAIN_LABELS ? d.name : OTHER_DOMAINS]));
}

/** Task counts summed by [domain label, key(t)]; rows whose key is undefined are left out. */
function byDomain(
  c: MetricCounts,
  key: (t: MetricCounts["tasks"][number]) => string | undefined,
): Map<[string, string], number> {
  const labels = domainLabels(c);
  const sums = new Map<string, { key: [string, string]; n: number }>();
  for (const t of c.tasks) {
    const k = key(t);
    if (k === undefined) continue;
    const domain = labels.get(t.domainId) ?? OTHER_DOMAINS;
    const id = `${domain}\u0000${k}`;
    const e = sums.get(id) ?? { key: [domain, k] as [string, string], n: 0 };
    e.n += t.count;
    sums.set(id, e);
  }
  return new Map([...sums.values()].map((e) => [e.key, e.n]));
}
