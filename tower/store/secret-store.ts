// The secret store's rows and methods: encrypted values (never plaintext) and grants.
// One dialect-neutral implementation over a single query function; SqlStore (sql-store.ts)
// binds it to each store and transaction, so SQLite and PostgreSQL run the same SQL.

/** One stored secret. The value exists here only as AES-256-GCM ciphertext (base64 fields). */
export interface SecretRow {
  name: string;
  /** owning domain, or "" for a tower-wide secret */
  domainId: string;
  ciphertext: string;
  iv: string;
  tag: string;
  keyId: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

/** Exactly one of agentId / domainId is non-empty. */
export interface SecretGrantRow {
  secretName: string;
  agentId: string;
  domainId: string;
  createdAt: string;
}

export interface SecretCipher {
  ciphertext: string;
  iv: string;
  tag: string;
  keyId: string;
}

export interface SecretStore {
  /**
   * Inserts the secret (version 1) or replaces its value (same name: cipher fields and
   * updated_at replaced, version + 1; domain and created_at kept). Returns the stored row.
   */
  putSecret(row: SecretRow): Promise<SecretRow>;
  getSecret(name: string): Promise<SecretRow | undefined>;
  /** Every secret, by name. */
  listSecrets(): Promise<SecretRow[]>;
  /** Deletes the secret and its grants; false when there was none. */
  deleteSecret(name: string): Promise<boolean>;
  /**
   * Re-encryption: replaces the cipher fields only if the row is still under `expectKeyId`
   * at `expectVersion` (a concurrent set or rotation wins); true when it applied.
   */
  updateSecretCipher(name: string, expect: { keyId: string; version: number }, cipher: SecretCipher): Promise<boolean>;
  /** Adds a grant; an identical grant existing already is not an error. */
  insertSecretGrant(row: SecretGrantRow): Promise<void>;
  /** Removes one grant; false when there was none. */
  deleteSecretGrant(secretName: string, target: { agentId: string; domainId: string }): Promise<boolean>;
  /** Grants of one secret, or of every secret, ordered by secret name then target. */
  listSecretGrants(secretName?: string): Promise<SecretGrantRow[]>;
}

type Row = Record<string, unknown>;

/** Runs one statement with `?` placeholders and returns its rows (none for plain writes). */
export type SecretQuery = (sql: string, args: readonly unknown[]) => Promise<Row[]>;

const toSecret = (r: Row): SecretRow => ({
  name: r.name as string,
  domainId: r.domain_id as string,
  ciphertext: r.ciphertext as string,
  iv: r.iv as string,
  tag: r.tag as string,
  keyId: r.key_id as string,
  version: Number(r.version),
  createdAt: r.created_at as string,
  updatedAt: r.updated_at as string,
});

const toGrant = (r: Row): SecretGrantRow => ({
  secretName: r.secret_name as string,
  agentId: r.agent_id as string,
  domainId: r.domain_id as string,
  createdAt: r.created_at as string,
});

export function createSecretStore(q: SecretQuery): SecretStore {
  return {
    async putSecret(s) {
      const rows = await q(
        `INSERT INTO secrets (name, domain_id, ciphertext, iv, tag, key_id, version, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)
         ON CONFLICT (name) DO UPDATE SET ciphertext = excluded.ciphertext, iv = excluded.iv, tag = excluded.tag,
           key_id = excluded.key_id, version = secrets.version + 1, updated_at = excluded.updated_at
         RETURNING *`,
        [s.name, s.domainId, s.ciphertext, s.iv, s.tag, s.keyId, s.createdAt, s.updatedAt],
      );
      return toSecret(rows[0]);
    },
    async getSecret(name) {
      const rows = await q("SELECT * FROM secrets WHERE name = ?", [name]);
      return rows.length ? toSecret(rows[0]) : undefined;
    },
    async listSecrets() {
      return (await q("SELECT * FROM secrets ORDER BY name", [])).map(toSecret);
    },
    async deleteSecret(name) {
      // grants go with it (ON DELETE CASCADE), deleted explicitly too so it holds without FK enforcement
      await q("DELETE FROM secret_grants WHERE secret_name = ?", [name]);
      return (await q("DELETE FROM secrets WHERE name = ? RETURNING name", [name])).length > 0;
    },
    async updateSecretCipher(name, expect, c) {
      const rows = await q(
        "UPDATE secrets SET ciphertext = ?, iv = ?, tag = ?, key_id = " +
          "? WHERE name = ? AND key_id = ? AND version = ? RETURNING name",
        [c.ciphertext, c.iv, c.tag, c.keyId, name, expect.keyId, expect.version],
      );
      return rows.length > 0;
    },
    async insertSecretGrant(g) {
      await q(
        "INSERT INTO secret_grants (secret_name, agent_id, domain_id, created_at) " +
          "VALUES (?, ?, ?, ?) ON CONFLICT (secret_name, agent_id, domain_id) DO NOTHING",
        [g.secretName, g.agentId, g.domainId, g.createdAt],
      );
    },
    async deleteSecretGrant(secretName, t) {
      const rows = await q(
        "DELETE FROM secret_grants WHERE secret_name = ? AND agent_id = ? AND domain_id = ? RETURNING secret_name",
        [secretName, t.agentId, t.domainId],
      );
      return rows.length > 0;
    },
    async listSecretGrants(secretName) {
      const rows =
        secretName === undefined
          ? await q("SELECT * FROM secret_grants ORDER BY secret_name, agent_id, domain_id", [])
          : await q("SELECT * FROM secret_grants WHERE secret_name = ? ORDER BY agent_id, domain_id", [secretName]);
      return rows.map(toGrant);
    },
  };
}
