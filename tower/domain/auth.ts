// Authentication: service-account tokens (opaque, hashed, several per account,
// expiring, revocable), node JWTs signed by the tower's rotating key set, OIDC
// tokens verified against the issuer's JWKS, and single-use tickets.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import * as jose from "jose";
import { iso } from "../../common/clock.js";
import { EpError, invalidField } from "../../common/errors.js";
import { newId } from "../../common/ids.js";
import type { TicketRow, TokenRow } from "../store/store.js";
import { authorize, principalOf, ROLES, type Caller, type Role } from "./caller.js";
import { createSigningKeys } from "./auth-keys.js";
import type { SecretKeyring } from "./secrets-crypto.js";
import type { Deps } from "./deps.js";

export const TOKEN_PREFIX = "ept_";
/** Console session cookies (POST /auth/session). */
export const SESSION_PREFIX = "eps_";
export const SESSION_MAX_MS = 7 * 86_400_000;
const TICKET_PURPOSES = ["attach", "login", "events"];

/**
 * What a ticket or console session carries from the credential that made it (stored as JSON in
 * tickets.scope). Redeeming rebuilds the caller from it and checks the source token again.
 */
interface TicketScope {
  via: Caller["via"];
  tokenId?: string;
  domainId?: string;
  nodeId?: string;
  principal?: string;
  expiresMs?: number;
}

export const hashSecret = (secret: string): string => createHash("sha256").update(secret).digest("hex");

/**
 * How long a verified credential is reused without going back to the store (docs/api.md,
 * "Authentication and roles"): a revoke on this replica drops it at once; on another replica
 * it takes effect within this bound. Expiry is checked on every request.
 */
export const AUTH_CACHE_MS = 1000;
const AUTH_CACHE_MAX = 4096;

export interface OidcConfig {
  issuer: string;
  audience: string;
  roleClaim: string;
  defaultRole: Role;
}

export interface AuthOptions {
  oidc?: OidcConfig;
  /** node JWT issuer string */
  issuer: string;
  /** a new signing key is made when the newest is older than this */
  keyRotationMs: number;
  /** the secret-store keyring: private signing keys are kept encrypted under it */
  keyring?: () => SecretKeyring | undefined;
  /** runs fn alone across replicas (the bootstrap admin is made once); in-process otherwise */
  exclusive?: <T>(name: string, fn: () => Promise<T>) => Promise<T>;
}

export interface Auth {
  authenticate(bearer: string | undefined): Promise<Caller>;
  createToken(caller: Caller, input: { name: string; role: string; domainId?: string; ttlSeconds?: number }): Promise<{ token: TokenRow; secret: string }>;
  listTokens(caller: Caller): Promise<TokenRow[]>;
  revokeToken(caller: Caller, tokenId: string): Promise<TokenRow>;
  /** Signs a node identity JWT. */
  signNodeToken(nodeId: string, hostname: string): Promise<string>;
  /** Adds a new signing key; older keys still verify tokens they signed. */
  rotateSigningKey(): Promise<string>;
  /** The public key set, for anyone verifying node tokens. */
  jwks(): Promise<jose.JSONWebKeySet>;
  createTicket(caller: Caller, input: { purpose: string; agentId?: string; ttlMs?: number }): Promise<{ ticket: string; expiresMs: number }>;
  /**
   * Redeems a single-use ticket into the caller that created it: the same role, domain, node,
   * token and expiry, checked again against the source credential (revoked or expired: refused).
   */
  redeemTicket(ticket: string, purpose: string): Promise<Caller & { agentId: string }>;
  /**
   * A console session for a caller (POST /auth/session): bound to the caller's credential, it
   * ends when that token is revoked or expires, after 7 days, or at logout (endSession).
   */
  createSession(caller: Caller): Promise<{ secret: string; expiresMs: number }>;
  endSession(secret: string): Promise<void>;
  /**
   * Seals stored signing keys under the current secret-store key (those in clear, or under
   * EP_SECRET_KEY_PREVIOUS); run at start. A key that cannot be opened is logged, not thrown.
   */
  resealSigningKeys(): Promise<void>;
  /** Makes the bootstrap admin token if there are no tokens yet; returns its secret once. */
  bootstrapAdmin(): Promise<string | undefined>;
}

