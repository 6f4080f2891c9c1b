// Authentication: service-account tokens (opaque, hashed, several per account,
// expiring, revocable), node JWTs signed by the tower's rotating key set, OIDC
// tokens verified against the issuer's JWKS, and single-use tickets.
import { randomBytes, timingSafeEqual } from "node:crypto";
import * as jose from "jose";
import { iso } from "../../../common/clock.js";
import { EpError, invalidField } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import type { Store, TokenRow } from "../../store/store.js";
import { authorize, ROLES, type Caller, type Role } from "../caller.js";
import { createSigningKeys } from "./keys.js";
import { CallerCache } from "./cache.js";
import { createOidcVerifier, type OidcConfig } from "./oidc.js";
import { hashSecret } from "./secret.js";
import { createTicketAuth, SESSION_PREFIX, tokenCallerOf } from "./tickets.js";
import type { SecretKeyring } from "../secrets/index.js";
import type { OidcSessionCheck, OidcSessionScope } from "../oidc-login/types.js";
import type { Deps } from "../deps.js";

export const TOKEN_PREFIX = "ept_";
export { SESSION_MAX_MS, SESSION_PREFIX } from "./tickets.js";
export { AUTH_CACHE_MS } from "./cache.js";
export { hashSecret } from "./secret.js";
export type { OidcConfig } from "./oidc.js";

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
  /** re-checks console sessions made by the identity provider's sign-in (oidc-login/) */
  oidcSessions?: OidcSessionCheck;
}

export interface Auth {
  authenticate(bearer: string | undefined): Promise<Caller>;
  /** `tx`: the transaction to write it in (an idempotent create records its key there too) */
  createToken(
    caller: Caller,
    input: { name: string; role: string; domainId?: string; ttlSeconds?: number },
    tx?: Store,
  ): Promise<{ token: TokenRow; secret: string }>;
  listTokens(caller: Caller): Promise<TokenRow[]>;
  revokeToken(caller: Caller, tokenId: string): Promise<TokenRow>;
  /** Signs a node identity JWT. */
  signNodeToken(nodeId: string, hostname: string): Promise<string>;
  /** Who a node's requests act as now (its served domains, its agents' domains); cached as for its calls. */
  nodeCaller(nodeId: string): Promise<Caller>;
  /** The node's caller when this replica has it at hand (no read): for a decision made inside a commit. */
  cachedNodeCaller(nodeId: string): Caller | undefined;
  /** Adds a new signing key; older keys still verify tokens they signed. */
  rotateSigningKey(): Promise<string>;
  /** The public key set, for anyone verifying node tokens. */
  jwks(): Promise<jose.JSONWebKeySet>;
  createTicket(
    caller: Caller,
    input: { purpose: string; agentId?: string; ttlMs?: number },
  ): Promise<{ ticket: string; expiresMs: number }>;
  /**
   * Redeems a single-use ticket into the caller that created it: the same role, domain, node,
   * token and expiry, checked again against the source credential (revoked or expired: refused).
   */
  redeemTicket(ticket: string, purpose: string): Promise<Caller & { agentId: string }>;
  /**
   * A console session for a caller (POST /auth/session): bound to the caller's credential, it
   * ends when that token is revoked or expires, after 7 days, or at logout (endSession).
   */
  createSession(caller: Caller, oidc?: OidcSessionScope): Promise<{ secret: string; expiresMs: number }>;
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
  const lastUsedWrites = new Map<string, number>();
  // service tokens and console sessions verified lately, keyed by the credential's hash
  const cache = new CallerCache(clock);
  const keys = createSigningKeys(deps, opts);
  const verifyOidc = createOidcVerifier(opts.oidc, clock);
  const tickets = createTicketAuth({ store, clock, cache, nodeCaller, oidcSessions: opts.oidcSessions });

  // the signature check (ES256) is reused (auth/keys.ts); the node and its domains too (below)
  const verifyNodeToken = async (jwt: string): Promise<Caller> => nodeCaller(await keys.verify(jwt));
  const nodes = createNodeCallers(deps);

  async function nodeCaller(nodeId: string): Promise<Caller> {
    const hit = nodes.get(nodeId);
    if (hit) return hit;
    const gen = nodes.generation();
    const node = await store.getNode(nodeId);
    if (!node) throw new EpError("unauthenticated", `node ${nodeId} is not registered with this tower`);
    const nodeDomains = await store.nodeAgentDomains(nodeId);
    const caller: Caller = {
      subject: nodeId,
      role: "node",
      via: "node",
      nodeId,
      nodeDomains,
      nodeServes: node.domains,
    };
    nodes.set(nodeId, caller, gen);
    return caller;
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
    const hit = cache.get(hash);
    if (hit) {
      await noteUse(hit.tokenId!);
      return hit;
    }
    const row = await store.getTokenByHash(hash);
    if (!row || !timingSafeEqual(Buffer.from(row.hash), Buffer.from(hash))) {
      throw new EpError("unauthenticated", "the token is not known to this tower");
    }
    if (row.revokedAt) throw new EpError("token_revoked", `token ${row.id} was revoked at ${row.revokedAt}`);
    if (row.expiresAt && Date.parse(row.expiresAt) <= clock.now())
      throw new EpError("token_expired", `token ${row.id} expired at ${row.expiresAt}`);
    await noteUse(row.id);
    const caller = tokenCallerOf(row);
    cache.set(hash, caller);
    return caller;
  }

