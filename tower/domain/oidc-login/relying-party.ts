// The tower as an OpenID relying party, through openid-client: discovery at start, the
// authorization URL (PKCE S256, state, nonce), the code exchange (which checks the state, the
// PKCE verifier and the ID token's signature, issuer, audience, expiry and nonce) and the
// userinfo call a console session's re-check makes. Every failure becomes an EpError whose
// message says what went wrong; no token appears in one.
import * as oidc from "openid-client";
import { EpError } from "../../../common/errors.js";
import type { OidcConfig, OidcLoginConfig } from "../auth/index.js";

/** What the provider said about the person who signed in. */
export interface SignedIn {
  /** the ID token's claims (validated) */
  claims: Record<string, unknown>;
  sub: string;
  accessToken: string;
  /** when the ID token expires (ms) */
  idTokenExpiresMs: number;
  /** when the access token expires (ms), if the provider said */
  accessTokenExpiresMs?: number;
}

/** The outcome of asking the provider about a sign-in again. */
export type Recheck = { ok: true; claims: Record<string, unknown> } | { ok: false; ended: boolean; reason: string };

export interface RelyingParty {
  authorizationUrl(checks: { state: string; nonce: string; codeChallenge: string }): URL;
  /** `callback`: the URL the provider sent the browser to (on the public redirect URI) */
  exchange(callback: URL, checks: { state: string; nonce: string; verifier: string }, nowMs: number): Promise<SignedIn>;
  userinfo(accessToken: string, sub: string): Promise<Recheck>;
}

/** A fresh state, nonce and PKCE verifier (with its S256 challenge) for one sign-in. */
export async function newFlowChecks(): Promise<{
  state: string;
  nonce: string;
  verifier: string;
  codeChallenge: string;
}> {
  const verifier = oidc.randomPKCECodeVerifier();
  return {
    state: oidc.randomState(),
    nonce: oidc.randomNonce(),
    verifier,
    codeChallenge: await oidc.calculatePKCECodeChallenge(verifier),
  };
}

const loopback = (host: string) => host === "localhost" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);

/**
 * Discovers the provider (its /.well-known/openid-configuration) once, at start: a wrong issuer,
 * a provider that does not answer or one whose document names another issuer stops the tower
 * with the reason, rather than failing each person's sign-in later.
 */
