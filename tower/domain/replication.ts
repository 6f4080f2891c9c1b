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
// INSERT itself (announceEvents: delivered at commit, no extra round trip). A poll every `pollMs` and a re-read after the
// LISTEN connection comes back cover a NOTIFY lost in a crash between COMMIT and NOTIFY.
//
// Node links. A link belongs to the replica the daemon is connected to; fleet.ts records
// the owner in the store (meta `link:<node id>` = "<replica id> <link id>"). A command for
// a node linked elsewhere (attach, signal, supervise) is NOTIFYed on `ep_link` to the
// owner, which delivers it and answers; no answer within `requestTimeoutMs` means the
// node is not linked anywhere (the owner died; the daemon relinks to a live replica).
import { randomBytes } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { Store } from "../store/store.js";
import type { EventHub } from "./event-hub.js";

/** What a store offers for replication (PostgresStore). */
export interface ReplicaSignals {
  listen(channel: string, onPayload: (payload: string) => void, opts?: { onReconnect?: () => void }): Promise<() => Promise<void>>;
  notify(channel: string, payload: string): Promise<void>;
  /** Makes every event insert NOTIFY the channel inside its own transaction (PostgresStore). */
  announceEvents?(channel: string | undefined, from?: string): void;
  /** The schema the tables live in (channel names are scoped to it). */
  currentSchema(): Promise<string>;
  /** Runs fn holding the cluster-wide lock `name`; without `wait`, undefined when another replica holds it. */
  withClusterLock<T>(name: string, wait: boolean, fn: () => Promise<T>): Promise<T | undefined>;
}

export type ReplicatedStore = Store & ReplicaSignals;

/** The store when it can carry several replicas (PostgreSQL), else undefined. */
export function replicatedStore(store: Store): ReplicatedStore | undefined {
  const s = store as Partial<ReplicaSignals> & Store;
  return store.dialect === "postgres" && typeof s.listen === "function" && typeof s.notify === "function" && typeof s.withClusterLock === "function" ? (s as ReplicatedStore) : undefined;
}

export interface LinkCommand {
  kind: string;
  taskId?: string;
  agentId?: string;
  data?: JsonObject;
}

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

/** How long the cursor may stay below a known id before the store is read (ms; doubles up to pollMs). */
const GAP_WAIT_MS = 20;
const PAGE = 1000;
/** Bytes of message text per NOTIFY; PostgreSQL allows 7,999 and the frame header needs a few. */
const CHUNK = 7000;

/** Channel names carry the schema, so deployments sharing a database do not hear each other. */
export function channelName(base: string, schema: string): string {
  if (!schema || schema === "public") return base;
  if (/^[A-Za-z0-9_]{1,48}$/.test(schema)) return `${base}.${schema}`;
  let h = 0;
  for (const c of schema) h = (Math.imul(h, 31) + c.codePointAt(0)!) >>> 0;
  return `${base}.${h.toString(36)}`;
}

interface LinkRequest {
  t: "req";
  id: string;
  from: string;
  to: string;
  node: string;
  op: "linked" | "send" | "proof";
  msg?: LinkCommand;
  attach_id?: string;
}

interface LinkReply {
  t: "res";
  id: string;
  to: string;
  ok: boolean;
  proof?: string;
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

  // ---- events --------------------------------------------------------------------------

  let cursor = await store.lastEventId();
  let relaying = false;
  let reading = false;
  let again = false;
  let idle: Promise<void> = Promise.resolve();

  function read(): Promise<void> {
    if (closed) return idle;
    if (reading) {
      again = true;
      return idle;
    }
    reading = true;
    idle = (async () => {
      try {
        do {
          again = false;
          for (;;) {
            stats.reads++;
            const rows = await store.listEvents({ afterId: cursor, limit: PAGE });
            if (closed) return;
            if (rows.length) {
              // the store returns events up to its horizon: nothing ≤ the last row can still appear
              cursor = Math.max(cursor, rows[rows.length - 1].id);
              for (const id of ahead) if (id <= cursor) ahead.delete(id);
              while (ahead.delete(cursor + 1)) cursor++;
              stats.relayed += rows.length;
              relaying = true;
              try {
                hub.publish(rows);
              } finally {
                relaying = false;
              }
            }
            if (rows.length < PAGE) break;
          }
        } while (again && !closed);
      } catch (err) {
        if (!closed) log.warn("replication could not read the event log", { error: (err as Error).message });
      } finally {
        reading = false;
        settle();
      }
    })();
    return idle;
  }

