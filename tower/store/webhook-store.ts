// Outgoing webhooks' rows (WebhookService): the webhooks, their deliveries and the dispatcher's
// cursor into the event log. One dialect-neutral implementation over a query function, bound by
// SqlStore (sql-store.ts); the only difference between the dialects is how a due delivery is
// taken (`skipLocked`: PostgreSQL's FOR UPDATE SKIP LOCKED; SQLite has one writer).
import type { SecretCipher } from "./secret-store.js";

export type WebhookFormatName = "ep" | "slack";
export type DeliveryState = "pending" | "succeeded" | "failed";

export interface WebhookRow extends SecretCipher {
  id: string;
  domainId: string;
  url: string;
  events: string[];
  format: WebhookFormatName;
  description: string;
  createdBy: string;
  createdAt: string;
  /** receives events with a higher id only (the newest id when it was made) */
  afterEventId: number;
}

export interface AttemptRow {
  at: string;
  statusCode: number;
  error: string;
  durationMs: number;
}

export interface DeliveryRow {
  id: string;
  webhookId: string;
  domainId: string;
  /** 0 for a test delivery */
  eventId: number;
  eventName: string;
  /** the bytes signed and sent */
  body: string;
  status: DeliveryState;
  attempts: number;
  statusCode: number;
  error: string;
  attemptLog: AttemptRow[];
  nextAttemptAt: string;
  createdAt: string;
  finishedAt: string;
}

export interface DeliveryQuery {
  webhookId: string;
  status?: DeliveryState;
  deliveryId?: string;
  /** ids before this one (pages, newest first) */
  beforeId?: string;
  limit: number;
}

/** What one attempt changed; applied only while the delivery is still held by `leaseId`. */
export interface DeliveryOutcome {
  status: DeliveryState;
  attempts: number;
  statusCode: number;
  error: string;
  attemptLog: AttemptRow[];
  nextAttemptAt: string;
  finishedAt: string;
}

export interface WebhookStore {
  insertWebhook(row: WebhookRow): Promise<void>;
  getWebhook(id: string): Promise<WebhookRow | undefined>;
  /** A domain's webhooks (or every webhook), in id order. */
  listWebhooks(domainId?: string): Promise<WebhookRow[]>;
  /** Deletes the webhook and its deliveries; false when there was none. */
  deleteWebhook(id: string): Promise<boolean>;
  /**
   * Re-seals the secret, only while it is still under `expectKeyId` (a rotation elsewhere wins); true when it applied.
   */
  updateWebhookCipher(id: string, expectKeyId: string, cipher: SecretCipher): Promise<boolean>;
  /** Queues a delivery; one already queued for the same webhook and event is kept (false). */
  insertWebhookDelivery(row: DeliveryRow): Promise<boolean>;
  listWebhookDeliveries(q: DeliveryQuery): Promise<DeliveryRow[]>;
  /**
   * Takes up to `limit` pending deliveries due at `now` that nobody holds (or whose holder's
   * lease ran out), holding them under `leaseId` until `leaseUntil`.
   */
  claimWebhookDeliveries(now: string, leaseId: string, leaseUntil: string, limit: number): Promise<DeliveryRow[]>;
  /** Records an attempt and releases the lease; false when the lease was lost (another replica took it). */
  finishWebhookAttempt(id: string, leaseId: string, outcome: DeliveryOutcome): Promise<boolean>;
  /** Deletes finished deliveries that finished before `before`; returns how many. */
  pruneWebhookDeliveries(before: string): Promise<number>;
  /** The newest event id the dispatcher has read. */
  webhookCursor(): Promise<number>;
  /** Moves the cursor from `from` to `to`; false when it was not at `from` (another replica moved it). */
  moveWebhookCursor(from: number, to: number): Promise<boolean>;
}

type Row = Record<string, unknown>;
type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

function parseArray<T>(v: unknown): T[] {
  try {
    const out = JSON.parse(String(v)) as unknown;
    return Array.isArray(out) ? (out as T[]) : [];
  } catch {
    return [];
  }
}

const toWebhook = (r: Row): WebhookRow => ({
  id: r.id as string,
  domainId: r.domain_id as string,
  url: r.url as string,
  events: parseArray<string>(r.events),
  format: r.format === "slack" ? "slack" : "ep",
  description: r.description as string,
  ciphertext: r.ciphertext as string,
  iv: r.iv as string,
  tag: r.tag as string,
  keyId: r.key_id as string,
  createdBy: r.created_by as string,
  createdAt: r.created_at as string,
  afterEventId: Number(r.after_event_id),
});

const toDelivery = (r: Row): DeliveryRow => ({
  id: r.id as string,
  webhookId: r.webhook_id as string,
  domainId: r.domain_id as string,
  eventId: Number(r.event_id),
  eventName: r.event_name as string,
  body: r.body as string,
  status: r.status as DeliveryState,
  attempts: Number(r.attempts),
  statusCode: Number(r.status_code),
  error: r.error as string,
  attemptLog: parseArray<AttemptRow>(r.attempt_log),
  nextAttemptAt: r.next_attempt_at as string,
  createdAt: r.created_at as string,
  finishedAt: r.finished_at as string,
});

