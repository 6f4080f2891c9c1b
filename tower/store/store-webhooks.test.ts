// The store suite (webhooks, their deliveries and the dispatcher's cursor), on both dialects: see
// store-suite.ts. Two stores on one database taking due deliveries at once never get the same
// row; a lease that ran out lets the row be taken again; an event is queued once per webhook.
import { describe, expect } from "vitest";
import type { DeliveryRow, WebhookRow } from "./webhook-store.js";
import { iso, storeSuite, T0 } from "../../test-support/store-suite.js";

storeSuite((s) => {
  const { test } = s;

  const hook = (domainId: string, over: Partial<WebhookRow> = {}): WebhookRow => ({
    id: s.id("whk"),
    domainId,
    url: "https://example.test/h",
    events: ["task.failed"],
    format: "ep",
    description: "",
    ciphertext: "c",
    iv: "i",
    tag: "t",
    keyId: "k1",
    createdBy: "tester",
    createdAt: iso(T0),
    afterEventId: 0,
    ...over,
  });
  const delivery = (h: WebhookRow, eventId: number, over: Partial<DeliveryRow> = {}): DeliveryRow => ({
    id: `whd_${String(eventId).padStart(22, "0")}`,
    webhookId: h.id,
    domainId: h.domainId,
    eventId,
    eventName: "task.failed",
    body: `{"n":${eventId}}`,
    status: "pending",
    attempts: 0,
    statusCode: 0,
    error: "",
    attemptLog: [],
    nextAttemptAt: iso(T0),
    createdAt: iso(T0),
    finishedAt: "",
    ...over,
  });

  describe("webhooks", () => {
    test("a webhook reads back as stored; deleting it takes its deliveries", async () => {
      const d = await s.domain();
      const h = hook(d, { events: ["task.failed", "node.offline"], format: "slack", afterEventId: 42 });
      await s.store.insertWebhook(h);
      expect(await s.store.getWebhook(h.id)).toEqual(h);
      expect(await s.store.listWebhooks(d)).toEqual([h]);
      expect(await s.store.listWebhooks("dom_other")).toEqual([]);
      await s.store.insertWebhookDelivery(delivery(h, 1));
      expect(await s.store.deleteWebhook(h.id)).toBe(true);
      expect(await s.store.deleteWebhook(h.id)).toBe(false);
      expect(await s.store.listWebhookDeliveries({ webhookId: h.id, limit: 10 })).toEqual([]);
    });

    test("an event is queued once per webhook; test deliveries (event 0) are many", async () => {
      const h = hook(await s.domain());
      await s.store.insertWebhook(h);
      expect(await s.store.insertWebhookDelivery(delivery(h, 7))).toBe(true);
      expect(await s.store.insertWebhookDelivery({ ...delivery(h, 7), id: "whd_0000000000000000000077" })).toBe(false);
      expect(await s.store.insertWebhookDelivery({ ...delivery(h, 0), id: "whd_0000000000000000000001" })).toBe(true);
      expect(await s.store.insertWebhookDelivery({ ...delivery(h, 0), id: "whd_0000000000000000000002" })).toBe(true);
      expect((await s.store.listWebhookDeliveries({ webhookId: h.id, limit: 10 })).map((x) => x.eventId)).toEqual([
        7, 0, 0,
      ]);
    });

    test("two stores taking due deliveries at once never get the same one; an expired lease frees it", async () => {
      const h = hook(await s.domain());
      await s.store.insertWebhook(h);
      for (let i = 1; i <= 40; i++) await s.store.insertWebhookDelivery(delivery(h, i));
      const other = await s.fx.openAnother({ migrate: false });
      const now = iso(T0 + 1000);
      const until = iso(T0 + 60_000);
      const takes = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? other : s.store).claimWebhookDeliveries(now, `lease-${i}`, until, 5),
        ),
      );
      const ids = takes.flat().map((d) => d.id);
      expect(ids).toHaveLength(40);
      expect(new Set(ids).size).toBe(40);
      // all held: nothing more is due until the leases run out
      expect(await s.store.claimWebhookDeliveries(now, "late", until, 50)).toEqual([]);
      const again = await s.store.claimWebhookDeliveries(iso(T0 + 61_000), "after", iso(T0 + 120_000), 50);
      expect(again).toHaveLength(40);
    });

    test("an attempt is recorded only by the lease holder; finished rows are pruned after retention", async () => {
      const h = hook(await s.domain());
      await s.store.insertWebhook(h);
      await s.store.insertWebhookDelivery(delivery(h, 1));
      const [taken] = await s.store.claimWebhookDeliveries(iso(T0), "mine", iso(T0 + 1000), 1);
      const outcome = {
        status: "succeeded" as const,
        attempts: 1,
        statusCode: 204,
        error: "",
        attemptLog: [{ at: iso(T0 + 5), statusCode: 204, error: "", durationMs: 5 }],
        nextAttemptAt: iso(T0 + 5),
        finishedAt: iso(T0 + 5),
      };
      expect(await s.store.finishWebhookAttempt(taken.id, "not mine", outcome)).toBe(false);
      expect(await s.store.finishWebhookAttempt(taken.id, "mine", outcome)).toBe(true);
      const [done] = await s.store.listWebhookDeliveries({ webhookId: h.id, limit: 1 });
      expect(done).toMatchObject({ status: "succeeded", attempts: 1, statusCode: 204, attemptLog: outcome.attemptLog });
      expect(await s.store.claimWebhookDeliveries(iso(T0 + 10_000), "x", iso(T0 + 20_000), 5)).toEqual([]);
      expect(await s.store.pruneWebhookDeliveries(iso(T0))).toBe(0);
      expect(await s.store.pruneWebhookDeliveries(iso(T0 + 10))).toBe(1);
    });

    test("the cursor moves only from where it is (compare-and-set)", async () => {
      const at = await s.store.webhookCursor();
      expect(await s.store.moveWebhookCursor(at, at + 5)).toBe(true);
      expect(await s.store.moveWebhookCursor(at, at + 9)).toBe(false);
      expect(await s.store.webhookCursor()).toBe(at + 5);
    });
  });
});
