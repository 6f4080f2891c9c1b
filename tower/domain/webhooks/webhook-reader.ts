// The dispatcher's reader: follows the committed event log from the store's cursor and queues
// one delivery row per (webhook, matching event), moving the cursor in the same transaction
// with a compare-and-set (and, on PostgreSQL, under a cluster lock), so replicas never queue one
// stretch twice; the unique key on (webhook, event) catches the rest. A commit pokes it only
// when it holds an event some webhook chose, and the poke waits BATCH_MS, so under load the
// events of many commits are queued in one transaction.
import type { Clock, ClockTimer } from "../../../common/clock.js";
import { iso } from "../../../common/clock.js";
import { newId } from "../../../common/ids.js";
import type { Logger } from "../../../common/log.js";
import type { EventRow, Store } from "../../store/store.js";
import type { DeliveryRow, WebhookRow } from "../../store/webhook-store.js";
import type { EventHub } from "../event-hub.js";
import { deliveryBody, eventChunk, WEBHOOK_EVENT_TYPES, WEBHOOK_EVENTS } from "./webhook-events.js";
import { serialRunner } from "./serial-runner.js";

/** Events read from the log per transaction. */
const PAGE = 500;
/** How long a commit's poke waits before the reader runs (a notification 50 ms later is the same notification). */
const BATCH_MS = 50;

const WAKING: ReadonlySet<string> = new Set<string>([...WEBHOOK_EVENTS, "webhook.created"]);

class CursorMoved extends Error {}

export interface WebhookReaderDeps {
  store: Store;
  hub: EventHub;
  clock: Clock;
  log: Logger;
  exclusive: <T>(name: string, fn: () => Promise<T>) => Promise<T | undefined>;
}

export interface WebhookReader {
  /** Reads the log now (the poll, a kick). */
  read(): void;
  /** Resolves when no read runs. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/** `onQueued`: deliveries were queued (the sender has work). */
export function createWebhookReader(deps: WebhookReaderDeps, onQueued: () => void): WebhookReader {
  const { store, clock, log } = deps;
  let closed = false;
  /** whether any webhook exists (as of the last read); commits poke the reader only then */
  let active = true;
  /** the names some webhook chose (as of the last read), and webhook.created: the events worth a poke */
  let wanted: ReadonlySet<string> = WAKING;
  let batch: ClockTimer | undefined;

  const runner = serialRunner(async () => {
    try {
      if (await deps.exclusive("webhook-reader", readLog)) onQueued();
    } catch (err) {
      log.warn("webhook reader could not read the event log (it tries again)", { error: (err as Error).message });
    }
  });

  const unsubscribe = deps.hub.subscribe((rows) => {
    if (closed || batch) return;
    for (const r of rows) {
      if (wanted.has(r.name) && (active || r.name === "webhook.created")) {
        active = true;
        batch = clock.setTimeout(() => {
          batch = undefined;
          runner.run();
        }, BATCH_MS);
        return;
      }
    }
  });

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
      if (!wanted.has(e.name)) continue;
      // a node's events carry no domain: they concern every domain it serves
      const domains = e.domainId
        ? [e.domainId]
        : e.name.startsWith("node.")
          ? await nodeDomains(served, String(e.payload.node_id ?? ""))
          : [];
      for (const h of hooks) {
        if (e.id <= h.afterEventId || !h.events.includes(e.name)) continue;
        if (!domains.includes(h.domainId) && !domains.includes("*")) continue;
        out.push(newDelivery(h, e, now));
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

  return {
    read: () => runner.run(),
    idle: () => runner.idle(),
    async close() {
      closed = true;
      unsubscribe();
      if (batch) clock.clearTimeout(batch);
      runner.stop();
      await runner.idle();
    },
  };
}

function newDelivery(h: WebhookRow, e: EventRow, now: number): DeliveryRow {
  const id = newId("whd", now);
  const at = iso(now);
  return {
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
  };
}
