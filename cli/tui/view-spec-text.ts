// The planner's view_specs as terminal lines, the way the web console renders them: tables with
// aligned columns, key/value lists, cards, timelines, logs, and the actions waiting for a decision.
// Pure text (no escapes from data): every value is flattened to one line and cut to fit.

type Cell = string | number | boolean | null | undefined;
type Obj = Record<string, unknown>;

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Obj => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});

/** One cell as one line of text: control characters (escapes, newlines) become spaces. */
export function cellText(v: unknown): string {
  if (v === null || v === undefined || v === "") return "—";
  const s =
    typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : (JSON.stringify(v) ?? "");
  return s.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ");
}

export function fit(s: string, width: number): string {
  if (width <= 0) return "";
  return s.length > width ? `${s.slice(0, Math.max(0, width - 1))}…` : s;
}

/** A table: columns as wide as their widest cell, shrunk from the widest when the terminal is narrow. */
export function tableLines(columns: Cell[], rows: Cell[][], width: number): string[] {
  const head = columns.map((c) => cellText(c).toUpperCase());
  const body = rows.map((r) => head.map((_, i) => cellText(r[i])));
  const widths = head.map((h, i) => Math.min(48, Math.max(h.length, ...body.map((r) => r[i].length))));
  const gaps = 2 * Math.max(0, widths.length - 1);
  while (widths.reduce((a, b) => a + b, 0) + gaps > width) {
    const widest = widths.indexOf(Math.max(...widths));
    if (widths[widest] <= 6) break;
    widths[widest]--;
  }
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? fit(c, widths[i]) : fit(c, widths[i]).padEnd(widths[i])))
      .join("  ")
      .trimEnd();
  return [line(head), ...body.map(line)];
}

function kvLines(items: unknown[], width: number, indent = ""): string[] {
  const pairs = items.map((x) => [cellText(obj(x).key), cellText(obj(x).value)] as const);
  const keyWidth = Math.min(24, Math.max(0, ...pairs.map(([k]) => k.length)));
  return pairs.map(([k, v]) => fit(`${indent}${fit(k, keyWidth).padEnd(keyWidth)}  ${v}`, width));
}

/**
 * A view_spec as lines. `statusOf` gives a pending action's state (the bar shows what waits for a
 * decision and where to make it).
 */
export function viewSpecLines(
  spec: unknown,
  width: number,
  statusOf: (actionId: string) => string | undefined = () => undefined,
): string[] {
  const s = obj(spec);
  const title = typeof s.title === "string" && s.title ? [fit(s.title, width)] : [];
  switch (s.type) {
    case "table": {
      const rows = arr(s.rows).map((r) => arr(r) as Cell[]);
      return [...title, ...(rows.length ? tableLines(arr(s.columns) as Cell[], rows, width) : ["(none)"])];
    }
    case "kv":
      return [...title, ...kvLines(arr(s.items), width)];
    case "cards":
      return [
        ...title,
        ...arr(s.cards).flatMap((c) => {
          const card = obj(c);
          const head = [
            cellText(card.title),
            card.status ? `[${cellText(card.status)}]` : "",
            card.subtitle ? cellText(card.subtitle) : "",
          ]
            .filter(Boolean)
            .join("  ");
          return [fit(`• ${head}`, width), ...kvLines(arr(card.fields), width, "    ")];
        }),
      ];
    case "timeline":
      return [
        ...title,
        ...arr(s.items).map((x) => {
          const i = obj(x);
          const at = typeof i.at === "string" ? i.at.replace("T", " ").slice(0, 19) : "";
          return fit(`${at}  ${cellText(i.title)}${i.detail ? ` · ${cellText(i.detail)}` : ""}`, width);
        }),
      ];
    case "log_stream":
      return [...title, ...arr(s.lines).map((l) => fit(cellText(l), width))];
    case "action_bar": {
      const ids = [
        ...new Set(
          arr(s.actions)
            .map((a) => obj(a).action_id)
            .filter((x): x is string => typeof x === "string"),
        ),
      ];
      return ids.map((id) => {
        const status = statusOf(id) ?? "pending";
        return fit(
          status === "pending" ? `waiting for approval (tab 3: a approve, r reject)` : `action ${status}`,
          width,
        );
      });
    }
    default:
      return [fit(`(a ${cellText(s.type)} view this console cannot show)`, width)];
  }
}
