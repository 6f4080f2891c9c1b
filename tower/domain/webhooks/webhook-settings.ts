// The webhook dispatcher's settings (docs/webhooks.md, "Settings"), from the tower's environment;
// a bad value is a startup error naming the variable.
import { EpError } from "../../../common/errors.js";

export interface WebhookSettings {
  /** attempts per delivery, the first included (EP_WEBHOOK_MAX_ATTEMPTS, 8) */
  maxAttempts: number;
  /** delay before the first retry, doubling after each (EP_WEBHOOK_BACKOFF_MS, 10 s) */
  backoffMs: number;
  /** the longest delay between two attempts (EP_WEBHOOK_BACKOFF_MAX_MS, 1 h) */
  backoffMaxMs: number;
  /** one attempt's time limit, connect to last byte of the answer's head (EP_WEBHOOK_TIMEOUT_MS, 10 s) */
  timeoutMs: number;
  /** how often due retries and other replicas' events are looked for (EP_WEBHOOK_POLL_MS, 1 s) */
  pollMs: number;
  /** deliveries in flight at once per tower (EP_WEBHOOK_CONCURRENCY, 8) */
  concurrency: number;
  /** finished deliveries are kept this long (EP_WEBHOOK_RETENTION_HOURS, 168 = 7 days) */
  retentionMs: number;
}

export const DEFAULT_WEBHOOK_SETTINGS: WebhookSettings = {
  maxAttempts: 8,
  backoffMs: 10_000,
  backoffMaxMs: 3_600_000,
  timeoutMs: 10_000,
  pollMs: 1000,
  concurrency: 8,
  retentionMs: 168 * 3_600_000,
};

function count(env: Record<string, string | undefined>, name: string, fallback: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0 || n > max)
    throw new EpError(
      "config_invalid",
      `${name} must be a whole number from 1 to ${max} (got ${JSON.stringify(raw)})`,
      { setting: name },
    );
  return n;
}

export function readWebhookSettings(env: Record<string, string | undefined>): WebhookSettings {
  const d = DEFAULT_WEBHOOK_SETTINGS;
  const s: WebhookSettings = {
    maxAttempts: count(env, "EP_WEBHOOK_MAX_ATTEMPTS", d.maxAttempts, 50),
    backoffMs: count(env, "EP_WEBHOOK_BACKOFF_MS", d.backoffMs, 86_400_000),
    backoffMaxMs: count(env, "EP_WEBHOOK_BACKOFF_MAX_MS", d.backoffMaxMs, 7 * 86_400_000),
    timeoutMs: count(env, "EP_WEBHOOK_TIMEOUT_MS", d.timeoutMs, 300_000),
    pollMs: count(env, "EP_WEBHOOK_POLL_MS", d.pollMs, 3_600_000),
    concurrency: count(env, "EP_WEBHOOK_CONCURRENCY", d.concurrency, 256),
    retentionMs: count(env, "EP_WEBHOOK_RETENTION_HOURS", d.retentionMs / 3_600_000, 24 * 366) * 3_600_000,
  };
  if (s.backoffMaxMs < s.backoffMs)
    throw new EpError(
      "config_invalid",
      `EP_WEBHOOK_BACKOFF_MAX_MS (${s.backoffMaxMs}) must not be below EP_WEBHOOK_BACKOFF_MS (${s.backoffMs})`,
      { setting: "EP_WEBHOOK_BACKOFF_MAX_MS" },
    );
  return s;
}
