// How a delivery is signed (docs/webhooks.md, "Verifying a delivery"): HMAC-SHA256 with the
// webhook's secret over "<unix seconds>.<body>", sent as `EP-Signature: t=<seconds>,v1=<hex>`.
// The timestamp is inside the signed text, so a receiver that refuses old timestamps refuses a
// replayed delivery (the scheme Stripe uses; GitHub signs the body alone).
import { createHmac, randomBytes } from "node:crypto";

export const SIGNATURE_HEADER = "ep-signature";
/** The signing secret's prefix: a secret is recognisable in a leak scanner's rules. */
export const SECRET_PREFIX = "whsec_";

/** A new signing secret: 32 random bytes, base64url. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString("base64url");
}

/** The hex HMAC-SHA256 of "<timestampS>.<body>" under `secret`. */
export function signatureOf(secret: string, timestampS: number, body: string): string {
  return createHmac("sha256", secret).update(`${timestampS}.${body}`).digest("hex");
}

/** The EP-Signature header's value for `body` sent at `nowMs`. */
export function signatureHeader(secret: string, nowMs: number, body: string): string {
  const t = Math.floor(nowMs / 1000);
  return `t=${t},v1=${signatureOf(secret, t, body)}`;
}
