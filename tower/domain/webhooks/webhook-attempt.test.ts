import { describe, expect, it } from "vitest";
import type { DeliveryRow } from "../../store/webhook-store.js";
import { outcomeOf } from "./webhook-attempt.js";
import { DEFAULT_WEBHOOK_SETTINGS, readWebhookSettings } from "./webhook-settings.js";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const at = (ms: number) => new Date(T0 + ms).toISOString();
const row = (over: Partial<DeliveryRow> = {}): DeliveryRow => ({
  id: "whd_1",
  webhookId: "whk_1",
  domainId: "dom_1",
  eventId: 1,
  eventName: "task.failed",
  body: "{}",
  status: "pending",
  attempts: 0,
  statusCode: 0,
  error: "",
  attemptLog: [],
  nextAttemptAt: at(0),
  createdAt: at(0),
  finishedAt: "",
  ...over,
});
const settings = { ...DEFAULT_WEBHOOK_SETTINGS, maxAttempts: 4, backoffMs: 1000, backoffMaxMs: 3000 };
const noJitter = () => 0;

describe("what an attempt makes of a delivery", () => {
  it("a 2xx finishes it; the attempt is logged", () => {
    const o = outcomeOf(row(), { at: at(5), statusCode: 204, error: "", durationMs: 5 }, settings, noJitter);
    expect(o).toMatchObject({
      status: "succeeded",
      attempts: 1,
      statusCode: 204,
      finishedAt: at(5),
      attemptLog: [{ statusCode: 204, durationMs: 5 }],
    });
  });

  it("failures are retried 1 s, 2 s, then capped at 3 s, until the attempts run out", () => {
    let d = row();
    const due: string[] = [];
    for (let i = 0; i < 4; i++) {
      const now = d.attempts === 0 ? 0 : Date.parse(d.nextAttemptAt) - T0;
      const o = outcomeOf(d, { at: at(now), statusCode: 503, error: "HTTP 503", durationMs: 1 }, settings, noJitter);
      d = { ...d, ...o };
      due.push(o.status === "pending" ? `+${Date.parse(o.nextAttemptAt) - T0 - now}` : o.status);
    }
    expect(due).toEqual(["+1000", "+2000", "+3000", "failed"]);
    expect(d.attempts).toBe(4);
    expect(d.attemptLog.map((a) => a.error)).toEqual(["HTTP 503", "HTTP 503", "HTTP 503", "HTTP 503"]);
  });

  it("jitter only shortens a delay, by at most a fifth", () => {
    const o = outcomeOf(row(), { at: at(0), statusCode: 0, error: "ECONNREFUSED", durationMs: 1 }, settings, () => 1);
    expect(Date.parse(o.nextAttemptAt) - T0).toBe(800);
  });
});

describe("settings", () => {
  it("defaults, and each variable read and checked", () => {
    expect(readWebhookSettings({})).toEqual(DEFAULT_WEBHOOK_SETTINGS);
    expect(readWebhookSettings({ EP_WEBHOOK_MAX_ATTEMPTS: "3", EP_WEBHOOK_RETENTION_HOURS: "2" })).toMatchObject({
      maxAttempts: 3,
      retentionMs: 7_200_000,
    });
    expect(() => readWebhookSettings({ EP_WEBHOOK_TIMEOUT_MS: "1.5" })).toThrow(
      /EP_WEBHOOK_TIMEOUT_MS must be a whole number from 1 to 300000 \(got "1.5"\)/,
    );
    expect(() => readWebhookSettings({ EP_WEBHOOK_CONCURRENCY: "-1" })).toThrow(/EP_WEBHOOK_CONCURRENCY/);
  });
});