  // Local commits: move the cursor when they are the next ids, and tell the other replicas
  // (unless the store's event INSERT does that itself).
  const announced = typeof store.announceEvents === "function";
  if (announced) store.announceEvents!(channels.events, replicaId);
  let notifyMax = 0;
  let notifyQueued = false;
  // Local commits are published in the order their COMMITs come back, not always in id
  // order: ids published above the cursor wait here until the ones below them arrive.
  const ahead = new Set<number>();
  const unsubscribeHub = hub.subscribe((rows) => {
    if (relaying || closed) return;
    let max = 0;
    for (const r of rows) {
      if (r.id > cursor) ahead.add(r.id);
      if (r.id > max) max = r.id;
    }
    while (ahead.delete(cursor + 1)) cursor++;
    if (max > known) known = max;
    // a gap that stays (an id rolled back, or another replica's event not read yet) is crossed by a read
    if (ahead.size > 4 * PAGE) void read();
    else settle();
    if (announced) return;
    if (max > notifyMax) notifyMax = max;
    if (notifyQueued) return;
    notifyQueued = true;
    setImmediate(() => {
      notifyQueued = false;
      if (closed) return;
      stats.notified++;
      store.notify(channels.events, JSON.stringify({ id: notifyMax, from: replicaId })).catch((err: Error) => {
        // the others still find the events on their next poll
        if (!closed) log.warn("replication could not NOTIFY", { error: err.message });
      });
    });
  });

  // Behind: an id above the cursor is known (announced, or committed here) but the ids below
  // it have not all arrived. This replica's own events reach the local hub from commit()
  // itself, usually right after their announcement, and the store holds back events above an
  // id still being written; so look again a little later, less often while the gap stays.
  let known = cursor;
  let gapTimer: ClockTimer | undefined;
  let gapWaitMs = GAP_WAIT_MS;
  function settle(): void {
    if (closed) return;
    if (cursor >= known) {
      if (gapTimer) clock.clearTimeout(gapTimer);
      gapTimer = undefined;
      gapWaitMs = GAP_WAIT_MS;
      return;
    }
    gapTimer ??= clock.setTimeout(() => {
      gapTimer = undefined;
      gapWaitMs = Math.min(gapWaitMs * 2, pollMs);
      void read();
    }, gapWaitMs);
  }

  const unlistenEvents = await store.listen(
    channels.events,
    (payload) => {
      let id = Number.POSITIVE_INFINITY;
      let from: unknown;
      try {
        ({ id, from } = JSON.parse(payload) as { id: number; from?: unknown });
        id = Number(id);
      } catch {
        // an unreadable signal still means "look"
      }
      if (id <= cursor) return;
      if (from === replicaId && Number.isFinite(id)) {
        known = Math.max(known, id);
        settle();
      } else void read();
    },
    { onReconnect: () => void read() },
  );

  let pollTimer: ClockTimer | undefined = clock.setTimeout(function poll() {
    void read().finally(() => {
      if (!closed) pollTimer = clock.setTimeout(poll, pollMs);
    });
  }, pollMs);

  // ---- node links across replicas ------------------------------------------------------

  let local: LocalLinks | undefined;
  let proofOf: ((secret: string, attachId: string) => string) | undefined;
  const pending = new Map<string, { resolve: (r: LinkReply | undefined) => void; timer: ClockTimer }>();
  const partial = new Map<string, { parts: string[]; got: number; at: number }>();

  /** Sends one JSON message on the link channel, split into frames `<id> <i> <n> <text>` when long. */
  async function post(msg: LinkRequest | LinkReply): Promise<void> {
    const text = JSON.stringify(msg);
    if (Buffer.byteLength(text) <= CHUNK) return store.notify(channels.link, `${msg.id} 0 1 ${text}`);
    const parts: string[] = [];
    let rest = text;
    while (rest.length) {
      // slice by characters small enough that even 4-byte characters stay under the limit
      parts.push(rest.slice(0, CHUNK / 4));
      rest = rest.slice(CHUNK / 4);
    }
    // one transaction: the frames arrive together and in order, or not at all
    await store.transaction(async (tx) => {
      const t = tx as unknown as ReplicaSignals;
      for (let i = 0; i < parts.length; i++) await t.notify(channels.link, `${msg.id} ${i} ${parts.length} ${parts[i]}`);
    });
  }

  function frame(payload: string): LinkRequest | LinkReply | undefined {
    const m = /^(\S+) (\d+) (\d+) ([\s\S]*)$/.exec(payload);
    if (!m) return undefined;
    const [, id, iRaw, nRaw, text] = m;
    const i = Number(iRaw);
    const n = Number(nRaw);
    let whole = text;
    if (n > 1) {
      const now = clock.now();
      for (const [k, v] of partial) if (now - v.at > 60_000) partial.delete(k);
      let p = partial.get(id);
      if (!p) partial.set(id, (p = { parts: new Array<string>(n), got: 0, at: now }));
      if (p.parts[i] === undefined) p.got++;
      p.parts[i] = text;
      if (p.got < n) return undefined;
      partial.delete(id);
      whole = p.parts.join("");
    }
    try {
      return JSON.parse(whole) as LinkRequest | LinkReply;
    } catch {
      return undefined;
    }
  }

