// What every domain module is given. Domain modules import nothing from fastify or Connect.
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { Store, TaskRow } from "../store/store.js";
import type { EventHub } from "./event-hub.js";

export interface TowerLimits {
  /** Task lease, renewed by heartbeats. */
  leaseMs: number;
  /** Attempts before a task whose lease keeps expiring fails. */
  maxAttempts: number;
  /** Longest a ClaimTask long poll may wait. */
  maxClaimWaitMs: number;
}

export const DEFAULT_LIMITS: TowerLimits = { leaseMs: 60_000, maxAttempts: 3, maxClaimWaitMs: 30_000 };

/**
 * What the work path tells the tower's metrics (tower/metrics/), after each commit: a claim and
 * an agent's outcome. Plain calls on the hot path: an implementation does a few map and counter
 * updates, never I/O.
 */
export interface WorkMeter {
  /** A task was claimed (its row after the claim), at `atMs`. */
  claimed(t: TaskRow, atMs: number): void;
  /**
   * An agent reported the outcome of a task it held: succeeded, failed, requeued (a retryable failure) or released
   * (given back).
   */
  reported(t: TaskRow, outcome: "succeeded" | "failed" | "requeued" | "released", atMs: number): void;
}

export interface Deps {
  store: Store;
  clock: Clock;
  hub: EventHub;
  log: Logger;
  limits: TowerLimits;
  /** the tower's metrics; absent where nothing measures (domain unit tests) */
  meter?: WorkMeter;
}
