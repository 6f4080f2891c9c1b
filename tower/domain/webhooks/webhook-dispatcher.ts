// The webhook dispatcher: off the work path, driven by the committed event log.
//
// Two loops, both in the background. The reader follows the log from a cursor kept in the store
// and, in one transaction, queues a delivery row per (webhook, matching event) and moves the
// cursor (a compare-and-set, and on PostgreSQL under a cluster lock, so replicas never queue one
// stretch twice; a unique key catches the rest). The sender takes due rows under a lease (FOR
// UPDATE SKIP LOCKED on PostgreSQL), POSTs them and records each attempt. Nothing waits for a
// receiver but the sender; a commit only pokes the reader (a Set lookup per event) and only while
// some webhook exists. What is queued is in the store, so a restart resumes it.
import type { Clock, ClockTimer } from "../../../common/clock.js";
import { iso } from "../../../common/clock.js";
import { newId } from "../../../common/ids.js";
import type { Logger } from "../../../common/log.js";
import type { EventRow, Store } from "../../store/store.js";
import type { DeliveryRow, WebhookRow } from "../../store/webhook-store.js";
import type { EventHub } from "../event-hub.js";
import type { KeySource } from "../secrets.js";
import { decryptSecret } from "../secrets-crypto.js";
import { attemptHeaders, createReceiverAgents, outcomeOf, postDelivery } from "./webhook-attempt.js";
import { deliveryBody, eventChunk, WEBHOOK_EVENT_TYPES, WEBHOOK_EVENTS } from "./webhook-events.js";
import { sealName } from "./webhook-service.js";
import type { WebhookSettings } from "./webhook-settings.js";

/** Events read from the log per transaction. */
const PAGE = 500;
/** Finished deliveries are pruned at most this often. */
const PRUNE_EVERY_MS = 600_000;
/**
 * How long a commit's poke waits before the reader runs: under load the events of many commits
 * are read and queued in one transaction instead of one each (a notification 50 ms later is the
 * same notification; the work path's writer is not taken once per commit).
 */
const BATCH_MS = 50;

export interface WebhookDispatcherDeps {
  store: Store;
  hub: EventHub;
  clock: Clock;
  log: Logger;
  keys: KeySource;
  settings: WebhookSettings;
  /** PostgreSQL replicas: run fn unless another replica is running it now (replication.tryExclusive) */
  exclusive?: <T>(name: string, fn: () => Promise<T>) => Promise<T | undefined>;
}

export interface WebhookDispatcher {
  /** Reads the log and sends what is due now (a test delivery was queued). */
  kick(): void;
  /** Resolves when nothing is being read or sent (tests, shutdown). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

const WAKING = new Set<string>([...WEBHOOK_EVENTS, "webhook.created"]);

class CursorMoved extends Error {}

export function createWebhookDispatcher(deps: WebhookDispatcherDeps): WebhookDispatcher {
  const { store, clock, log, settings } = deps;
  const exclusive = deps.exclusive ?? (<T>(_name: string, fn: () => Promise<T>) => fn());
  const leaseMs = settings.timeoutMs * 2 + 30_000;
  const replica = newId("whd").slice(4, 14);
  let closed = false;
  /** whether any webhook exists (as of the last read); commits poke the reader only then */
  let active = true;
  /** the names some webhook chose (as of the last read), and webhook.created: the events worth a poke */
  let wanted: ReadonlySet<string> = WAKING;
  let reading: Promise<void> | undefined;
  let readAgain = false;
  let inFlight = 0;
  const sending = new Set<Promise<void>>();
  let pumping: Promise<void> | undefined;
  let pumpAgain = false;
  let nextPruneAt = 0;
  let timer: ClockTimer | undefined;
  let batch: ClockTimer | undefined;
  const agents = createReceiverAgents(settings.concurrency);
  /** aborts the attempts in flight when the tower stops */
  const stopping = new AbortController();

