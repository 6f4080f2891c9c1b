// Human tables and JSON output.

export type Row = Record<string, unknown>;

function cell(v: unknown): string {
  if (v === undefined || v === null || v === "") return "-";
  if (Array.isArray(v)) return v.length ? v.map(cell).join(",") : "-";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v).replace(/\s+/g, " ");
}

/** A plain aligned table; `columns` maps header → row key. Empty lists print "(none)". */
export function table(rows: Row[], columns: Record<string, string>, maxWidth = 60): string {
  const heads = Object.keys(columns);
  if (rows.length === 0) return "(none)\n";
  const body = rows.map((r) =>
    heads.map((h) => {
      const s = cell(r[columns[h]]);
      return s.length > maxWidth ? s.slice(0, maxWidth - 1) + "…" : s;
    }),
  );
  const widths = heads.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cols: string[]) => cols.map((c, i) => (i === cols.length - 1 ? c : c.padEnd(widths[i]))).join("  ");
  return [line(heads.map((h) => h.toUpperCase())), ...body.map(line)].join("\n") + "\n";
}

/** Key/value lines for one object. */
/** snake_case for people, as everywhere else in the CLI's output (domainId → domain_id). */
const snake = (k: string): string => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

export function kv(obj: Row, keys?: string[]): string {
  const ks = keys ?? Object.keys(obj);
  const width = Math.max(...ks.map((k) => snake(k).length));
  return ks.map((k) => `${snake(k).padEnd(width)}  ${cell(obj[k])}`).join("\n") + "\n";
}

export function json(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? Number(v) : v), 2) + "\n";
}