  async function serve(req: LinkRequest): Promise<void> {
    if (!local || !local.isLinked(req.node)) return; // not ours (any more): silence means "no"
    const reply: LinkReply = { t: "res", id: req.id, to: req.from, ok: true };
    if (req.op === "send") reply.ok = !!req.msg && local.send(req.node, req.msg);
    else if (req.op === "proof") {
      const secret = local.attachSecretOf(req.node);
      reply.ok = !!secret && !!proofOf && !!req.attach_id;
      if (reply.ok) reply.proof = proofOf!(secret!, req.attach_id!);
    }
    stats.served++;
    await post(reply);
  }

  const unlistenLink = await store.listen(channels.link, (payload) => {
    const msg = frame(payload);
    if (!msg || closed) return;
    if (msg.t === "req") {
      if (msg.to !== replicaId) return;
      serve(msg).catch((err: Error) => log.warn("replication could not answer a link command", { error: err.message, node_id: msg.node }));
    } else if (msg.t === "res" && msg.to === replicaId) {
      const p = pending.get(msg.id);
      if (!p) return;
      pending.delete(msg.id);
      clock.clearTimeout(p.timer);
      p.resolve(msg);
    }
  });

  /** The replica holding the node's link according to the store, unless it is this one. */
  async function ownerOf(nodeId: string): Promise<string | undefined> {
    const v = await store.getMeta(`link:${nodeId}`);
    const owner = v?.split(" ", 1)[0];
    return owner && owner !== replicaId ? owner : undefined;
  }

  async function ask(nodeId: string, op: LinkRequest["op"], extra: Partial<LinkRequest> = {}): Promise<LinkReply | undefined> {
    if (closed) return undefined;
    const owner = await ownerOf(nodeId);
    if (!owner) return undefined;
    const id = `${replicaId}.${randomBytes(6).toString("hex")}`;
    const answer = new Promise<LinkReply | undefined>((resolve) => {
      const timer = clock.setTimeout(() => {
        pending.delete(id);
        resolve(undefined);
      }, requestTimeoutMs);
      pending.set(id, { resolve, timer });
    });
    try {
      await post({ t: "req", id, from: replicaId, to: owner, node: nodeId, op, ...extra });
    } catch (err) {
      const p = pending.get(id);
      if (p) {
        pending.delete(id);
        clock.clearTimeout(p.timer);
        p.resolve(undefined);
      }
      throw new EpError("unavailable", `cannot reach the replica holding node ${nodeId}'s link: ${(err as Error).message}`);
    }
    return answer;
  }

  // ---- cluster locks ---------------------------------------------------------------------

  const locked = <T>(name: string, wait: boolean, fn: () => Promise<T>): Promise<T | undefined> => store.withClusterLock(name, wait, fn);

  return {
    replicaId,
    channels,
    get cursor() {
      return cursor;
    },
    linkToken: (linkId) => `${replicaId} ${linkId}`,
    serveLinks(links, proof) {
      local = links;
      proofOf = proof;
    },
    async linked(nodeId) {
      if (local?.isLinked(nodeId)) return true;
      return (await ask(nodeId, "linked"))?.ok === true;
    },
    async send(nodeId, msg) {
      if (local?.send(nodeId, msg)) return true;
      return (await ask(nodeId, "send", { msg }))?.ok === true;
    },
    async proof(nodeId, attachId) {
      const secret = local?.attachSecretOf(nodeId);
      if (secret && proofOf) return proofOf(secret, attachId);
      const r = await ask(nodeId, "proof", { attach_id: attachId });
      return r?.ok ? r.proof : undefined;
    },
    exclusive: async (name, fn) => (await locked(name, true, fn)) as Awaited<ReturnType<typeof fn>>,
    tryExclusive: (name, fn) => locked(name, false, fn),
    catchUp: read,
    stats: () => ({ ...stats }),
    async close() {
      if (closed) return;
      closed = true;
      unsubscribeHub();
      if (announced) store.announceEvents!(undefined);
      if (pollTimer) clock.clearTimeout(pollTimer);
      pollTimer = undefined;
      if (gapTimer) clock.clearTimeout(gapTimer);
      gapTimer = undefined;
      for (const p of pending.values()) {
        clock.clearTimeout(p.timer);
        p.resolve(undefined);
      }
      pending.clear();
      // closing: the listener connection goes with the store; a failed UNLISTEN changes nothing
      await Promise.all([unlistenEvents().catch(() => {}), unlistenLink().catch(() => {})]);
      await idle.catch(() => {}); // the poll loop logs its own failures; here we only wait for it to stop
    },
  };
}