export function createWebhookStore(q: Query, skipLocked: string): WebhookStore {
  return {
    async insertWebhook(w) {
      await q(
        `INSERT INTO webhooks (id, domain_id, url, events, format, description, ciphertext, iv, tag, key_id,
           created_by, created_at, after_event_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          w.id,
          w.domainId,
          w.url,
          JSON.stringify(w.events),
          w.format,
          w.description,
          w.ciphertext,
          w.iv,
          w.tag,
          w.keyId,
          w.createdBy,
          w.createdAt,
          w.afterEventId,
        ],
      );
    },
    async getWebhook(id) {
      const [r] = await q("SELECT * FROM webhooks WHERE id = ?", [id]);
      return r && toWebhook(r);
    },
    async listWebhooks(domainId) {
      const rows =
        domainId === undefined
          ? await q("SELECT * FROM webhooks ORDER BY id", [])
          : await q("SELECT * FROM webhooks WHERE domain_id = ? ORDER BY id", [domainId]);
      return rows.map(toWebhook);
    },
    async deleteWebhook(id) {
      await q("DELETE FROM webhook_deliveries WHERE webhook_id = ?", [id]);
      return (await q("DELETE FROM webhooks WHERE id = ? RETURNING id", [id])).length > 0;
    },
    async updateWebhookCipher(id, expectKeyId, c) {
      const rows = await q(
        "UPDATE webhooks SET ciphertext = ?, iv = ?, tag = ?, key_id = ? WHERE id = ? AND key_id = ? RETURNING id",
        [c.ciphertext, c.iv, c.tag, c.keyId, id, expectKeyId],
      );
      return rows.length > 0;
    },
    async insertWebhookDelivery(d) {
      const rows = await q(
        `INSERT INTO webhook_deliveries (id, webhook_id, domain_id, event_id, event_name, body, status,
           attempts, status_code, error, attempt_log, next_attempt_at, created_at, finished_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (webhook_id, event_id) WHERE event_id > 0 DO NOTHING RETURNING id`,
        [
          d.id,
          d.webhookId,
          d.domainId,
          d.eventId,
          d.eventName,
          d.body,
          d.status,
          d.attempts,
          d.statusCode,
          d.error,
          JSON.stringify(d.attemptLog),
          d.nextAttemptAt,
          d.createdAt,
          d.finishedAt,
        ],
      );
      return rows.length > 0;
    },
    async listWebhookDeliveries(query) {
      const where = ["webhook_id = ?"];
      const args: unknown[] = [query.webhookId];
      if (query.status) where.push("status = ?"), args.push(query.status);
      if (query.deliveryId) where.push("id = ?"), args.push(query.deliveryId);
      if (query.beforeId) where.push("id < ?"), args.push(query.beforeId);
      args.push(query.limit);
      return (
        await q(`SELECT * FROM webhook_deliveries WHERE ${where.join(" AND ")} ORDER BY id DESC LIMIT ?`, args)
      ).map(toDelivery);
    },
    async claimWebhookDeliveries(now, leaseId, leaseUntil, limit) {
      const rows = await q(
        `UPDATE webhook_deliveries SET lease_id = ?, lease_until = ?
         WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?
                        AND lease_until < ?
                      ORDER BY next_attempt_at LIMIT ?${skipLocked})
         RETURNING *`,
        [leaseId, leaseUntil, now, now, limit],
      );
      return rows.map(toDelivery);
    },
    async finishWebhookAttempt(id, leaseId, o) {
      const rows = await q(
        `UPDATE webhook_deliveries SET status = ?, attempts = ?, status_code = ?, error = ?, attempt_log = ?,
           next_attempt_at = ?, finished_at = ?, lease_id = '', lease_until = ''
         WHERE id = ? AND lease_id = ? RETURNING id`,
        [
          o.status,
          o.attempts,
          o.statusCode,
          o.error,
          JSON.stringify(o.attemptLog),
          o.nextAttemptAt,
          o.finishedAt,
          id,
          leaseId,
        ],
      );
      return rows.length > 0;
    },
    async pruneWebhookDeliveries(before) {
      return (
        await q("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND finished_at < ? RETURNING id", [before])
      ).length;
    },
    async webhookCursor() {
      const [r] = await q("SELECT last_event_id FROM webhook_cursor WHERE name = 'events'", []);
      return r ? Number(r.last_event_id) : 0;
    },
    async moveWebhookCursor(from, to) {
      return (
        (
          await q(
            "UPDATE webhook_cursor SET last_event_id = ? WHERE name = 'events' AND last_event_id = ? RETURNING name",
            [to, from],
          )
        ).length > 0
      );
    },
  };
}
