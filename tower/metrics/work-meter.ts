// The work path's measurements (the WorkMeter of tower/domain/deps.ts): submit→claim latency,
// run duration and outcomes. Called after each commit, on the hot path, so each call is a map
// update and pre-bound series (common/hot-metrics.ts): no label hashing, no I/O, no allocation
// beyond the map entry. Cardinality is fixed: outcome is one of four words, no task or domain id.
import type { Registry } from "prom-client";
import { HotCounter, HotHistogram } from "../../common/hot-metrics.js";
import type { WorkMeter } from "../domain/deps.js";
import type { TaskRow } from "../store/store.js";

/** From a millisecond claim to an hour-long wait in a queue nobody serves. */
export const CLAIM_LATENCY_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
];
/** From a shell command's milliseconds to a coding agent's hours. */
export const RUN_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600];

const OUTCOMES = ["succeeded", "failed", "requeued", "released"] as const;

/**
 * How many claims a replica remembers for the run duration: the tasks held at once, with room.
 * Past it the oldest claim is forgotten (its run is then not measured), so memory stays bounded
 * when runs end on another replica or by a cancel or an expired lease, which report nothing here.
 */
export const CLAIMS_REMEMBERED = 100_000;

export function createWorkMeter(registry: Registry): WorkMeter {
  const claimLatency = new HotHistogram({
    name: "ep_task_claim_latency_seconds",
    help: "Time from a task's submission to its first claim (attempt 1), on the replica that claimed it.",
    buckets: CLAIM_LATENCY_BUCKETS,
    registry,
  }).child();
  const runDuration = new HotHistogram({
    name: "ep_task_run_duration_seconds",
    help: "Time from a claim to the outcome its agent reported, when the same replica saw both.",
    labelNames: ["outcome"],
    buckets: RUN_DURATION_BUCKETS,
    registry,
  });
  const claims = new HotCounter({
    name: "ep_task_claims_total",
    help: "Tasks claimed (every attempt), on this replica.",
    registry,
  }).child();
  const outcomes = new HotCounter({
    name: "ep_task_outcomes_total",
    help: "Outcomes agents reported, on this replica.",
    labelNames: ["outcome"],
    registry,
  });
  // every outcome's series bound (and exported as 0) from the start
  const durationOf = Object.fromEntries(OUTCOMES.map((o) => [o, runDuration.child(o)]));
  const outcomeOf = Object.fromEntries(OUTCOMES.map((o) => [o, outcomes.child(o)]));
  const claimedAt = new Map<string, number>();

  return {
    claimed(t: TaskRow, atMs: number) {
      claims.inc();
      if (t.attempts === 1) claimLatency.observe(Math.max(0, atMs - Date.parse(t.createdAt)) / 1000);
      if (claimedAt.size >= CLAIMS_REMEMBERED && !claimedAt.has(t.id)) claimedAt.delete(claimedAt.keys().next().value!);
      claimedAt.set(t.id, atMs);
    },
    reported(t, outcome, atMs) {
      outcomeOf[outcome].inc();
      const from = claimedAt.get(t.id);
      if (from === undefined) return;
      claimedAt.delete(t.id);
      durationOf[outcome].observe(Math.max(0, atMs - from) / 1000);
    },
  };
}
