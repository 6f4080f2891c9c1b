// The tower's Prometheus metrics (docs/metrics.md): one registry per tower (several towers in one
// test process never share one), holding the process metrics of prom-client, the work path's
// meter, the HTTP meter and the gauges computed at scrape time.
import { Registry } from "prom-client";
import { registerProcessMetrics } from "../../common/process-metrics.js";
import type { WorkMeter } from "../domain/deps.js";
import { createHttpMeter, type HttpMeter } from "./http-meter.js";
import { registerScrapeGauges, type ScrapeSources } from "./scrape-gauges.js";
import { createWorkMeter } from "./work-meter.js";

export interface TowerMetrics {
  readonly registry: Registry;
  readonly work: WorkMeter;
  readonly http: HttpMeter;
  /** The registry in Prometheus's text format (0.0.4). */
  render(): Promise<string>;
  readonly contentType: string;
}

/** How long the scrape-time database counts are reused (several scrapers cost one query round). */
export const SCRAPE_CACHE_MS = 1000;

export function createTowerMetrics(opts: {
  now: () => number;
  cacheMs?: number;
}): TowerMetrics & { serve(src: ScrapeSources): void } {
  const registry = new Registry();
  registerProcessMetrics(registry);
  return {
    registry,
    work: createWorkMeter(registry),
    http: createHttpMeter(registry),
    /** The gauges that read the store and the tower's parts, once they exist. */
    serve: (src) => registerScrapeGauges(registry, src, opts.cacheMs ?? SCRAPE_CACHE_MS, opts.now),
    render: () => registry.metrics(),
    contentType: registry.contentType,
  };
}
