// Credentials derived from another: single-use tickets (attach, login, events) and console
// sessions (POST /auth/session). Each carries the scope of the credential that made it and is
// checked against that source on every use: a revoked or expired token ends what came from it.
import { randomBytes } from "node:crypto";
import type { Clock } from "../../../common/clock.js";
import { EpError, invalidField } from "../../../common/errors.js";
import type { Store, TicketRow, TokenRow } from "../../store/store.js";
import type { CallerCache } from "./cache.js";
import { principalOf, type Caller, type Role } from "../caller.js";
import { hashSecret } from "./secret.js";
import type { OidcSessionCheck, OidcSessionScope } from "../oidc-login/types.js";

/** Console session cookies (POST /auth/session). */
export const SESSION_PREFIX = "eps_";
export const SESSION_MAX_MS = 7 * 86_400_000;
const TICKET_PURPOSES = ["attach", "login", "events"];
/** a login link lives 24 h by default (docs/api.md), the socket tickets a minute */
const LOGIN_TTL_MS = 24 * 3_600_000;
const SOCKET_TTL_MS = 60_000;

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
  /** a person's name to show (OIDC: email, else name) */
  name?: string;
  expiresMs?: number;
  /** a console session from the identity provider's sign-in: re-checked with it (oidc-login/session-check.ts) */
  oidc?: OidcSessionScope;
}

/** The caller a service token stands for. */
export function tokenCallerOf(row: TokenRow): Caller {
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
  name: caller.name,
  expiresMs: caller.expiresMs,
  oidc: caller.oidc,
});

export interface TicketAuthDeps {
  store: Store;
  clock: Clock;
  cache: CallerCache;
  /** the caller of a registered node, read now */
  nodeCaller(nodeId: string): Promise<Caller>;
  /** asks the identity provider about sessions its sign-in made (when console sign-in is configured) */
  oidcSessions?: OidcSessionCheck;
}

function scopeOfRow(row: TicketRow): TicketScope {
  try {
    return JSON.parse(row.scope) as TicketScope;
  } catch {
    return { via: "ticket" };
  }
}

