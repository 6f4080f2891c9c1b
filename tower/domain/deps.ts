// What every domain module is given. Domain modules import nothing from fastify or Connect.
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { Store } from "../store/store.js";
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

export interface Deps {
  store: Store;
  clock: Clock;
  hub: EventHub;
  log: Logger;
  limits: TowerLimits;
}
