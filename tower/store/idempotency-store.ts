// Idempotency keys of creates (tower/domain/idempotency.ts): one dialect-neutral implementation
// over a query function, bound by SqlStore (sql-store.ts), so SQLite and PostgreSQL run the same SQL.

export interface IdempotencyRow {
  /** the method and the caller's principal: a key means nothing outside it */
  scope: string;
  key: string;
  /** SHA-256 (hex) of the request without its key */
  requestHash: string;
  /** the first answer, as the domain function stored it */
  response: string;
  createdMs: number;
  expiresMs: number;
}

export interface IdempotencyStore {
  /** The key's row if it has not expired at nowMs. */
  findIdempotencyKey(scope: string, key: string, nowMs: number): Promise<IdempotencyRow | undefined>;
  /**
   * Records a key; an expired row of the same key is replaced. False when a live row holds the
   * key already (a concurrent request with the same key won): the caller's transaction must then
   * roll back and read that row instead.
   */
  putIdempotencyKey(row: IdempotencyRow): Promise<boolean>;
  /** Deletes the rows expired at nowMs; returns how many. */
  sweepIdempotencyKeys(nowMs: number): Promise<number>;
}

type Row = Record<string, unknown>;
type Query = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

const toRow = (r: Row): IdempotencyRow => ({
  scope: r.scope as string,
  key: r.key as string,
  requestHash: r.request_hash as string,
  response: r.response as string,
  createdMs: Number(r.created_ms),
  expiresMs: Number(r.expires_ms),
});

export function createIdempotencyStore(query: Query): IdempotencyStore {
  return {
    async findIdempotencyKey(scope, key, nowMs) {
      const [r] = await query("SELECT * FROM idempotency_keys WHERE scope = ? AND key = ? AND expires_ms > ?", [
        scope,
        key,
        nowMs,
      ]);
      return r && toRow(r);
    },
    async putIdempotencyKey(row) {
      // one statement: a live row wins (nothing returned), an expired one is replaced
      const rows = await query(
        `INSERT INTO idempotency_keys (scope, key, request_hash, response, created_ms, expires_ms)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (scope, key) DO UPDATE SET request_hash = excluded.request_hash, response = excluded.response,
           created_ms = excluded.created_ms, expires_ms = excluded.expires_ms
         WHERE idempotency_keys.expires_ms <= excluded.created_ms
         RETURNING key`,
        [row.scope, row.key, row.requestHash, row.response, row.createdMs, row.expiresMs],
      );
      return rows.length > 0;
    },
    async sweepIdempotencyKeys(nowMs) {
      const rows = await query("DELETE FROM idempotency_keys WHERE expires_ms <= ? RETURNING key", [nowMs]);
      return rows.length;
    },
  };
}