export function createTicketAuth({ store, clock, cache, nodeCaller, oidcSessions }: TicketAuthDeps) {
  /** The caller of a token, by id: the source of a ticket or session, checked on every use. */
  async function tokenCaller(tokenId: string): Promise<Caller> {
    const row = await store.getToken(tokenId);
    if (!row)
      throw new EpError("unauthenticated", `token ${tokenId}, which this credential came from, no longer exists`);
    if (row.revokedAt)
      throw new EpError(
        "token_revoked",
        `token ${row.id}, which this credential came from, was revoked at ${row.revokedAt}`,
      );
    if (row.expiresAt && Date.parse(row.expiresAt) <= clock.now())
      throw new EpError(
        "token_expired",
        `token ${row.id}, which this credential came from, expired at ${row.expiresAt}`,
      );
    return tokenCallerOf(row);
  }

  /** Rebuilds the caller a ticket or session was made by, from the source credential as it is now. */
  async function callerOf(row: TicketRow, scope = scopeOfRow(row)): Promise<Caller> {
    let source: Caller;
    if (scope.tokenId) source = await tokenCaller(scope.tokenId);
    else if (scope.nodeId) source = await nodeCaller(scope.nodeId);
    else {
      // OIDC (or a ticket from before scopes were kept): what was stored, until it expires
      if (scope.expiresMs !== undefined && scope.expiresMs <= clock.now())
        throw new EpError("token_expired", "the credential this came from has expired; sign in again");
      source = {
        subject: row.subject,
        principal: scope.principal ?? row.subject,
        name: scope.name,
        role: row.role as Role,
        via: scope.via,
        domainId: scope.domainId,
        expiresMs: scope.expiresMs,
      };
    }
    const expiresMs = Math.min(source.expiresMs ?? Infinity, row.purpose === "console" ? row.expiresMs : Infinity);
    const caller: Caller = {
      ...source,
      principal: source.principal ?? row.subject,
      expiresMs: Number.isFinite(expiresMs) ? expiresMs : undefined,
      oidc: scope.oidc,
    };
    if (scope.oidc) {
      // made from an identity provider's sign-in (a session, or a ticket a session asked for): it stands while the
      // provider does
      if (!oidcSessions)
        throw new EpError(
          "unauthenticated",
          "this credential came from an identity provider this tower no longer signs in with; sign in again",
        );
      await oidcSessions.check(scope.oidc, caller);
    }
    return caller;
  }

  /** Stores a derived credential (its hash) for `caller` with the caller's scope. */
  async function store_(
    secret: string,
    purpose: string,
    caller: Caller,
    expiresMs: number,
    agentId = "",
  ): Promise<void> {
    await store.insertTicket({
      hash: hashSecret(secret),
      purpose,
      subject: principalOf(caller),
      role: caller.role,
      agentId,
      expiresMs,
      scope: JSON.stringify(scopeOf(caller)),
    });
  }

  async function endByHash(hash: string): Promise<void> {
    cache.delete(hash);
    await store.consumeTicket(hash, clock.now());
  }

  return {
    async verifySession(secret: string): Promise<Caller> {
      const hash = hashSecret(secret);
      const hit = cache.get(hash);
      if (hit) return hit;
      const row = await store.findTicket(hash, clock.now());
      if (!row || row.purpose !== "console")
        throw new EpError(
          "unauthenticated",
          "the console session has ended (logged out, expired or unknown); sign in again",
        );
      let source: Caller;
      try {
        source = await callerOf(row);
      } catch (err) {
        // ended at the provider: ended here, on every replica (the row goes)
        if (err instanceof EpError && err.code === "unauthenticated" && scopeOfRow(row).oidc) await endByHash(hash);
        throw err;
      }
      const caller: Caller = { ...source, sessionHash: hash };
      cache.set(hash, caller);
      return caller;
    },

    async createTicket(caller: Caller, input: { purpose: string; agentId?: string; ttlMs?: number }) {
      if (!TICKET_PURPOSES.includes(input.purpose)) throw invalidField("purpose", "must be attach, login or events");
      if (input.purpose === "login" && caller.role === "node")
        throw new EpError("forbidden", "a node token cannot open a console session");
      const now = clock.now();
      // a ticket never outlives the credential that made it
      const ttlMs = Math.min(
        input.ttlMs ?? (input.purpose === "login" ? LOGIN_TTL_MS : SOCKET_TTL_MS),
        LOGIN_TTL_MS,
        (caller.expiresMs ?? Infinity) - now,
      );
      if (ttlMs <= 0) throw new EpError("token_expired", "the credential has expired; a ticket cannot outlive it");
      const ticket = "tkt_" + randomBytes(24).toString("base64url");
      const expiresMs = now + ttlMs;
      await store_(ticket, input.purpose, caller, expiresMs, input.agentId);
      return { ticket, expiresMs };
    },

    async redeemTicket(ticket: string, purpose: string) {
      const row = await store.consumeTicket(hashSecret(ticket), clock.now());
      if (!row || row.purpose !== purpose)
        throw new EpError("unauthenticated", "the ticket is unknown, used or expired; ask for a new one");
      return { ...(await callerOf(row)), via: "ticket" as const, agentId: row.agentId };
    },

    /** `oidc`: what a session from the identity provider's sign-in keeps to be re-checked */
    async createSession(caller: Caller, oidc?: OidcSessionScope) {
      if (caller.role === "node") throw new EpError("forbidden", "a node token cannot open a console session");
      const now = clock.now();
      const expiresMs = Math.min(now + SESSION_MAX_MS, caller.expiresMs ?? Infinity);
      if (expiresMs <= now) throw new EpError("token_expired", "the credential has expired");
      const secret = SESSION_PREFIX + randomBytes(24).toString("base64url");
      await store_(secret, "console", oidc ? { ...caller, oidc } : caller, expiresMs);
      return { secret, expiresMs };
    },

    async endSession(secret: string) {
      if (!secret.startsWith(SESSION_PREFIX)) return;
      await endByHash(hashSecret(secret));
    },
  };
}
