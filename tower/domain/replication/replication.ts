// Several tower replicas on one PostgreSQL database (docs/deploy.md). Each replica keeps its
// own in-process hub; this module makes every committed event reach every replica's hub
// exactly once, and carries node-link commands to the replica that holds the link.
//
// Events. Transactions commit in parallel, so ids can become visible out of order, but
// PostgresStore.listEvents only returns events up to its horizon (store/postgres/
// event-horizon.ts): when it returns event N, every lower id is visible or never will be
// (rolled back). The relay therefore keeps one cursor, "every committed event ≤ cursor has
// reached the local hub", and moves it by reading `id > cursor` from the store, in order. After a local
// commit the replica NOTIFYs `ep_events` with the new max id (batched per loop turn);
// every replica LISTENs and reads what it has not seen. Relayed events are published to
// the local hub, which drops ids it already published (events this replica committed
// itself), and are never NOTIFYed again. With PostgresStore the NOTIFY is part of the event
// INSERT itself (announceEvents: delivered at commit, no extra round trip). A poll every `pollMs` and a re-read after
// the LISTEN connection comes back cover a NOTIFY lost in a crash between COMMIT and NOTIFY.
//
// Node links. A link belongs to the replica the daemon is connected to; fleet.ts records
// the owner in the store (meta `link:<node id>` = "<replica id> <link id>"). A command for
// a node linked elsewhere (attach, signal, supervise) is NOTIFYed on `ep_link` to the
// owner, which delivers it and answers; no answer within `requestTimeoutMs` means the
// node is not linked anywhere (the owner died; the daemon relinks to a live replica).
import { randomBytes } from "node:crypto";
import type { Clock } from "../../../common/clock.js";
import type { Logger } from "../../../common/log.js";
import type { Store } from "../../store/store.js";
import type { EventHub } from "../event-hub.js";
import { EventRelay } from "./events.js";
import { LinkRelay } from "./links.js";
import type { ReplicaSignals, ReplicatedStore, ReplicationOptions, ReplicationStats, Replication } from "./types.js";

/** The store when it can carry several replicas (PostgreSQL), else undefined. */
export function replicatedStore(store: Store): ReplicatedStore | undefined {
  const s = store as Partial<ReplicaSignals> & Store;
  return store.dialect === "postgres" &&
    typeof s.listen === "function" &&
    typeof s.notify === "function" &&
    typeof s.withClusterLock === "function"
    ? (s as ReplicatedStore)
    : undefined;
}

/** Channel names carry the schema, so deployments sharing a database do not hear each other. */
export function channelName(base: string, schema: string): string {
  if (!schema || schema === "public") return base;
  if (/^[A-Za-z0-9_]{1,48}$/.test(schema)) return `${base}.${schema}`;
  let h = 0;
  for (const c of schema) h = (Math.imul(h, 31) + c.codePointAt(0)!) >>> 0;
  return `${base}.${h.toString(36)}`;
}

export async function startReplication(
  deps: { store: ReplicatedStore; hub: EventHub; log: Logger; clock: Clock },
  opts: ReplicationOptions = {},
): Promise<Replication> {
  const { store, hub, log, clock } = deps;
  const replicaId = opts.replicaId ?? `rep_${randomBytes(6).toString("hex")}`;
  const pollMs = opts.pollMs ?? 2000;
  const requestTimeoutMs = opts.requestTimeoutMs ?? 2000;
  const schema = await store.currentSchema();
  const channels = { events: channelName("ep_events", schema), link: channelName("ep_link", schema) } as const;
  const stats: ReplicationStats = { relayed: 0, notified: 0, reads: 0, served: 0 };
  let closed = false;

  const events = await EventRelay.start({ store, hub, log, clock, replicaId, channel: channels.events, pollMs, stats });
  const links = await LinkRelay.start({
    store,
    log,
    clock,
    replicaId,
    channel: channels.link,
    requestTimeoutMs,
    stats,
  });
  const locked = <T>(name: string, wait: boolean, fn: () => Promise<T>): Promise<T | undefined> =>
    store.withClusterLock(name, wait, fn);

  return {
    replicaId,
    channels,
    get cursor() {
      return events.cursor;
    },
    linkToken: (linkId) => `${replicaId} ${linkId}`,
    serveLinks: (local, proof) => links.serveLinks(local, proof),
    linked: (nodeId) => links.linked(nodeId),
    send: (nodeId, msg) => links.send(nodeId, msg),
    proof: (nodeId, attachId) => links.proof(nodeId, attachId),
    exclusive: async (name, fn) => (await locked(name, true, fn)) as Awaited<ReturnType<typeof fn>>,
    tryExclusive: (name, fn) => locked(name, false, fn),
    catchUp: () => events.read(),
    stats: () => ({ ...stats }),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([events.close(), links.close()]);
    },
  };
}
