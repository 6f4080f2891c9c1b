// The credentials' tables: tokens (hashed), the signing keys of session JWTs, single-use tickets.
// One dialect-neutral implementation over a query function, bound by SqlStore (sql-store.ts), so
// SQLite and PostgreSQL run the same SQL.
import { toSigningKey, toTicket, toToken, type Row } from "./rows.js";
import type { SigningKeyRow, Store, TicketRow, TokenRow } from "./store.js";

type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

export type CredentialStore = Pick<
  Store,
  | "insertToken"
  | "getToken"
  | "getTokenByHash"
  | "listTokens"
  | "updateToken"
  | "insertSigningKey"
  | "listSigningKeys"
  | "updateSigningKeyPrivate"
  | "retireSigningKey"
  | "insertTicket"
  | "consumeTicket"
  | "findTicket"
>;

/** `q` names a constraint error after the statement's table; `orderBy` orders by bytes in both dialects. */
export function createCredentialStore(q: Query, orderBy: (...cols: string[]) => string): CredentialStore {
  const first = async <T>(sql: string, args: readonly unknown[], map: (r: Row) => T): Promise<T | undefined> => {
    const [r] = await q(sql, args);
    return r && map(r);
  };
  return {
    async insertToken(row: TokenRow): Promise<void> {
      await q(
        "INSERT INTO tokens (id, name, role, domain_id, hash, expires_at, " +
          "created_at, revoked_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
          row.id,
          row.name,
          row.role,
          row.domainId,
          row.hash,
          row.expiresAt,
          row.createdAt,
          row.revokedAt,
          row.lastUsedAt,
        ],
      );
    },

    getToken(id: string): Promise<TokenRow | undefined> {
      return first("SELECT * FROM tokens WHERE id = ?", [id], toToken);
    },

    getTokenByHash(hash: string): Promise<TokenRow | undefined> {
      return first("SELECT * FROM tokens WHERE hash = ?", [hash], toToken);
    },

    async listTokens(): Promise<TokenRow[]> {
      return (await q(`SELECT * FROM tokens ${orderBy("created_at", "id")}`, [])).map(toToken);
    },

    updateToken(id: string, patch: Partial<Pick<TokenRow, "revokedAt" | "lastUsedAt">>): Promise<TokenRow | undefined> {
      return first(
        "UPDATE tokens SET revoked_at = COALESCE(?, revoked_at), " +
          "last_used_at = COALESCE(?, last_used_at) WHERE id = ? RETURNING *",
        [patch.revokedAt ?? null, patch.lastUsedAt ?? null, id],
        toToken,
      );
    },

    async insertSigningKey(row: SigningKeyRow): Promise<void> {
      await q(
        "INSERT INTO signing_keys (kid, alg, private_jwk, " +
          "public_jwk, created_at, retired_at) VALUES (?, ?, ?, ?, ?, ?)",
        [row.kid, row.alg, row.privateJwk, row.publicJwk, row.createdAt, row.retiredAt],
      );
    },

    async listSigningKeys(): Promise<SigningKeyRow[]> {
      return (await q(`SELECT * FROM signing_keys ${orderBy("created_at", "kid")}`, [])).map(toSigningKey);
    },

    async updateSigningKeyPrivate(kid: string, privateJwk: string): Promise<void> {
      await q("UPDATE signing_keys SET private_jwk = ? WHERE kid = ?", [privateJwk, kid]);
    },

    async retireSigningKey(kid: string, at: string): Promise<void> {
      await q("UPDATE signing_keys SET retired_at = ? WHERE kid = ?", [at, kid]);
    },

    async insertTicket(row: TicketRow): Promise<void> {
      await q(
        "INSERT INTO tickets (hash, purpose, subject, role, agent_id, expires_ms, scope) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [row.hash, row.purpose, row.subject, row.role, row.agentId, row.expiresMs, row.scope],
      );
    },

    async consumeTicket(hash: string, nowMs: number): Promise<TicketRow | undefined> {
      // one conditional UPDATE: a concurrent consumer finds used = 1 and gets nothing
      const r = await first(
        "UPDATE tickets SET used = 1 WHERE hash = ? AND used = 0 AND expires_ms > ? RETURNING *",
        [hash, nowMs],
        toTicket,
      );
      await q("DELETE FROM tickets WHERE expires_ms <= ?", [nowMs - 3_600_000]);
      return r;
    },

    findTicket(hash: string, nowMs: number): Promise<TicketRow | undefined> {
      return first("SELECT * FROM tickets WHERE hash = ? AND used = 0 AND expires_ms > ?", [hash, nowMs], toTicket);
    },
  };
}
