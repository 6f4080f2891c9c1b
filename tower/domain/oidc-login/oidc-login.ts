// The console's sign-in through the company's identity provider: the authorization code flow
// with PKCE. begin() sends the browser to the provider with a fresh state, nonce and PKCE
// challenge (remembered in a sealed cookie, flow-state.ts); complete() takes the provider's
// answer back, checks it belongs to that sign-in, exchanges the code, reads the role from the
// configured claim and opens a console session bound to the identity: it ends at the ID or
// access token's expiry and when the provider stops standing behind it (session-check.ts).
import { timingSafeEqual } from "node:crypto";
import type { Clock } from "../../../common/clock.js";
import { EpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import { claimedRole, PERSON_ROLES, type OidcConfig, type OidcLoginConfig } from "../auth/index.js";
import type { Caller, Role } from "../caller.js";
import type { SecretKeyring } from "../secrets/index.js";
import { FLOW_TTL_MS, openFlow, sealFlow } from "./flow-state.js";
import { newFlowChecks, type RelyingParty, type SignedIn } from "./relying-party.js";
import type { OidcSessionCheck, OidcSessionScope } from "./types.js";

export interface OidcLogin {
  /** "Sign in with <providerName>" */
  providerName: string;
  /** The provider's authorization URL and the sealed flow cookie to set (it lives FLOW_TTL_MS). */
  begin(): Promise<{ url: string; flowCookie: string; maxAgeSeconds: number }>;
  /**
   * The provider's answer (the callback's query) for the flow in `flowCookie`: a console
   * session, or an EpError saying why not (oidc_callback_invalid, oidc_sign_in_refused,
   * oidc_provider_unavailable).
   */
  complete(
    query: URLSearchParams,
    flowCookie: string | undefined,
  ): Promise<{ secret: string; expiresMs: number; role: Role; subject: string }>;
}

export interface OidcLoginDeps {
  clock: Clock;
  log: Logger;
  keyring: () => SecretKeyring | undefined;
  rp: RelyingParty;
  sessions: OidcSessionCheck;
  createSession(caller: Caller, oidc: OidcSessionScope): Promise<{ secret: string; expiresMs: number }>;
}

/** The answer's parameters that must come once at most (RFC 6749 §3.1: none may repeat). */
const ANSWER_PARAMS = ["state", "code", "error", "error_description", "iss", "session_state"];
const MAX_PARAM_LENGTH = 4096;

export function createOidcLogin(cfg: OidcConfig & { login: OidcLoginConfig }, deps: OidcLoginDeps): OidcLogin {
  const { clock, log, rp } = deps;

  function ring(): SecretKeyring {
    const r = deps.keyring();
    if (!r)
      throw new EpError(
        "unavailable",
        "console sign-in through OIDC needs the secret-store key " +
          "(EP_SECRET_KEY or the key file the tower writes at first start)",
      );
    return r;
  }

  /** The role a person signs in with: the claim (ID token, else userinfo), else EP_OIDC_DEFAULT_ROLE, else refused. */
  async function roleOf(signedIn: SignedIn): Promise<Role> {
    const claim = cfg.roleClaim;
    let claims = signedIn.claims;
    // providers that keep extra claims out of the ID token (OIDC Core §5.4) send them from userinfo
    if (claims[claim] === undefined) {
      const info = await rp.userinfo(signedIn.accessToken, signedIn.sub);
      if (info.ok) claims = { ...info.claims, ...claims };
    }
    const role = claimedRole(claims, claim, PERSON_ROLES);
    if (role) return role;
    if (cfg.login.defaultRole) return cfg.login.defaultRole;
    const who = whoOf(claims);
    const got = claims[claim];
    throw new EpError(
      "oidc_sign_in_refused",
      got === undefined
        ? `your identity (${who}) carries no ${claim} claim, so EP cannot tell ` +
            `your role; ask your identity provider's admin to add the ${claim} claim ` +
            `(admin, operator or viewer), or set EP_OIDC_DEFAULT_ROLE on the tower`
        : `your identity's ${claim} claim is ${JSON.stringify(got)}, which names none of ` +
            `EP's roles (admin, operator, viewer); ask your identity provider's admin to fix it`,
      { claim },
    );
  }

  return {
    providerName: cfg.login.providerName,

    async begin() {
      const keys = ring();
      const { state, nonce, verifier, codeChallenge } = await newFlowChecks();
      const flowCookie = sealFlow(keys, { state, nonce, verifier, expiresMs: clock.now() + FLOW_TTL_MS });
      return {
        url: rp.authorizationUrl({ state, nonce, codeChallenge }).href,
        flowCookie,
        maxAgeSeconds: FLOW_TTL_MS / 1000,
      };
    },

    async complete(query, flowCookie) {
      for (const name of ANSWER_PARAMS) {
        const values = query.getAll(name);
        if (values.length > 1)
          throw new EpError(
            "oidc_callback_invalid",
            `the sign-in response has ${name} ${values.length} times; it may have it once`,
            { field: name },
          );
        if (values[0] !== undefined && values[0].length > MAX_PARAM_LENGTH)
          throw new EpError(
            "oidc_callback_invalid",
            `the sign-in response's ${name} is longer than ${MAX_PARAM_LENGTH} characters`,
            { field: name },
          );
      }
      const flow = openFlow(ring(), flowCookie, clock.now());
      const state = query.get("state");
      if (!state)
        throw new EpError(
          "oidc_callback_invalid",
          "the sign-in response has no state, so it cannot be matched " +
            "to the sign-in this browser started; start the sign-in again",
          { field: "state" },
        );
      if (!sameText(state, flow.state)) {
        throw new EpError(
          "oidc_callback_invalid",
          "state mismatch: the sign-in response is not for the sign-in this browser started " +
            "(an old tab, a second sign-in since, or a forged link); start the sign-in again",
          { field: "state" },
        );
      }
      // only now, for a response that is this browser's own, is the provider's error shown
      const error = query.get("error");
      if (error) {
        const description = query.get("error_description");
        const denied =
          error === "access_denied"
            ? "you (or the provider's policy) declined the sign-in"
            : "the identity provider did not sign you in";
        throw new EpError("oidc_sign_in_refused", `${denied}: ${error}${description ? ` (${description})` : ""}`, {
          error,
        });
      }
      if (!query.get("code"))
        throw new EpError(
          "oidc_callback_invalid",
          "the sign-in response has neither a code nor an error; start the sign-in again",
          { field: "code" },
        );

      const callback = new URL(cfg.login.redirectUri);
      callback.search = query.toString();
      const now = clock.now();
      const signedIn = await rp.exchange(callback, flow, now);
      const role = await roleOf(signedIn);
      const caller: Caller = {
        subject: `oidc:${signedIn.sub}`,
        principal: `oidc:${signedIn.sub}`,
        name: nameOf(signedIn.claims),
        role,
        via: "oidc",
        // the identity's lifetime: the session never outlives the ID token or the access token
        expiresMs: Math.min(signedIn.idTokenExpiresMs, signedIn.accessTokenExpiresMs ?? Infinity),
      };
      const session = await deps.createSession(caller, deps.sessions.scopeOf(signedIn.sub, signedIn.accessToken));
      log.info("console sign-in through the identity provider", {
        subject: caller.subject,
        role,
        expires_in_s: Math.round((session.expiresMs - now) / 1000),
      });
      return { ...session, role, subject: caller.subject };
    },
  };
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

const text = (v: unknown): string | undefined =>
  typeof v === "string" && v.trim() ? v.trim().slice(0, 200) : undefined;
const nameOf = (claims: Record<string, unknown>) =>
  text(claims.email) ?? text(claims.preferred_username) ?? text(claims.name);
const whoOf = (claims: Record<string, unknown>) => nameOf(claims) ?? `subject ${String(claims.sub)}`;
