// OIDC bearer tokens: verified against the issuer's JWKS (found by discovery on first use); the
// role comes from a claim, or the configured default.
import * as jose from "jose";
import type { Clock } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import { ROLES, type Caller, type Role } from "./caller.js";

export interface OidcConfig {
  issuer: string;
  audience: string;
  roleClaim: string;
  defaultRole: Role;
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
      ({ payload } = await jose.jwtVerify(jwt, await keySet(cfg), { issuer: cfg.issuer, audience: cfg.audience, currentDate: new Date(clock.now()) }));
    } catch (err) {
      if (err instanceof EpError) throw err;
      if (err instanceof jose.errors.JWTExpired) throw new EpError("token_expired", "the OIDC token has expired; sign in again");
      throw new EpError("unauthenticated", `the OIDC token failed verification: ${(err as Error).message}`);
    }
    const claim = payload[cfg.roleClaim];
    const claimed = (Array.isArray(claim) ? claim : [claim]).find((r): r is Role => typeof r === "string" && ROLES.includes(r as Role) && r !== "node");
    return {
      subject: `oidc:${payload.sub ?? "unknown"}`,
      role: claimed ?? cfg.defaultRole,
      via: "oidc",
      expiresMs: payload.exp ? payload.exp * 1000 : undefined,
    };
  };
}
