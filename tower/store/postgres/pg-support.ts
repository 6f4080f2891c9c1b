// Small PostgreSQL helpers of the store: type parsing, identifiers, connection URLs, and the
// constraint errors mapped to the same EpErrors as SQLite's.
import { userInfo } from "node:os";
import pg from "pg";
import { EpError } from "../../../common/errors.js";
import { loadMigrations } from "../migrations.js";
import type { Row } from "../rows.js";

const INT8_OID = 20;
export const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
export const CHANNEL = /^[A-Za-z_][A-Za-z0-9_.:-]{0,62}$/;

/** BIGINT columns (seq, lease deadlines, event ids) come back as numbers, not strings. */
export const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID && format !== "binary"
      ? (v: string) => Number(v)
      : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig["getTypeParser"],
};

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * Like libpq: a URL without a user connects as PGUSER, else the operating-system user
 * (pg itself only looks at $USER, which service managers often leave unset).
 */
export function withDefaultUser(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  if (parsed.username) return url;
  let user = process.env.PGUSER || process.env.USER;
  try {
    user ||= userInfo().username;
  } catch {
    return url;
  }
  if (!user) return url;
  // the socket form (postgres:///db?host=/var/run/postgresql) has no host to put a user name
  // before: the user goes in the query, where pg reads it too
  if (!parsed.host) {
    if (parsed.searchParams.has("user")) return url;
    parsed.searchParams.set("user", user);
    return parsed.toString();
  }
  parsed.username = encodeURIComponent(user);
  return parsed.toString();
}

export function redact(url: string): string {
  return url.replace(/\/\/[^@/]*@/, "//…@");
}

export function pgCode(err: unknown): string | undefined {
  return typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;
}

/** Maps constraint violations to the same EpErrors the SQLite store throws. */
export function constraintError(err: unknown, table: string): unknown {
  const code = pgCode(err);
  const detail = err instanceof Error ? err.message : String(err);
  if (code === "23505")
    return new EpError("already_exists", `a row with that key exists already in ${table}`, { table, detail });
  if (code === "23503")
    return new EpError("not_found", `a row referenced by this ${table} row does not exist`, { table, detail });
  return err;
}

/** Advisory lock class of migrations (first key of the two-int form); the second hashes the schema. */
const MIGRATE_LOCK = 0x45500001;

/** Applies the pending numbered migrations, each in its own transaction, under a cluster-wide lock. */
export async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  let broken = false;
  try {
    // Replicas starting together: the first applies the migrations, the others wait and find them applied.
    await client.query("SELECT pg_advisory_lock($1, hashtext(COALESCE(current_schema(), '')))", [MIGRATE_LOCK]);
    try {
      await client.query(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER " +
          "PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
      );
      const applied = new Set(
        (await client.query<Row>("SELECT version FROM schema_migrations")).rows.map((r) => Number(r.version)),
      );
      for (const m of loadMigrations("postgres")) {
        if (applied.has(m.version)) continue;
        try {
          await client.query("BEGIN");
          await client.query(m.sql);
          await client.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)", [
            m.version,
            m.name,
            new Date().toISOString(),
          ]);
          await client.query("COMMIT");
        } catch (err) {
          await client.query("ROLLBACK").catch(() => (broken = true));
          const num = String(m.version).padStart(4, "0");
          throw new EpError(
            "internal",
            `migration ${num}_${m.name} failed on PostgreSQL: ${err instanceof Error ? err.message : String(err)}`,
          );
        }
      }
    } finally {
      await client
        .query("SELECT pg_advisory_unlock($1, hashtext(COALESCE(current_schema(), '')))", [MIGRATE_LOCK])
        .catch(() => (broken = true));
    }
  } finally {
    client.release(broken);
  }
}
