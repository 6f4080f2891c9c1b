// The scrape-time gauges: domain names as labels, bounded (the rest under _other); a queue that
// drained reads 0; the database counts read once per cache interval, a failed read not kept.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import type { MetricCounts } from "../store/metrics-store.js";
import { cachedFor, MAX_DOMAIN_LABELS, OTHER_DOMAINS, registerScrapeGauges } from "./scrape-gauges.js";

const empty: MetricCounts = { tasks: [], agents: [], nodes: [], domains: [], approvalsPending: 0 };

function gauges(counts: MetricCounts, now = () => 0) {
  const registry = new Registry();
  let reads = 0;
  registerScrapeGauges(
    registry,
    {
      counts: async () => (reads++, counts),
      lastEventId: async () => 42,
      linkedNodes: () => 2,
      streamSubscribers: () => 3,
    },
    1000,
    now,
  );
  return { registry, reads: () => reads };
}

const lines = async (r: Registry, name: string) =>
  (await r.metrics()).split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));

describe("scrape-time gauges", () => {
  it("label tasks by domain name, every domain's queue present (0 when empty)", async () => {
    const { registry } = gauges({
      ...empty,
      domains: [
        { id: "dom_1", name: "alpha" },
        { id: "dom_2", name: "beta" },
      ],
      tasks: [
        { domainId: "dom_1", status: "queued", count: 5 },
        { domainId: "dom_1", status: "running", count: 1 },
      ],
    });
    expect(await lines(registry, "ep_queue_depth")).toEqual([
      'ep_queue_depth{domain="alpha"} 5',
      'ep_queue_depth{domain="beta"} 0',
    ]);
    expect(await lines(registry, "ep_tasks")).toEqual([
      'ep_tasks{domain="alpha",state="queued"} 5',
      'ep_tasks{domain="alpha",state="running"} 1',
    ]);
    expect(await lines(registry, "ep_event_log_head")).toEqual(["ep_event_log_head 42"]);
    expect(await lines(registry, "ep_node_links")).toEqual(["ep_node_links 2"]);
    expect(await lines(registry, "ep_stream_subscribers")).toEqual(["ep_stream_subscribers 3"]);
    // no replication on SQLite: no lag series at all
    expect(await lines(registry, "ep_event_replication_lag")).toEqual([]);
  });

  it("say how far this replica's relay trails the log, with replication", async () => {
    const registry = new Registry();
    registerScrapeGauges(
      registry,
      {
        counts: async () => empty,
        lastEventId: async () => 120,
        linkedNodes: () => 0,
        streamSubscribers: () => 0,
        replicationCursor: () => 100,
      },
      1000,
      () => 0,
    );
    expect(await lines(registry, "ep_event_replication_lag")).toEqual(["ep_event_replication_lag 20"]);
  });

  it(`name at most ${MAX_DOMAIN_LABELS} domains; the rest are summed under ${OTHER_DOMAINS}`, async () => {
    const domains = Array.from({ length: MAX_DOMAIN_LABELS + 5 }, (_, i) => ({
      id: `dom_${i}`,
      name: `d${String(i).padStart(4, "0")}`,
    }));
    const tasks = domains.map((d) => ({ domainId: d.id, status: "queued", count: 1 }));
    const { registry } = gauges({ ...empty, domains, tasks });
    const queue = await lines(registry, "ep_queue_depth");
    expect(queue).toHaveLength(MAX_DOMAIN_LABELS + 1);
    expect(queue).toContain(`ep_queue_depth{domain="${OTHER_DOMAINS}"} 5`);
    expect(queue).toContain('ep_queue_depth{domain="d0000"} 1');
  });

  it("read the database once per interval whatever the number of scrapes", async () => {
    let t = 0;
    const { registry, reads } = gauges(empty, () => t);
    await registry.metrics();
    await registry.metrics();
    expect(reads()).toBe(1);
    t = 999;
    await registry.metrics();
    expect(reads()).toBe(1);
    t = 1000;
    await registry.metrics();
    expect(reads()).toBe(2);
  });

  it("do not keep a failed read: the next call asks again", async () => {
    let calls = 0;
    const read = cachedFor(
      1000,
      () => 0,
      async () => {
        calls++;
        if (calls === 1) throw new Error("database away");
        return calls;
      },
    );
    await expect(read()).rejects.toThrow("database away");
    await expect(read()).resolves.toBe(2);
    await expect(read()).resolves.toBe(2);
  });
});