export function createAuth(deps: Deps, opts: AuthOptions): Auth {
  const { store, clock } = deps;
  let oidcJwks: ReturnType<typeof jose.createRemoteJWKSet> | undefined;
  const lastUsedWrites = new Map<string, number>();
  // service tokens verified lately, keyed by the token's hash
  const verified = new Map<string, { caller: Caller; untilMs: number }>();
  const keys = createSigningKeys(deps, opts);

  function cached(key: string): Caller | undefined {
    const hit = verified.get(key);
    if (!hit) return undefined;
    const now = clock.now();
    if (hit.untilMs <= now || (hit.caller.expiresMs !== undefined && hit.caller.expiresMs <= now)) {
      verified.delete(key);
      return undefined;
    }
    return hit.caller;
  }

  function remember(key: string, caller: Caller): void {
    if (verified.size >= AUTH_CACHE_MAX) verified.clear();
    verified.set(key, { caller: Object.freeze(caller), untilMs: clock.now() + AUTH_CACHE_MS });
  }

  async function verifyNodeToken(jwt: string): Promise<Caller> {
    // the signature check (ES256) is the costly part and is reused; the node and its
    // domains are read on every call, so a removed node or a new enrolment counts at once
    return nodeCaller(await keys.verify(jwt));
  }

  async function nodeCaller(nodeId: string): Promise<Caller> {
    const node = await store.getNode(nodeId);
    if (!node) throw new EpError("unauthenticated", `node ${nodeId} is not registered with this tower`);
    const nodeDomains = [...new Set((await store.listAgents({ nodeId })).map((a) => a.domainId))];
    return { subject: nodeId, role: "node", via: "node", nodeId, nodeDomains, nodeServes: node.domains };
  }

  async function verifyOidc(jwt: string): Promise<Caller> {
    const cfg = opts.oidc;
    if (!cfg) throw new EpError("unauthenticated", "the token is not known to this tower (OIDC is not configured)");
    if (!oidcJwks) {
      const discovery = `${cfg.issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
      let jwksUri: string;
      try {
        const res = await fetch(discovery);
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        jwksUri = ((await res.json()) as { jwks_uri: string }).jwks_uri;
      } catch (err) {
        throw new EpError("unavailable", `OIDC discovery at ${discovery} failed: ${(err as Error).message}`);
      }
      oidcJwks = jose.createRemoteJWKSet(new URL(jwksUri));
    }
    let payload: jose.JWTPayload;
    try {
      ({ payload } = await jose.jwtVerify(jwt, oidcJwks, { issuer: cfg.issuer, audience: cfg.audience, currentDate: new Date(clock.now()) }));
    } catch (err) {
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
  }

  /** last_used_at is advisory: written at most once a minute per token. */
  async function noteUse(tokenId: string): Promise<void> {
    const now = clock.now();
    if ((lastUsedWrites.get(tokenId) ?? 0) < now - 60_000) {
      lastUsedWrites.set(tokenId, now);
      await store.updateToken(tokenId, { lastUsedAt: iso(now) });
    }
  }

  async function verifyServiceToken(secret: string): Promise<Caller> {
    const hash = hashSecret(secret);
    const hit = cached(hash);
    if (hit) {
      await noteUse(hit.tokenId!);
      return hit;
    }
    const row = await store.getTokenByHash(hash);
    if (!row || !timingSafeEqual(Buffer.from(row.hash), Buffer.from(hash))) {
      throw new EpError("unauthenticated", "the token is not known to this tower");
    }
    if (row.revokedAt) throw new EpError("token_revoked", `token ${row.id} was revoked at ${row.revokedAt}`);
    const now = clock.now();
    if (row.expiresAt && Date.parse(row.expiresAt) <= now) throw new EpError("token_expired", `token ${row.id} expired at ${row.expiresAt}`);
    await noteUse(row.id);
    const caller: Caller = {
      subject: row.id,
      principal: row.name,
      role: row.role as Role,
      via: "token",
      tokenId: row.id,
      domainId: row.domainId || undefined,
      expiresMs: row.expiresAt ? Date.parse(row.expiresAt) : undefined,
    };
    remember(hash, caller);
    return caller;
  }

  async function verifySession(secret: string): Promise<Caller> {
    const hash = hashSecret(secret);
    const hit = cached(hash);
    if (hit) return hit;
    const row = await store.findTicket(hash, clock.now());
    if (!row || row.purpose !== "console") throw new EpError("unauthenticated", "the console session has ended (logged out, expired or unknown); sign in again");
    const caller: Caller = { ...(await callerOf(row)), sessionHash: hash };
    remember(hash, caller);
    return caller;
  }

  /** The caller of a token, by id: the source of a ticket or session, checked on every use. */
  async function tokenCaller(tokenId: string): Promise<Caller> {
    const row = await store.getToken(tokenId);
    if (!row) throw new EpError("unauthenticated", `token ${tokenId}, which this credential came from, no longer exists`);
    if (row.revokedAt) throw new EpError("token_revoked", `token ${row.id}, which this credential came from, was revoked at ${row.revokedAt}`);
    if (row.expiresAt && Date.parse(row.expiresAt) <= clock.now()) throw new EpError("token_expired", `token ${row.id}, which this credential came from, expired at ${row.expiresAt}`);
    return {
      subject: row.id,
      principal: row.name,
      role: row.role as Role,
      via: "token",
      tokenId: row.id,
      domainId: row.domainId || undefined,
      expiresMs: row.expiresAt ? Date.parse(row.expiresAt) : undefined,
    };
  }

  const scopeOf = (caller: Caller): TicketScope => ({
    via: caller.via,
    tokenId: caller.tokenId,
    domainId: caller.domainId,
    nodeId: caller.nodeId,
    principal: principalOf(caller),
    expiresMs: caller.expiresMs,
  });

  /** Rebuilds the caller a ticket or session was made by, from the source credential as it is now. */
  async function callerOf(row: TicketRow): Promise<Caller> {
    let scope: TicketScope;
    try {
      scope = JSON.parse(row.scope) as TicketScope;
    } catch {
      scope = { via: "ticket" };
    }
    let source: Caller;
    if (scope.tokenId) source = await tokenCaller(scope.tokenId);
    else if (scope.nodeId) source = await nodeCaller(scope.nodeId);
    else {
      // OIDC (or a ticket from before scopes were kept): what was stored, until it expires
      if (scope.expiresMs !== undefined && scope.expiresMs <= clock.now()) throw new EpError("token_expired", "the credential this came from has expired; sign in again");
      source = { subject: row.subject, principal: scope.principal ?? row.subject, role: row.role as Role, via: scope.via, domainId: scope.domainId, expiresMs: scope.expiresMs };
    }
    const expiresMs = Math.min(source.expiresMs ?? Infinity, row.purpose === "console" ? row.expiresMs : Infinity);
    return { ...source, principal: source.principal ?? row.subject, expiresMs: Number.isFinite(expiresMs) ? expiresMs : undefined };
  }

  async function createToken(caller: Caller, input: { name: string; role: string; domainId?: string; ttlSeconds?: number }) {
    authorize(caller, "admin");
    if (!input.name?.trim()) throw invalidField("name", "is required");
    if (!ROLES.includes(input.role as Role) || input.role === "node") {
      throw invalidField("role", `must be one of admin, operator, viewer, agent (got ${JSON.stringify(input.role)})`);
    }
    if (input.role === "agent" && !input.domainId) throw invalidField("domain_id", "is required for agent tokens");
    if (input.domainId && !(await store.getDomain(input.domainId))) throw new EpError("domain_not_found", `domain ${input.domainId} does not exist`);
    const ttl = input.ttlSeconds ?? 0;
    if (ttl < 0) throw invalidField("ttl_seconds", "must be zero (no expiry) or positive");
    const secret = TOKEN_PREFIX + randomBytes(24).toString("base64url");
    const now = clock.now();
    const row: TokenRow = {
      id: newId("tok", now),
      name: input.name.trim(),
      role: input.role,
      domainId: input.domainId ?? "",
      hash: hashSecret(secret),
      expiresAt: ttl ? iso(now + ttl * 1000) : "",
      createdAt: iso(now),
      revokedAt: "",
      lastUsedAt: "",
    };
    await store.insertToken(row);
    return { token: row, secret };
  }

  return {
    async authenticate(bearer) {
      if (!bearer) throw new EpError("unauthenticated", "no credentials: send 'Authorization: Bearer <token>'");
      if (bearer.startsWith(TOKEN_PREFIX)) return verifyServiceToken(bearer);
      if (bearer.startsWith(SESSION_PREFIX)) return verifySession(bearer);
      if (keys.recentlyVerified(bearer)) return verifyNodeToken(bearer);
      if (bearer.split(".").length === 3) {
        let header: jose.ProtectedHeaderParameters | undefined;
        try {
          header = jose.decodeProtectedHeader(bearer);
        } catch {
          throw new EpError("unauthenticated", "the bearer token is not a valid JWT");
        }
        const mine = await keys.owns(header?.kid);
        return mine ? verifyNodeToken(bearer) : verifyOidc(bearer);
      }
      throw new EpError("unauthenticated", "the token is not known to this tower");
    },

    createToken,

    async listTokens(caller) {
      authorize(caller, "admin");
      return store.listTokens();
    },

    async revokeToken(caller, tokenId) {
      authorize(caller, "admin");
      const row = await store.getToken(tokenId);
      if (!row) throw new EpError("token_not_found", `token ${tokenId} does not exist`);
      if (row.revokedAt) return row;
      const revoked = (await store.updateToken(tokenId, { revokedAt: iso(clock.now()) }))!;
      // takes effect at once on this replica: the next request goes back to the store
      for (const [key, hit] of verified) if (hit.caller.tokenId === tokenId) verified.delete(key);
      return revoked;
    },

    signNodeToken: (nodeId, hostname) => keys.sign(nodeId, hostname),
    rotateSigningKey: () => keys.rotate(),
    jwks: () => keys.jwks(),

    async createTicket(caller, input) {
      if (!TICKET_PURPOSES.includes(input.purpose)) throw invalidField("purpose", "must be attach, login or events");
      if (input.purpose === "login" && caller.role === "node") throw new EpError("forbidden", "a node token cannot open a console session");
      const now = clock.now();
      // a ticket never outlives the credential that made it
      // a login link lives 24 h by default (docs/api.md), the socket tickets a minute
      const ttlMs = Math.min(input.ttlMs ?? (input.purpose === "login" ? 24 * 3_600_000 : 60_000), 24 * 3_600_000, (caller.expiresMs ?? Infinity) - now);
      if (ttlMs <= 0) throw new EpError("token_expired", "the credential has expired; a ticket cannot outlive it");
      const ticket = "tkt_" + randomBytes(24).toString("base64url");
      const expiresMs = now + ttlMs;
      await store.insertTicket({
        hash: hashSecret(ticket),
        purpose: input.purpose,
        subject: principalOf(caller),
        role: caller.role,
        agentId: input.agentId ?? "",
        expiresMs,
        scope: JSON.stringify(scopeOf(caller)),
      });
      return { ticket, expiresMs };
    },

    async redeemTicket(ticket, purpose) {
      const row = await store.consumeTicket(hashSecret(ticket), clock.now());
      if (!row || row.purpose !== purpose) throw new EpError("unauthenticated", "the ticket is unknown, used or expired; ask for a new one");
      return { ...(await callerOf(row)), via: "ticket", agentId: row.agentId };
    },

    async createSession(caller) {
      if (caller.role === "node") throw new EpError("forbidden", "a node token cannot open a console session");
      const now = clock.now();
      const expiresMs = Math.min(now + SESSION_MAX_MS, caller.expiresMs ?? Infinity);
      if (expiresMs <= now) throw new EpError("token_expired", "the credential has expired");
      const secret = SESSION_PREFIX + randomBytes(24).toString("base64url");
      await store.insertTicket({
        hash: hashSecret(secret),
        purpose: "console",
        subject: principalOf(caller),
        role: caller.role,
        agentId: "",
        expiresMs,
        scope: JSON.stringify(scopeOf(caller)),
      });
      return { secret, expiresMs };
    },

    async endSession(secret) {
      if (!secret.startsWith(SESSION_PREFIX)) return;
      const hash = hashSecret(secret);
      verified.delete(hash);
      await store.consumeTicket(hash, clock.now());
    },

    resealSigningKeys: () => keys.reseal(),

    bootstrapAdmin() {
      const make = async () => {
        if ((await store.getMeta("bootstrap_admin")) || (await store.listTokens()).length) return undefined;
        const { token, secret } = await createToken({ subject: "tower", role: "admin", via: "internal" }, { name: "bootstrap-admin", role: "admin" });
        await store.setMeta("bootstrap_admin", token.id);
        return secret;
      };
      return opts.exclusive ? opts.exclusive("bootstrap_admin", make) : make();
    },
  };
}
