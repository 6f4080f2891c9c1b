// The hot-path counters and histograms print exactly what prom-client's own would for the same
// observations (prom-client is the reference: same registry, same text format).
import { Counter, Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { HotCounter, HotHistogram } from "./hot-metrics.js";

const BUCKETS = [0.01, 0.1, 1, 10];
const VALUES = [0, 0.01, 0.05, 0.1, 0.2, 1, 5, 10, 11, 1e6];

describe("hot metrics", () => {
  it("a labeled histogram's scrape equals prom-client's for the same observations, bounds included", async () => {
    const [ours, theirs] = [new Registry(), new Registry()];
    const hot = new HotHistogram({
      name: "h_seconds",
      help: "h",
      labelNames: ["route", "code"],
      buckets: BUCKETS,
      registry: ours,
    });
    const ref = new Histogram({
      name: "h_seconds",
      help: "h",
      labelNames: ["route", "code"],
      buckets: BUCKETS,
      registers: [theirs],
    });
    for (const [i, v] of VALUES.entries()) {
      const labels = { route: i % 2 ? "/a/:id" : 'quo"te\\', code: "200" };
      hot.child(labels.route, labels.code).observe(v);
      ref.observe(labels, v);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it("an unlabeled histogram and counter are exported as 0 before anything happens, then count", async () => {
    const [ours, theirs] = [new Registry(), new Registry()];
    const hot = new HotHistogram({ name: "u_seconds", help: "u", buckets: BUCKETS, registry: ours });
    const hotCount = new HotCounter({ name: "u_total", help: "c", registry: ours });
    new Histogram({ name: "u_seconds", help: "u", buckets: BUCKETS, registers: [theirs] });
    const refCount = new Counter({ name: "u_total", help: "c", registers: [theirs] });
    expect(await ours.metrics()).toBe(await theirs.metrics());
    hot.child().observe(0.5);
    hotCount.child().inc();
    hotCount.child().inc(2);
    const refHist = theirs.getSingleMetric("u_seconds") as Histogram;
    refHist.observe(0.5);
    refCount.inc(3);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it(
    "a labeled counter's series appear as they are first " + "used; a wrong number of label values is refused",
    async () => {
      const [ours, theirs] = [new Registry(), new Registry()];
      const hot = new HotCounter({ name: "r_total", help: "r", labelNames: ["outcome"], registry: ours });
      const ref = new Counter({ name: "r_total", help: "r", labelNames: ["outcome"], registers: [theirs] });
      hot.child("failed").inc();
      hot.child("succeeded").inc(4);
      ref.inc({ outcome: "failed" });
      ref.inc({ outcome: "succeeded" }, 4);
      expect(await ours.metrics()).toBe(await theirs.metrics());
      expect(() => hot.child()).toThrow("r_total takes the labels outcome");
    },
  );
});
