// WebhookService: a domain's outgoing webhooks (docs/webhooks.md). Admins and operators of the
// domain add, remove and test them; viewers list them (the URL cut to its origin: a Slack URL's
// path is its credential) and read the delivery log. The signing secret is made here, sealed
// under the secret-store key and returned once; the dispatcher (webhook-dispatcher.ts) opens it
// to sign. Creating and deleting are events (webhook.created, webhook.deleted) without the secret.
import { create } from "@bufbuild/protobuf";
import { iso } from "../../../common/clock.js";
import { EpError, invalidField } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import { timestampOf } from "../../../common/vocab.js";
import * as pb from "../../../gen/ep/tower/v1/webhooks_pb.js";
import type { DeliveryRow, DeliveryState, WebhookFormatName, WebhookRow } from "../../store/webhook-store.js";
import { authorize, can, principalOf, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { commit } from "../event-hub.js";
import { checkPageSize, paginate } from "../paging.js";
import { type KeySource, decryptSecret, encryptSecret } from "../secrets/index.js";
import type { Logger } from "../../../common/log.js";
import type { Store } from "../../store/store.js";
import { deliveryBody, isWebhookEvent, testChunk, TEST_EVENT, WEBHOOK_EVENTS } from "./webhook-events.js";
import { newWebhookSecret } from "./webhook-signature.js";

export const MAX_URL_LENGTH = 2048;
export const MAX_DESCRIPTION = 500;

/** The name the secret is sealed under (authenticated data: a cipher cannot be moved to another webhook). */
export const sealName = (webhookId: string): string => `webhook:${webhookId}`;

export interface WebhookServiceImpl {
  createWebhook(caller: Caller, req: pb.CreateWebhookRequest): Promise<pb.CreateWebhookResponse>;
  listWebhooks(caller: Caller, req: pb.ListWebhooksRequest): Promise<pb.ListWebhooksResponse>;
  deleteWebhook(caller: Caller, req: pb.DeleteWebhookRequest): Promise<pb.DeleteWebhookResponse>;
  testWebhook(caller: Caller, req: pb.TestWebhookRequest): Promise<pb.TestWebhookResponse>;
  listWebhookDeliveries(
    caller: Caller,
    req: pb.ListWebhookDeliveriesRequest,
  ): Promise<pb.ListWebhookDeliveriesResponse>;
}

/** Checks a receiver URL: absolute http(s), no credentials in it, not too long (docs/webhooks.md, SSRF). */
export function checkWebhookUrl(raw: string): string {
  if (!raw) throw invalidField("url", "is required (an http:// or https:// URL)");
  if (raw.length > MAX_URL_LENGTH) throw invalidField("url", `is longer than ${MAX_URL_LENGTH} characters`);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw invalidField(
      "url",
      `is not an absolute URL (got ${JSON.stringify(raw.slice(0, 100))}); give http://host/path or https://host/path`,
    );
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw invalidField("url", `must use http or https (got ${u.protocol.replace(/:$/, "")})`);
  if (!u.hostname) throw invalidField("url", "has no host");
  if (u.username || u.password)
    throw invalidField("url", "must not carry a user or password; the receiver checks the EP-Signature header instead");
  if (u.hash) throw invalidField("url", "must not have a #fragment (it is never sent)");
  return u.toString();
}

function checkEvents(events: readonly string[]): string[] {
  if (!events.length) throw invalidField("events", `choose at least one of ${WEBHOOK_EVENTS.join(", ")}`);
  const out = new Set<string>();
  events.forEach((e, i) => {
    if (!isWebhookEvent(e))
      throw invalidField(
        `events[${i}]`,
        `${JSON.stringify(e)} is not an event a webhook can receive; choose from ${WEBHOOK_EVENTS.join(", ")}`,
      );
    out.add(e);
  });
  return [...out];
}

const FORMAT_NAMES: Record<number, WebhookFormatName> = {
  [pb.WebhookFormat.UNSPECIFIED]: "ep",
  [pb.WebhookFormat.EP]: "ep",
  [pb.WebhookFormat.SLACK]: "slack",
};
const STATUS_OF: Record<DeliveryState, pb.WebhookDeliveryStatus> = {
  pending: pb.WebhookDeliveryStatus.PENDING,
  succeeded: pb.WebhookDeliveryStatus.SUCCEEDED,
  failed: pb.WebhookDeliveryStatus.FAILED,
};
const STATE_OF: Record<number, DeliveryState | undefined> = {
  [pb.WebhookDeliveryStatus.UNSPECIFIED]: undefined,
  [pb.WebhookDeliveryStatus.PENDING]: "pending",
  [pb.WebhookDeliveryStatus.SUCCEEDED]: "succeeded",
  [pb.WebhookDeliveryStatus.FAILED]: "failed",
};

/** What a viewer sees of a URL: its origin (the path and query of many receivers are credentials). */
export function shownUrl(url: string, whole: boolean): string {
  if (whole) return url;
  const u = new URL(url);
  return u.pathname === "/" && !u.search ? u.origin : `${u.origin}/…`;
}

function webhookMsg(w: WebhookRow, caller: Caller): pb.Webhook {
  return create(pb.WebhookSchema, {
    id: w.id,
    domainId: w.domainId,
    url: shownUrl(w.url, can(caller, "operate", { domainId: w.domainId })),
    events: w.events,
    format: w.format === "slack" ? pb.WebhookFormat.SLACK : pb.WebhookFormat.EP,
    description: w.description,
    createdBy: w.createdBy,
    createTime: timestampOf(w.createdAt),
  });
}

export function deliveryMsg(d: DeliveryRow): pb.WebhookDelivery {
  return create(pb.WebhookDeliverySchema, {
    id: d.id,
    webhookId: d.webhookId,
    domainId: d.domainId,
    eventId: BigInt(d.eventId),
    eventName: d.eventName,
    status: STATUS_OF[d.status],
    attempts: d.attempts,
    statusCode: d.statusCode,
    error: d.error,
    attemptLog: d.attemptLog.map((a) =>
      create(pb.WebhookAttemptSchema, {
        time: timestampOf(a.at),
        statusCode: a.statusCode,
        error: a.error,
        durationMs: a.durationMs,
      }),
    ),
    createTime: timestampOf(d.createdAt),
    nextAttemptTime: d.status === "pending" ? timestampOf(d.nextAttemptAt) : undefined,
  });
}

/** `kick`: the dispatcher's wake-up (a test delivery is due now). */
export function createWebhookService(deps: Deps, keys: KeySource, kick: () => void = () => {}): WebhookServiceImpl {
  const { store, clock } = deps;

  const mustDomain = async (caller: Caller, domainId: string, permission: "read" | "operate") => {
    if (!domainId) throw invalidField("domain_id", "is required");
    authorize(caller, permission, { domainId });
    if (!(await store.getDomain(domainId)))
      throw new EpError("domain_not_found", `no domain ${domainId}; list them with 'ep domain ls'`, {
        domain_id: domainId,
      });
  };

  const mustWebhook = async (domainId: string, webhookId: string): Promise<WebhookRow> => {
    if (!webhookId) throw invalidField("webhook_id", "is required");
    const w = await store.getWebhook(webhookId);
    // one answer for "none" and "in another domain": a caller learns nothing about other domains
    if (!w || w.domainId !== domainId)
      throw new EpError(
        "webhook_not_found",
        `no webhook ${webhookId} in domain ${domainId}; list them with 'ep webhook ls --domain ${domainId}'`,
        { webhook_id: webhookId },
      );
    return w;
  };

  return {
    async createWebhook(caller, req) {
      await mustDomain(caller, req.domainId, "operate");
      const url = checkWebhookUrl(req.url.trim());
      const events = checkEvents(req.events);
      const format = FORMAT_NAMES[req.format];
      if (!format) throw invalidField("format", "must be ep or slack");
      if (req.description.length > MAX_DESCRIPTION)
        throw invalidField("description", `is longer than ${MAX_DESCRIPTION} characters`);
      const ring = keys.keyring();
      if (!ring)
        throw new EpError("config_invalid", `no secret-store key, refusing to store a webhook secret: ${keys.hint}`, {
          setting: "EP_SECRET_KEY",
        });
      const secret = newWebhookSecret();
      const now = clock.now();
      const id = newId("whk", now);
      const row: WebhookRow = {
        id,
        domainId: req.domainId,
        url,
        events,
        format,
        description: req.description,
        ...encryptSecret(ring.current, sealName(id), secret),
        createdBy: principalOf(caller),
        createdAt: iso(now),
        // later events only: a new webhook is not flooded with the domain's history
        afterEventId: await store.lastEventId(),
      };
      await commit(deps, async (tx, emit) => {
        await tx.insertWebhook(row);
        emit({
          type: "matrix",
          name: "webhook.created",
          domainId: row.domainId,
          payload: { webhook_id: id, events, format, by: row.createdBy },
        });
      });
      return create(pb.CreateWebhookResponseSchema, { webhook: webhookMsg(row, caller), secret });
    },

    async listWebhooks(caller, req) {
      await mustDomain(caller, req.domainId, "read");
      checkPageSize(req.pageSize);
      const { page, nextPageToken } = paginate(await store.listWebhooks(req.domainId), (w) => w.id, req);
      return create(pb.ListWebhooksResponseSchema, { webhooks: page.map((w) => webhookMsg(w, caller)), nextPageToken });
    },

    async deleteWebhook(caller, req) {
      await mustDomain(caller, req.domainId, "operate");
      const w = await mustWebhook(req.domainId, req.webhookId);
      await commit(deps, async (tx, emit) => {
        if (!(await tx.deleteWebhook(w.id)))
          throw new EpError("webhook_not_found", `no webhook ${w.id} in domain ${w.domainId}`, { webhook_id: w.id });
        emit({
          type: "matrix",
          name: "webhook.deleted",
          domainId: w.domainId,
          payload: { webhook_id: w.id, by: principalOf(caller) },
        });
      });
      return create(pb.DeleteWebhookResponseSchema, {});
    },

    async testWebhook(caller, req) {
      await mustDomain(caller, req.domainId, "operate");
      const w = await mustWebhook(req.domainId, req.webhookId);
      const now = iso(clock.now());
      const id = newId("whd", clock.now());
      const row: DeliveryRow = {
        id,
        webhookId: w.id,
        domainId: w.domainId,
        eventId: 0,
        eventName: TEST_EVENT,
        body: deliveryBody(w.format, { webhookId: w.id, deliveryId: id }, testChunk(w.domainId, w.id, now)),
        status: "pending",
        attempts: 0,
        statusCode: 0,
        error: "",
        attemptLog: [],
        nextAttemptAt: now,
        createdAt: now,
        finishedAt: "",
      };
      await store.insertWebhookDelivery(row);
      kick();
      return create(pb.TestWebhookResponseSchema, { delivery: deliveryMsg(row) });
    },

    async listWebhookDeliveries(caller, req) {
      await mustDomain(caller, req.domainId, "read");
      const w = await mustWebhook(req.domainId, req.webhookId);
      const size = checkPageSize(req.pageSize) || 100;
      const status = STATE_OF[req.status];
      if (req.status && !status) throw invalidField("status", "must be pending, succeeded or failed");
      let beforeId: string | undefined;
      if (req.pageToken) {
        const at = /^whd_[0-9a-z]{22}$/.test(req.pageToken) ? req.pageToken : undefined;
        if (!at)
          throw invalidField(
            "page_token",
            "is not a token this server gave (pass next_page_token from the previous page as it came)",
          );
        beforeId = at;
      }
      const rows = await store.listWebhookDeliveries({
        webhookId: w.id,
        status,
        deliveryId: req.deliveryId || undefined,
        beforeId,
        limit: size + 1,
      });
      const page = rows.slice(0, size);
      return create(pb.ListWebhookDeliveriesResponseSchema, {
        deliveries: page.map(deliveryMsg),
        nextPageToken: rows.length > size ? page[page.length - 1].id : "",
      });
    },
  };
}

/**
 * Re-seals every webhook secret stored under an older key (EP_SECRET_KEY_PREVIOUS) under the
 * current one, at start, as the secret store does (docs/secrets.md, "Rotation"): after it the old
 * key may go. Returns how many were re-sealed; those under a key this tower lacks are logged.
 */
export async function resealWebhookSecrets(store: Store, keys: KeySource, log: Logger): Promise<number> {
  const hooks = await store.listWebhooks();
  const ring = keys.keyring();
  if (!hooks.length || !ring) return 0;
  let resealed = 0;
  const unreadable: string[] = [];
  for (const w of hooks) {
    if (w.keyId === ring.current.id) continue;
    if (!ring.find(w.keyId)) {
      unreadable.push(w.id);
      continue;
    }
    const secret = decryptSecret(ring, sealName(w.id), w);
    if (await store.updateWebhookCipher(w.id, w.keyId, encryptSecret(ring.current, sealName(w.id), secret))) resealed++;
  }
  if (resealed)
    log.info("webhook secrets re-sealed under the current key", { count: resealed, key_id: ring.current.id });
  if (unreadable.length)
    log.warn(
      "webhook secrets under a key this tower does not have: " +
        "their deliveries fail until EP_SECRET_KEY_PREVIOUS holds it",
      { webhook_ids: unreadable },
    );
  return resealed;
}
