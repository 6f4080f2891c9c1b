// One attempt to hand a delivery to its receiver, and what it makes of the delivery. The POST
// carries the body exactly as stored, signed at the moment it is sent; redirects are not
// followed (a receiver that moved says so with its new URL, and a redirect must not lead the
// tower to an address the webhook never named). Any answer but a 2xx is retried with backoff
// until the attempts run out.
import { iso } from "../../../common/clock.js";
import { backoffDelay } from "../../../common/backoff.js";
import type { AttemptRow, DeliveryOutcome, DeliveryRow, WebhookRow } from "../../store/webhook-store.js";
import { SIGNATURE_HEADER, signatureHeader } from "./webhook-signature.js";
import type { WebhookSettings } from "./webhook-settings.js";

export const USER_AGENT = "EP-Webhook/1";
/** The most of an error text kept in the log. */
const MAX_ERROR = 300;

/** The request headers of one attempt. */
export function attemptHeaders(hook: WebhookRow, d: DeliveryRow, secret: string, nowMs: number, attempt: number): Record<string, string> {
  return {
    "content-type": "application/json",
    "user-agent": USER_AGENT,
    [SIGNATURE_HEADER]: signatureHeader(secret, nowMs, d.body),
    "ep-event": d.eventName,
    "ep-delivery": d.id,
    "ep-webhook": hook.id,
    "ep-attempt": String(attempt),
  };
}

/** POSTs the delivery; the answer's status (0 when none came) and why it failed. */
export async function postDelivery(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<{ statusCode: number; error: string }> {
  try {
    const res = await fetch(url, { method: "POST", headers, body, redirect: "manual", signal: AbortSignal.timeout(timeoutMs) });
    // the answer's body is not read: free the connection
    await res.body?.cancel().catch(() => undefined);
    if (res.status >= 200 && res.status < 300) return { statusCode: res.status, error: "" };
    const where = res.status >= 300 && res.status < 400 ? ` (a redirect to ${res.headers.get("location") ?? "nowhere"}; redirects are not followed)` : "";
    return { statusCode: res.status, error: `HTTP ${res.status}${where}`.slice(0, MAX_ERROR) };
  } catch (err) {
    return { statusCode: 0, error: describeFailure(err, timeoutMs).slice(0, MAX_ERROR) };
  }
}

function describeFailure(err: unknown, timeoutMs: number): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e.name === "TimeoutError") return `no answer within ${timeoutMs} ms`;
  const cause = e.cause;
  if (cause?.code) return `${cause.code}${cause.message ? `: ${cause.message}` : ""}`;
  return e.message || String(err);
}

/** What one attempt makes of the delivery: done, failed for good, or due again after the backoff. */
export function outcomeOf(d: DeliveryRow, attempt: AttemptRow, settings: WebhookSettings, random: () => number = Math.random): DeliveryOutcome {
  const attempts = d.attempts + 1;
  const attemptLog = [...d.attemptLog, attempt].slice(-settings.maxAttempts);
  const base = { attempts, statusCode: attempt.statusCode, error: attempt.error, attemptLog };
  const atMs = Date.parse(attempt.at);
  if (!attempt.error) return { ...base, status: "succeeded", nextAttemptAt: attempt.at, finishedAt: attempt.at };
  if (attempts >= settings.maxAttempts) return { ...base, status: "failed", nextAttemptAt: attempt.at, finishedAt: attempt.at };
  const delay = backoffDelay(attempts - 1, { initialMs: settings.backoffMs, maxMs: settings.backoffMaxMs, random });
  return { ...base, status: "pending", nextAttemptAt: iso(atMs + delay), finishedAt: "" };
}
