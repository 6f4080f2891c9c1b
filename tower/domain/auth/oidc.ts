// OIDC bearer tokens: verified against the issuer's JWKS (found by discovery on first use); the
// role comes from a claim, or the configured default.
import * as jose from "jose";
import type { Clock } from "../../../common/clock.js";
import { EpError } from "../../../common/errors.js";
import { ROLES, type Caller, type Role } from "../caller.js";

export interface OidcConfig {
  issuer: string;
  audience: string;
  roleClaim: string;
  /** bearer tokens without the claim get this role (EP_OIDC_DEFAULT_ROLE, else viewer) */
  defaultRole: Role;
  /** the console's sign-in (EP_OIDC_CLIENT_ID): tower/domain/oidc-login/ */
  login?: OidcLoginConfig;
}

/** Where the identity provider sends the browser back to (on the tower's public URL). */
export const OIDC_CALLBACK_PATH = "/auth/oidc/callback";

export interface OidcLoginConfig {
  clientId: string;
  /** a confidential client's secret (EP_OIDC_CLIENT_SECRET); without it a public client with PKCE */
  clientSecret?: string;
  /** "Sign in with <providerName>" (EP_OIDC_PROVIDER_NAME, else the issuer's host) */
  providerName: string;
  scopes: string;
  /** the public URL + OIDC_CALLBACK_PATH: what the provider must have registered */
  redirectUri: string;
  /** how often a console session asks the provider (userinfo) whether the sign-in still stands */
  recheckMs: number;
  /**
   * the role of a person whose identity carries no role claim: only when EP_OIDC_DEFAULT_ROLE is
   * set; otherwise such a sign-in is refused (anyone the provider knows would be let in)
   */
  defaultRole?: Role;
}

/**
 * The roles a claim may give: never node; agent only to bearer tokens (people sign in as admin, operator or viewer).
 */
const BEARER_ROLES = ROLES.filter((r) => r !== "node");
export const PERSON_ROLES: readonly Role[] = ["admin", "operator", "viewer"];

/** The first of `allowed` the claim names (a string or a list of strings), else undefined. */
export function claimedRole(
  claims: Record<string, unknown>,
  claimName: string,
  allowed: readonly Role[] = BEARER_ROLES,
): Role | undefined {
  const claim = claims[claimName];
  return (Array.isArray(claim) ? claim : [claim]).find(
    (r): r is Role => typeof r === "string" && allowed.includes(r as Role),
  );
}

export function createOidcVerifier(cfg: OidcConfig | undefined, clock: Clock): (jwt: string) => Promise<Caller> {
  let jwks: ReturnType<typeof jose.createRemoteJWKSet> | undefined;

  async function keySet(c: OidcConfig) {
    if (jwks) return jwks;
    const discovery = `${c.issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
    let jwksUri: string;
    try {
      const res = await fetch(discovery);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      jwksUri = ((await res.json()) as { jwks_uri: string }).jwks_uri;
    } catch (err) {
      throw new EpError("unavailable", `OIDC discovery at ${discovery} failed: ${(err as Error).message}`);
    }
    return (jwks = jose.createRemoteJWKSet(new URL(jwksUri)));
  }

  return async (jwt) => {
    if (!cfg) throw new EpError("unauthenticated", "the token is not known to this tower (OIDC is not configured)");
    let payload: jose.JWTPayload;
    try {
      ({ payload } = await jose.jwtVerify(jwt, await keySet(cfg), {
        issuer: cfg.issuer,
        audience: cfg.audience,
        currentDate: new Date(clock.now()),
      }));
    } catch (err) {
      if (err instanceof EpError) throw err;
      if (err instanceof jose.errors.JWTExpired)
        throw new EpError("token_expired", "the OIDC token has expired; sign in again");
      throw new EpError("unauthenticated", `the OIDC token failed verification: ${(err as Error).message}`);
    }
    const claimed = claimedRole(payload, cfg.roleClaim);
    return {
      subject: `oidc:${payload.sub ?? "unknown"}`,
      role: claimed ?? cfg.defaultRole,
      via: "oidc",
      expiresMs: payload.exp ? payload.exp * 1000 : undefined,
    };
  };
}
