// What a child process of the peers bench needs to reach its system: handed down in one
// environment variable (EP_PEER_CONFIG, JSON) by run.ts.

export type PeerSystem = "bullmq" | "pg-boss" | "graphile-worker";
export type System = PeerSystem | "ep-sqlite" | "ep-pg";

export interface PeerConfig {
  system: PeerSystem;
  concurrency: number;
  /** the queue (BullMQ, pg-boss) or task name (graphile-worker) the jobs go to */
  queue: string;
  /** PostgreSQL URL with this run's application_name (pg-boss, graphile-worker) */
  pgUrl: string;
  /** the fresh schema pg-boss or graphile-worker keeps its tables in */
  schema: string;
  /** Redis URL with the bench's db index (BullMQ) */
  redisUrl: string;
  /** BullMQ's key prefix: this run's keys, deleted after */
  redisPrefix: string;
  /** jobs a pg-boss polling loop takes per fetch */
  pgBossBatch: number;
}

/** What the EP submitter needs: the tower, a token that may create tasks, the mission. */
export interface EpSubmitConfig {
  system: "ep";
  url: string;
  token: string;
  missionId: string;
}

export type SubmitConfig = PeerConfig | EpSubmitConfig;

export const CONFIG_ENV = "EP_PEER_CONFIG";

export function peerFromEnv(): PeerConfig {
  const c = configFromEnv();
  if (c.system === "ep") throw new Error(`${CONFIG_ENV}: a peer worker needs a peer system, got ep`);
  return c;
}

export function configFromEnv(): SubmitConfig {
  const raw = process.env[CONFIG_ENV];
  if (!raw) throw new Error(`${CONFIG_ENV} is not set: this file is a child process of bench/peers/run.ts`);
  return JSON.parse(raw) as SubmitConfig;
}