  /** A JWT: one of this tower's node tokens (by its key id), else an OIDC token. */
  async function verifyJwt(bearer: string): Promise<Caller> {
    let header: jose.ProtectedHeaderParameters | undefined;
    try {
      header = jose.decodeProtectedHeader(bearer);
    } catch {
      throw new EpError("unauthenticated", "the bearer token is not a valid JWT");
    }
    return (await keys.owns(header?.kid)) ? verifyNodeToken(bearer) : verifyOidc(bearer);
  }

  const createToken = (caller: Caller, input: TokenInput, tx?: Store) =>
    createServiceToken(tx ?? store, clock.now(), caller, input);

  return {
    async authenticate(bearer) {
      if (!bearer) throw new EpError("unauthenticated", "no credentials: send 'Authorization: Bearer <token>'");
      if (bearer.startsWith(TOKEN_PREFIX)) return verifyServiceToken(bearer);
      if (bearer.startsWith(SESSION_PREFIX)) return tickets.verifySession(bearer);
      if (keys.recentlyVerified(bearer)) return verifyNodeToken(bearer);
      if (bearer.split(".").length === 3) return verifyJwt(bearer);
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
      cache.dropToken(tokenId);
      return revoked;
    },

    signNodeToken: (nodeId, hostname) => keys.sign(nodeId, hostname),
    nodeCaller,
    cachedNodeCaller: (nodeId) => nodes.get(nodeId),
    rotateSigningKey: () => keys.rotate(),
    jwks: () => keys.jwks(),

    createTicket: tickets.createTicket,
    redeemTicket: tickets.redeemTicket,
    createSession: tickets.createSession,
    endSession: tickets.endSession,

    resealSigningKeys: () => keys.reseal(),

    bootstrapAdmin() {
      const make = async () => {
        if ((await store.getMeta("bootstrap_admin")) || (await store.listTokens()).length) return undefined;
        const { token, secret } = await createToken(
          { subject: "tower", role: "admin", via: "internal" },
          { name: "bootstrap-admin", role: "admin" },
        );
        await store.setMeta("bootstrap_admin", token.id);
        return secret;
      };
      return opts.exclusive ? opts.exclusive("bootstrap_admin", make) : make();
    },
  };
}

/**
 * A node's caller (its row's served domains, its agents' domains), read once and reused: every
 * call epd makes needs it, and reading it cost two queries that waited for the group commit.
 * What changes it is an event on the hub, which carries this replica's commits and every other
 * replica's (replication/events.ts): an enrolment (a new agent domain) or `ep node domains set`
 * drops the node's entry as the event arrives (here: before the enrolling call returns). An entry
 * lives at most AUTH_CACHE_MS, the bound for anything a replica's feed delivers late. A read that
 * overlapped an invalidation is not kept (the generation moved).
 */
function createNodeCallers(deps: Deps) {
  const cache = new CallerCache(deps.clock);
  let gen = 0;
  deps.hub.subscribe((events) => {
    for (const e of events) {
      if (e.name !== "agent.enrolled" && e.name !== "node.domains_set" && e.name !== "node.registered") continue;
      const nodeId = e.payload.node_id;
      gen++;
      if (typeof nodeId === "string" && nodeId) cache.delete(nodeId);
      else cache.clear();
    }
  });
  return {
    get: (nodeId: string): Caller | undefined => cache.get(nodeId),
    generation: () => gen,
    set(nodeId: string, caller: Caller, readAt: number): void {
      if (readAt === gen) cache.set(nodeId, caller);
    },
  };
}

type TokenInput = { name: string; role: string; domainId?: string; ttlSeconds?: number };

/** A new service token (admin only): its row, and its secret, shown once. */
async function createServiceToken(
  store: Store,
  now: number,
  caller: Caller,
  input: TokenInput,
): Promise<{ token: TokenRow; secret: string }> {
  authorize(caller, "admin");
  if (!input.name?.trim()) throw invalidField("name", "is required");
  if (!ROLES.includes(input.role as Role) || input.role === "node") {
    throw invalidField("role", `must be one of admin, operator, viewer, agent (got ${JSON.stringify(input.role)})`);
  }
  if (input.role === "agent" && !input.domainId) throw invalidField("domain_id", "is required for agent tokens");
  if (input.domainId && !(await store.getDomain(input.domainId)))
    throw new EpError("domain_not_found", `domain ${input.domainId} does not exist`);
  const ttl = input.ttlSeconds ?? 0;
  if (ttl < 0) throw invalidField("ttl_seconds", "must be zero (no expiry) or positive");
  const secret = TOKEN_PREFIX + randomBytes(24).toString("base64url");
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