  const unsubscribe = deps.hub.subscribe((rows) => {
    if (closed || batch) return;
    for (const r of rows) {
      if (wanted.has(r.name) && (active || r.name === "webhook.created")) {
        active = true;
        batch = clock.setTimeout(() => {
          batch = undefined;
          read();
        }, BATCH_MS);
        return;
      }
    }
  });

  function read(): void {
    if (closed) return;
    if (reading) {
      readAgain = true;
      return;
    }
    reading = (async () => {
      do {
        readAgain = false;
        try {
          const queued = await exclusive("webhook-reader", readLog);
          if (queued) pump();
        } catch (err) {
          log.warn("webhook reader could not read the event log (it tries again)", { error: (err as Error).message });
        }
      } while (readAgain && !closed);
    })().finally(() => (reading = undefined));
  }

  /** Queues the deliveries of the events after the cursor; returns how many were queued. */
  async function readLog(): Promise<number> {
    let queued = 0;
    for (;;) {
      const hooks = await store.listWebhooks();
      active = hooks.length > 0;
      wanted = new Set(["webhook.created", ...hooks.flatMap((h) => h.events)]);
      if (!active || closed) return queued;
      const cursor = await store.webhookCursor();
      // no webhook wants what came before the oldest one was made
      const start = Math.max(cursor, Math.min(...hooks.map((h) => h.afterEventId)));
      const events = await store.listEvents({ afterId: start, limit: PAGE, types: WEBHOOK_EVENT_TYPES });
      const to = events.length ? events[events.length - 1].id : start;
      if (to === cursor) return queued;
      const rows = await deliveriesOf(events, hooks);
      try {
        await store.transaction(async (tx) => {
          if (!(await tx.moveWebhookCursor(cursor, to))) throw new CursorMoved();
          for (const r of rows) if (await tx.insertWebhookDelivery(r)) queued++;
        });
      } catch (err) {
        // another replica read this stretch first: start again from where it left the cursor
        if (err instanceof CursorMoved) continue;
        throw err;
      }
      if (events.length < PAGE) return queued;
    }
  }

  async function deliveriesOf(events: readonly EventRow[], hooks: readonly WebhookRow[]): Promise<DeliveryRow[]> {
    const out: DeliveryRow[] = [];
    const served = new Map<string, readonly string[]>();
    const now = clock.now();
    for (const e of events) {
      if (!WAKING.has(e.name)) continue;
      let domains: readonly string[] = e.domainId ? [e.domainId] : [];
      // a node's events carry no domain: they concern every domain it serves
      if (!e.domainId && e.name.startsWith("node.")) domains = await nodeDomains(served, String(e.payload.node_id ?? ""));
      for (const h of hooks) {
        if (e.id <= h.afterEventId || !h.events.includes(e.name)) continue;
        if (!domains.includes(h.domainId) && !domains.includes("*")) continue;
        const id = newId("whd", now);
        const at = iso(now);
        out.push({
          id,
          webhookId: h.id,
          domainId: h.domainId,
          eventId: e.id,
          eventName: e.name,
          body: deliveryBody(h.format, { webhookId: h.id, deliveryId: id }, eventChunk(e)),
          status: "pending",
          attempts: 0,
          statusCode: 0,
          error: "",
          attemptLog: [],
          nextAttemptAt: at,
          createdAt: at,
          finishedAt: "",
        });
      }
    }
    return out;
  }

  async function nodeDomains(cache: Map<string, readonly string[]>, nodeId: string): Promise<readonly string[]> {
    if (!nodeId) return [];
    let d = cache.get(nodeId);
    if (!d) cache.set(nodeId, (d = (await store.getNode(nodeId))?.domains ?? []));
    return d;
  }

