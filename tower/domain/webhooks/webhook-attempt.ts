// One attempt to hand a delivery to its receiver, and what it makes of the delivery. The POST
// carries the body exactly as stored, signed at the moment it is sent; redirects are not
// followed (a receiver that moved says so with its new URL, and a redirect must not lead the
// tower to an address the webhook never named). Any answer but a 2xx is retried with backoff
// until the attempts run out.
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { iso } from "../../../common/clock.js";
import { backoffDelay } from "../../../common/backoff.js";
import type { AttemptRow, DeliveryOutcome, DeliveryRow, WebhookRow } from "../../store/webhook-store.js";
import { SIGNATURE_HEADER, signatureHeader } from "./webhook-signature.js";
import type { WebhookSettings } from "./webhook-settings.js";

export const USER_AGENT = "EP-Webhook/1";
/** The most of an error text kept in the log. */
const MAX_ERROR = 300;

/** The request headers of one attempt. */
export function attemptHeaders(
  hook: WebhookRow,
  d: DeliveryRow,
  secret: string,
  nowMs: number,
  attempt: number,
): Record<string, string> {
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

/** Keep-alive agents for the receivers (node:http costs a third of fetch's CPU per request here). */
export interface ReceiverAgents {
  http: HttpAgent;
  https: HttpsAgent;
  destroy(): void;
}

export function createReceiverAgents(maxSockets: number): ReceiverAgents {
  const http = new HttpAgent({ keepAlive: true, maxSockets });
  const https = new HttpsAgent({ keepAlive: true, maxSockets });
  return { http, https, destroy: () => (http.destroy(), https.destroy()) };
}

/** POSTs the delivery; the answer's status (0 when none came) and why it failed. */
export function postDelivery(
  agents: ReceiverAgents,
  url: string,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
  stop: AbortSignal,
): Promise<{ statusCode: number; error: string }> {
  const payload = Buffer.from(body, "utf8");
  const secure = url.startsWith("https:");
  const send = secure ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([timeout, stop]);
    const req = send(
      url,
      {
        method: "POST",
        headers: { ...headers, "content-length": String(payload.length) },
        agent: secure ? agents.https : agents.http,
        signal,
      },
      (res) => {
        // the answer's body is not needed: read it off so the connection can be reused
        res.resume();
        res.on("error", () => undefined);
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) return resolve({ statusCode: status, error: "" });
        const where =
          status >= 300 && status < 400
            ? ` (a redirect to ${res.headers.location ?? "nowhere"}; redirects are not followed)`
            : "";
        resolve({ statusCode: status, error: `HTTP ${status}${where}`.slice(0, MAX_ERROR) });
      },
    );
    req.on("error", (err) =>
      resolve({ statusCode: 0, error: describeFailure(err, timeout.aborted, timeoutMs).slice(0, MAX_ERROR) }),
    );
    req.end(payload);
  });
}

function describeFailure(err: Error & { code?: string }, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  return err.code ? `${err.code}: ${err.message}` : err.message || String(err);
}

/** What one attempt makes of the delivery: done, failed for good, or due again after the backoff. */
export function outcomeOf(
  d: DeliveryRow,
  attempt: AttemptRow,
  settings: WebhookSettings,
  random: () => number = Math.random,
): DeliveryOutcome {
  const attempts = d.attempts + 1;
  const attemptLog = [...d.attemptLog, attempt].slice(-settings.maxAttempts);
  const base = { attempts, statusCode: attempt.statusCode, error: attempt.error, attemptLog };
  const atMs = Date.parse(attempt.at);
  if (!attempt.error) return { ...base, status: "succeeded", nextAttemptAt: attempt.at, finishedAt: attempt.at };
  if (attempts >= settings.maxAttempts)
    return { ...base, status: "failed", nextAttemptAt: attempt.at, finishedAt: attempt.at };
  const delay = backoffDelay(attempts - 1, { initialMs: settings.backoffMs, maxMs: settings.backoffMaxMs, random });
  return { ...base, status: "pending", nextAttemptAt: iso(atMs + delay), finishedAt: "" };
}
