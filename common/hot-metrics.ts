// Counters and histograms for the work path, exported through a prom-client registry. prom-client's
// own children re-validate and re-hash their label set and look a bucket up by its bound's string
// key on every call (~1 µs per observation, bench/metrics-cost.ts); these bind the series once
// (child()) and then cost an addition (a counter) or a short bucket scan and three additions (a
// histogram). They are read only when Prometheus scrapes: get() is prom-client's metric shape,
// so the registry formats them with everything else.
import type { Registry } from "prom-client";

type Labels = Record<string, string>;
type Value = { labels: Labels; value: number; metricName?: string };

class CounterSeries {
  value = 0;
  constructor(readonly labels: Labels) {}
  inc(n = 1): void {
    this.value += n;
  }
}

class HistogramSeries {
  /** observations per bucket (not cumulative); the last one past the largest bound (+Inf) */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    let i = 0;
    while (i < this.bounds.length && v > this.bounds[i]) i++;
    this.counts[i]++;
    this.sum += v;
    this.count++;
  }
}

abstract class HotMetric<S extends { labels: Labels }> {
  protected readonly series = new Map<string, S>();
  constructor(
    readonly name: string,
    readonly help: string,
    protected readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    // prom-client's Registry takes any object with its metric shape (name, get, reset)
    registry.registerMetric(this as unknown as Parameters<Registry["registerMetric"]>[0]);
  }
  /**
   * An unlabeled metric has its one series from the start (0 before anything happened); subclasses call it once their
   * fields exist.
   */
  protected init(): void {
    if (!this.labelNames.length) this.child();
  }
  protected abstract make(labels: Labels): S;
  /**
   * The series of these label values (in labelNames order), made once and kept: bind it, then call it on the hot path.
   */
  child(...values: string[]): S {
    if (values.length !== this.labelNames.length)
      throw new Error(`${this.name} takes the labels ${this.labelNames.join(", ")}`);
    const key = values.join("\u0000");
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = this.make(Object.fromEntries(this.labelNames.map((n, i) => [n, values[i]])))));
    return s;
  }
  reset(): void {
    this.series.clear();
    if (!this.labelNames.length) this.child();
  }
}

export class HotCounter extends HotMetric<CounterSeries> {
  constructor(o: { name: string; help: string; labelNames?: readonly string[]; registry: Registry }) {
    super(o.name, o.help, o.labelNames ?? [], o.registry);
    this.init();
  }
  protected make(labels: Labels): CounterSeries {
    return new CounterSeries(labels);
  }
  get() {
    return {
      name: this.name,
      help: this.help,
      type: "counter",
      aggregator: "sum",
      values: [...this.series.values()].map((s): Value => ({ labels: s.labels, value: s.value })),
    };
  }
}

export class HotHistogram extends HotMetric<HistogramSeries> {
  readonly bounds: readonly number[];
  constructor(o: {
    name: string;
    help: string;
    labelNames?: readonly string[];
    buckets: readonly number[];
    registry: Registry;
  }) {
    super(o.name, o.help, o.labelNames ?? [], o.registry);
    this.bounds = [...o.buckets].sort((a, b) => a - b);
    this.init();
  }
  protected make(labels: Labels): HistogramSeries {
    return new HistogramSeries(labels, this.bounds);
  }
  get() {
    const values: Value[] = [];
    for (const s of this.series.values()) {
      let acc = 0;
      this.bounds.forEach((le, i) =>
        values.push({
          labels: { le: String(le), ...s.labels },
          value: (acc += s.counts[i]),
          metricName: `${this.name}_bucket`,
        }),
      );
      values.push({ labels: { le: "+Inf", ...s.labels }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: "histogram", aggregator: "sum", values };
  }
}
