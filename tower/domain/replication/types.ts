// Replication's shared types: what a store offers for it, what it is given, what it offers the tower.
import type { Store } from "../../store/store.js";
import type { LinkCommand } from "../fleet/types.js";

/** What a store offers for replication (PostgresStore). */
export interface ReplicaSignals {
  listen(
    channel: string,
    onPayload: (payload: string) => void,
    opts?: { onReconnect?: () => void },
  ): Promise<() => Promise<void>>;
  notify(channel: string, payload: string): Promise<void>;
  /** Makes every event insert NOTIFY the channel inside its own transaction (PostgresStore). */
  announceEvents?(channel: string | undefined, from?: string): void;
  /** The schema the tables live in (channel names are scoped to it). */
  currentSchema(): Promise<string>;
  /** Runs fn holding the cluster-wide lock `name`; without `wait`, undefined when another replica holds it. */
  withClusterLock<T>(name: string, wait: boolean, fn: () => Promise<T>): Promise<T | undefined>;
}

export type ReplicatedStore = Store & ReplicaSignals;

/** This replica's own links, as fleet.ts has them. */
export interface LocalLinks {
  isLinked(nodeId: string): boolean;
  send(nodeId: string, msg: LinkCommand): boolean;
  attachSecretOf(nodeId: string): string | undefined;
}

export interface ReplicationOptions {
  /** Default: a random `rep_…` id per process. */
  replicaId?: string;
  /** Safety-net re-read of the event log (ms, default 2000). */
  pollMs?: number;
  /** How long a command for a link on another replica waits for its answer (ms, default 2000). */
  requestTimeoutMs?: number;
}

export interface ReplicationStats {
  /** events read from the store and handed to the hub (duplicates dropped there) */
  relayed: number;
  /** NOTIFYs sent for local commits */
  notified: number;
  /** store reads of the event log */
  reads: number;
  /** link commands answered for other replicas */
  served: number;
}

export interface Replication {
  readonly replicaId: string;
  readonly channels: { readonly events: string; readonly link: string };
  /** Every committed event with id ≤ cursor has reached this replica's hub. */
  readonly cursor: number;
  /** The value fleet.ts stores under `link:<node id>` for a link it holds. */
  linkToken(linkId: string): string;
  /** Serves this replica's links to the others (attach, signal, supervise). */
  serveLinks(local: LocalLinks, proof: (attachSecret: string, attachId: string) => string): void;
  /** Whether some replica (this one included) holds the node's link. */
  linked(nodeId: string): Promise<boolean>;
  /** Delivers a command on the node's link wherever it is; false when nobody holds it. */
  send(nodeId: string, msg: LinkCommand): Promise<boolean>;
  /** proof(attach secret of the node's current link, attachId), asked of the replica holding it. */
  proof(nodeId: string, attachId: string): Promise<string | undefined>;
  /** Runs fn while holding a cluster-wide lock named `name` (waits for it). */
  exclusive<T>(name: string, fn: () => Promise<T>): Promise<T>;
  /** Runs fn if no other replica holds the lock `name` right now; undefined otherwise. */
  tryExclusive<T>(name: string, fn: () => Promise<T>): Promise<T | undefined>;
  /** Reads the event log now (tests, diagnostics). */
  catchUp(): Promise<void>;
  stats(): ReplicationStats;
  close(): Promise<void>;
}
