// Numbered SQL migrations shared by both dialects. A file NNNN_name.sql applies to
// both; NNNN_name.sqlite.sql / NNNN_name.postgres.sql override it for one dialect.
// Inside a shared file, a line starting with `-- postgres: ` (or `-- sqlite: `) is SQL
// for that dialect only: the other dialect reads it as a comment. That keeps one
// schema file for the small differences (identity columns, sequences).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

function migrationsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [
    join(here, "migrations"), // source: tower/store/
    join(here, "..", "migrations"), // source: tower/store/<dialect>/
    join(here, "..", "tower", "store", "migrations"), // bundle one level below the root: bench/, scripts/
    join(here, "..", "..", "tower", "store", "migrations"), // bundle: dist/tower/
    join(here, "..", "..", "..", "tower", "store", "migrations"), // bundle chunk: dist/chunks/…
  ];
  const found = candidates.find((dir) => existsSync(join(dir, "0001_init.sql")));
  if (!found) throw new Error(`migrations not found (looked in ${candidates.join(", ")})`);
  return found;
}

export function loadMigrations(dialect: "sqlite" | "postgres"): Migration[] {
  const dir = migrationsDir();
  const byVersion = new Map<number, Migration & { specific: boolean }>();
  for (const file of readdirSync(dir).sort()) {
    const m = /^(\d{4})_([a-z0-9_]+?)(?:\.(sqlite|postgres))?\.sql$/.exec(file);
    if (!m) continue;
    const [, num, name, only] = m;
    if (only && only !== dialect) continue;
    const version = Number(num);
    const existing = byVersion.get(version);
    if (existing?.specific) continue;
    byVersion.set(version, {
      version,
      name,
      sql: forDialect(readFileSync(join(dir, file), "utf8"), dialect),
      specific: Boolean(only),
    });
  }
  return [...byVersion.values()]
    .sort((a, b) => a.version - b.version)
    .map(({ version, name, sql }) => ({ version, name, sql }));
}

/** Uncomments the `-- <dialect>: ` lines of a migration; other dialects' lines stay comments. */
export function forDialect(sql: string, dialect: "sqlite" | "postgres"): string {
  const prefix = `-- ${dialect}: `;
  return sql
    .split("\n")
    .map((line) => (line.startsWith(prefix) ? line.slice(prefix.length) : line))
    .join("\n");
}