export async function discoverRelyingParty(
  cfg: OidcConfig & { login: OidcLoginConfig },
  opts: { allowInsecure: boolean },
): Promise<RelyingParty> {
  const { login } = cfg;
  const issuer = new URL(cfg.issuer);
  const insecure = issuer.protocol === "http:";
  if (insecure && !loopback(issuer.hostname) && !opts.allowInsecure) {
    throw new EpError(
      "config_invalid",
      `EP_OIDC_ISSUER ${cfg.issuer} is plain http: use the provider's ` +
        `https URL (http is accepted on loopback, or with EP_ALLOW_INSECURE)`,
      { setting: "EP_OIDC_ISSUER" },
    );
  }
  let config: oidc.Configuration;
  try {
    config = await oidc.discovery(
      issuer,
      login.clientId,
      login.clientSecret ? { client_secret: login.clientSecret } : undefined,
      // Basic is the method every provider must support (RFC 6749 §2.3.1); without a secret a public client proves
      // itself with PKCE alone
      login.clientSecret ? oidc.ClientSecretBasic(login.clientSecret) : oidc.None(),
      { execute: insecure ? [oidc.allowInsecureRequests] : [], timeout: 10 },
    );
  } catch (err) {
    throw new EpError(
      "config_invalid",
      `EP_OIDC_ISSUER ${cfg.issuer}: OpenID discovery failed (${describe(err)}); the issuer URL must ` +
        `serve ${cfg.issuer.replace(/\/+$/, "")}/.well-known/openid-configuration naming itself as issuer`,
      { setting: "EP_OIDC_ISSUER" },
    );
  }
  const meta = config.serverMetadata();
  if (meta.code_challenge_methods_supported && !meta.supportsPKCE()) {
    throw new EpError(
      "config_invalid",
      `EP_OIDC_ISSUER ${cfg.issuer} does not support PKCE with S256 (it lists ` +
        `${meta.code_challenge_methods_supported.join(", ")}); EP signs in only with PKCE`,
      { setting: "EP_OIDC_ISSUER" },
    );
  }
  if (!meta.userinfo_endpoint) {
    throw new EpError(
      "config_invalid",
      `EP_OIDC_ISSUER ${cfg.issuer} has no userinfo endpoint, which console sessions re-check the sign-in with`,
      { setting: "EP_OIDC_ISSUER" },
    );
  }

  return {
    authorizationUrl: ({ state, nonce, codeChallenge }) =>
      oidc.buildAuthorizationUrl(config, {
        redirect_uri: login.redirectUri,
        scope: login.scopes,
        state,
        nonce,
        code_challenge: codeChallenge,
        code_challenge_method: "S256",
      }),

    async exchange(callback, checks, nowMs) {
      let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
      try {
        tokens = await oidc.authorizationCodeGrant(config, callback, {
          expectedState: checks.state,
          expectedNonce: checks.nonce,
          pkceCodeVerifier: checks.verifier,
          idTokenExpected: true,
        });
      } catch (err) {
        throw exchangeError(err);
      }
      const claims = tokens.claims();
      if (!claims) throw new EpError("oidc_sign_in_refused", "the identity provider sent no ID token");
      const expiresIn = tokens.expiresIn();
      return {
        claims: claims as Record<string, unknown>,
        sub: claims.sub,
        accessToken: tokens.access_token,
        idTokenExpiresMs: claims.exp * 1000,
        accessTokenExpiresMs: expiresIn !== undefined ? nowMs + expiresIn * 1000 : undefined,
      };
    },

    async userinfo(accessToken, sub) {
      try {
        return { ok: true, claims: (await oidc.fetchUserInfo(config, accessToken, sub)) as Record<string, unknown> };
      } catch (err) {
        // the provider's answer that the access is gone (RFC 6750: 401 invalid_token) ends the
        // session; no answer at all (network, 5xx) is not a decision and is asked again later
        const status = (err as { status?: number }).status;
        const ended =
          err instanceof oidc.WWWAuthenticateChallengeError ||
          (err instanceof oidc.ResponseBodyError && status !== undefined && status < 500) ||
          (status !== undefined && status >= 400 && status < 500);
        return { ok: false, ended, reason: describe(err) };
      }
    },
  };
}

/**
 * A failed code exchange, by who is at fault: the response (400), the provider's refusal (403), the provider's silence
 * (503).
 */
function exchangeError(err: unknown): EpError {
  if (err instanceof oidc.AuthorizationResponseError) {
    return new EpError(
      "oidc_sign_in_refused",
      `the identity provider did not sign you in: ` +
        `${err.error}${err.error_description ? ` (${err.error_description})` : ""}`,
      { error: err.error },
    );
  }
  if (err instanceof oidc.ResponseBodyError) {
    return new EpError(
      "oidc_callback_invalid",
      `the identity provider refused to exchange the code: ` +
        `${err.error}${err.error_description ? ` (${err.error_description})` : ""}; ` +
        `it may have been used already or expired: start the sign-in again`,
      { error: err.error },
    );
  }
  const code = (err as { code?: string }).code;
  if (err instanceof TypeError || code === "OAUTH_TIMEOUT" || code === "ECONNREFUSED") {
    return new EpError(
      "oidc_provider_unavailable",
      `the identity provider's token endpoint did not answer (${describe(err)}); retry shortly`,
    );
  }
  return new EpError("oidc_callback_invalid", `the sign-in response failed its checks: ${describe(err)}`);
}

/** An error's message with its cause's (fetch failures say only "fetch failed"). */
function describe(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  // openid-client keeps the provider's unexpected answer as the cause
  if (e.cause instanceof Response) return `${e.message}: HTTP ${e.cause.status} from ${e.cause.url}`;
  const cause =
    e.cause && typeof e.cause === "object" && !(e.cause instanceof URLSearchParams)
      ? (e.cause.code ?? e.cause.message)
      : undefined;
  return cause && typeof cause === "string" && !e.message.includes(cause)
    ? `${e.message}: ${cause}`
    : (e.message ?? String(err));
}
