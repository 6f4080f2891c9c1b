// What a sign-in must remember between the redirect to the provider and its answer: the state,
// the nonce and the PKCE verifier. It lives in the browser that started the sign-in, in a
// short-lived HttpOnly cookie sealed (AES-256-GCM) under the secret-store key: nothing is
// stored on the tower, any replica can open it, and neither the browser nor anyone reading the
// cookie learns the verifier or can forge one.
import { EpError } from "../../../common/errors.js";
import { decryptSecret, encryptSecret, type SecretKeyring } from "../secrets/index.js";

/** A sign-in must come back within this long (the provider's login page included). */
export const FLOW_TTL_MS = 10 * 60_000;
/** the additional authenticated data: a sealed value of another kind does not open as this */
const AAD_NAME = "oidc-login-flow/v1";

export interface FlowState {
  state: string;
  nonce: string;
  verifier: string;
  expiresMs: number;
}

export function sealFlow(ring: SecretKeyring, flow: FlowState): string {
  return Buffer.from(JSON.stringify(encryptSecret(ring.current, AAD_NAME, JSON.stringify(flow)))).toString("base64url");
}

const restart = "start the sign-in again from the console's sign-in page";

/** The flow the cookie holds; a missing, altered, foreign or expired one is refused with why. */
export function openFlow(ring: SecretKeyring, cookie: string | undefined, nowMs: number): FlowState {
  if (!cookie) {
    throw new EpError(
      "oidc_callback_invalid",
      `this browser has no sign-in under way (it was started in ` +
        `another browser, its cookie was refused, or it ended); ${restart}`,
    );
  }
  let flow: FlowState;
  try {
    const cipher = JSON.parse(Buffer.from(cookie, "base64url").toString("utf8"));
    flow = JSON.parse(decryptSecret(ring, AAD_NAME, cipher)) as FlowState;
  } catch {
    throw new EpError(
      "oidc_callback_invalid",
      `the sign-in cookie could not be opened (altered, or sealed under another secret-store key); ${restart}`,
    );
  }
  if (
    typeof flow.state !== "string" ||
    typeof flow.nonce !== "string" ||
    typeof flow.verifier !== "string" ||
    typeof flow.expiresMs !== "number"
  ) {
    throw new EpError("oidc_callback_invalid", `the sign-in cookie is malformed; ${restart}`);
  }
  if (flow.expiresMs <= nowMs)
    throw new EpError(
      "oidc_callback_invalid",
      `the sign-in took longer than ${FLOW_TTL_MS / 60_000} minutes; ${restart}`,
    );
  return flow;
}