  /** Takes due deliveries while there is room in flight, and sends them. */
  function pump(): void {
    if (closed) return;
    if (pumping) {
      pumpAgain = true;
      return;
    }
    pumping = (async () => {
      do {
        pumpAgain = false;
        try {
          while (!closed && inFlight < settings.concurrency) {
            const now = clock.now();
            const leaseId = `${replica}:${newId("whd", now)}`;
            const due = await store.claimWebhookDeliveries(iso(now), leaseId, iso(now + leaseMs), settings.concurrency - inFlight);
            if (!due.length) break;
            for (const d of due) start(d, leaseId);
          }
        } catch (err) {
          log.warn("webhook sender could not take due deliveries (it tries again)", { error: (err as Error).message });
        }
      } while (pumpAgain && !closed);
    })().finally(() => (pumping = undefined));
  }

  function start(d: DeliveryRow, leaseId: string): void {
    inFlight++;
    const p = attempt(d, leaseId)
      .catch((err: Error) => log.warn("webhook attempt not recorded (its lease runs out and it is tried again)", { delivery_id: d.id, error: err.message }))
      .finally(() => {
        inFlight--;
        sending.delete(p);
        pump();
      });
    sending.add(p);
  }

  async function attempt(d: DeliveryRow, leaseId: string): Promise<void> {
    const hook = await store.getWebhook(d.webhookId);
    if (!hook) return; // deleted meanwhile, its deliveries with it
    const startedAt = clock.now();
    const n = d.attempts + 1;
    let result: { statusCode: number; error: string };
    const secret = openSecret(hook);
    if (typeof secret !== "string") result = { statusCode: 0, error: secret.error };
    else result = await postDelivery(agents, hook.url, attemptHeaders(hook, d, secret, startedAt, n), d.body, settings.timeoutMs, stopping.signal);
    if (closed) {
      // cut off by the tower stopping: not an attempt; released so the next start sends it at once
      await store.finishWebhookAttempt(d.id, leaseId, { ...d, nextAttemptAt: iso(clock.now()) });
      return;
    }
    const at = iso(clock.now());
    const outcome = outcomeOf(d, { at, statusCode: result.statusCode, error: result.error, durationMs: Math.max(0, clock.now() - startedAt) }, settings);
    if (!(await store.finishWebhookAttempt(d.id, leaseId, outcome))) log.warn("webhook attempt outlived its lease; another replica may send it again", { delivery_id: d.id });
    if (outcome.status === "failed") log.warn("webhook delivery failed for good", { delivery_id: d.id, webhook_id: hook.id, attempts: outcome.attempts, error: outcome.error });
  }

  function openSecret(hook: WebhookRow): string | { error: string } {
    const ring = deps.keys.keyring();
    if (!ring) return { error: `no secret-store key to sign with: ${deps.keys.hint}` };
    try {
      return decryptSecret(ring, sealName(hook.id), hook);
    } catch (err) {
      return { error: (err as Error).message };
    }
  }

  async function prune(): Promise<void> {
    const now = clock.now();
    if (now < nextPruneAt) return;
    nextPruneAt = now + PRUNE_EVERY_MS;
    const n = await store.pruneWebhookDeliveries(iso(now - settings.retentionMs));
    if (n) log.info("old webhook deliveries pruned", { count: n });
  }

  function tick(): void {
    timer = undefined;
    if (closed) return;
    read();
    pump();
    prune().catch((err: Error) => log.warn("webhook deliveries not pruned", { error: err.message }));
    timer = clock.setTimeout(tick, settings.pollMs);
  }
  tick();

  return {
    kick() {
      read();
      pump();
    },
    async idle() {
      for (;;) {
        const busy = [reading, pumping, ...sending].filter(Boolean);
        if (!busy.length) return;
        await Promise.allSettled(busy);
      }
    },
    async close() {
      closed = true;
      unsubscribe();
      if (timer) clock.clearTimeout(timer);
      if (batch) clock.clearTimeout(batch);
      stopping.abort();
      await Promise.allSettled([reading, pumping, ...sending]);
      agents.destroy();
    },
  };
}
