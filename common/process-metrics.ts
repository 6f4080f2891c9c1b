// The process metrics both the tower and epd export (docs/metrics.md): prom-client's defaults
// (CPU, memory, heap, event-loop lag, GC, handles), less the three totals that are gauges named
// like counters (`nodejs_active_handles_total`, …): `promtool check metrics` rejects a gauge
// with a `_total` suffix, and each is the sum of the same gauge by type (`nodejs_active_handles`).
import { collectDefaultMetrics, type Registry } from "prom-client";

const GAUGES_NAMED_AS_COUNTERS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

export function registerProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of GAUGES_NAMED_AS_COUNTERS) registry.removeSingleMetric(name);
}
