// epd's Prometheus metrics (docs/metrics.md), served on EP_METRICS_LISTEN only (off by default):
// the process, the link to the tower, the agents it claims for, the runs it holds and every run
// that ended (by runtime and outcome: bounded words, no task or agent id), the local fan-out's
// clients. What changes on a run is a counter and a histogram child bound once; the rest is read
// from the daemon's parts when Prometheus scrapes.
import { Gauge, Registry } from "prom-client";
import { HotCounter, HotHistogram } from "../../common/hot-metrics.js";
import { registerProcessMetrics } from "../../common/process-metrics.js";
import type { EndedRun } from "../worker/worker-types.js";

/** From a shell command's milliseconds to a coding agent's hours (the tower's run buckets). */
const RUN_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600];

/** What the scrape reads of the daemon. */
export interface EpdSources {
  linkConnected(): boolean;
  /** agents this node claims for: from agents.json, and profile agents of agents.toml */
  agents(): { local: number; profiles: number };
  running(): number;
  /** local fan-out clients; undefined when the fan-out is off */
  fanoutClients(): number | undefined;
}

export interface EpdMetrics {
  readonly registry: Registry;
  runEnded(run: EndedRun): void;
  /** Reads the daemon's parts at scrape time; called once they exist. */
  serve(src: EpdSources): void;
  render(): Promise<string>;
  readonly contentType: string;
}

export function createEpdMetrics(): EpdMetrics {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const runs = new HotCounter({
    name: "ep_node_runs_total",
    help: "Runs that ended on this node, by runtime and outcome.",
    labelNames: ["runtime", "outcome"],
    registry,
  });
  const duration = new HotHistogram({
    name: "ep_node_run_duration_seconds",
    help: "How long runs on this node took, by runtime and outcome.",
    labelNames: ["runtime", "outcome"],
    buckets: RUN_BUCKETS,
    registry,
  });
  const children = new Map<
    string,
    { runs: ReturnType<HotCounter["child"]>; duration: ReturnType<HotHistogram["child"]> }
  >();
  return {
    registry,
    runEnded(run) {
      const key = `${run.runtime} ${run.outcome}`;
      let c = children.get(key);
      if (!c)
        children.set(
          key,
          (c = { runs: runs.child(run.runtime, run.outcome), duration: duration.child(run.runtime, run.outcome) }),
        );
      c.runs.inc();
      c.duration.observe(Math.max(0, run.seconds));
    },
    serve(src) {
      new Gauge({
        name: "ep_node_link_connected",
        help: "1 while the node's link to the tower is connected, else 0.",
        registers: [registry],
        collect() {
          this.set(src.linkConnected() ? 1 : 0);
        },
      });
      new Gauge({
        name: "ep_node_agents",
        help: "Agents this node claims for, by where they are defined (agents.json: local, agents.toml: profile).",
        labelNames: ["source"],
        registers: [registry],
        collect() {
          const a = src.agents();
          this.set({ source: "local" }, a.local);
          this.set({ source: "profile" }, a.profiles);
        },
      });
      new Gauge({
        name: "ep_node_runs_running",
        help: "Runs in progress on this node.",
        registers: [registry],
        collect() {
          this.set(src.running());
        },
      });
      new Gauge({
        name: "ep_node_fanout_clients",
        help: "Clients of the local event fan-out (EP_FANOUT_LISTEN); absent when it is off.",
        registers: [registry],
        collect() {
          this.reset();
          const n = src.fanoutClients();
          if (n !== undefined) this.set(n);
        },
      });
    },
    render: () => registry.metrics(),
    contentType: registry.contentType,
  };
}
