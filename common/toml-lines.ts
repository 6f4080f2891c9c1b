// Where things are written in a TOML file. smol-toml gives positions only for syntax errors, so a
// file whose values are wrong is scanned for the usual spellings: `[[table]]` headers (outside
// multi-line strings) and the `key = …` lines inside each, so an error can name its line.

/** One `[[name]]` table of an array of tables: its header line and the lines its keys span (1-based). */
export interface TomlBlock {
  header: number;
  start: number;
  end: number;
}

/** The file's lines: split here, or already split by the caller (who looks up many keys). */
const linesOf = (text: string | readonly string[]): readonly string[] =>
  typeof text === "string" ? text.split(/\r?\n/) : text;

/** Each `[[name]]` header and the lines its table spans. */
export function scanTableArray(text: string | readonly string[], name: string): TomlBlock[] {
  const lines = linesOf(text);
  const header = new RegExp(`^\\[\\[\\s*${escapeRegExp(name)}\\s*\\]\\]\\s*(#.*)?$`);
  const blocks: TomlBlock[] = [];
  let inString: string | null = null;
  let current: TomlBlock | null = null;
  lines.forEach((raw, index) => {
    const lineNo = index + 1;
    if (inString) {
      if (count(raw, inString) % 2 === 1) inString = null;
      return;
    }
    const trimmed = raw.trim();
    if (header.test(trimmed)) {
      if (current) current.end = lineNo - 1;
      current = { header: lineNo, start: lineNo + 1, end: lines.length };
      blocks.push(current);
    } else if (trimmed.startsWith("[")) {
      if (current) current.end = lineNo - 1;
      current = null;
    }
    for (const delim of ['"""', "'''"]) {
      if (count(raw, delim) % 2 === 1) {
        inString = delim;
        break;
      }
    }
  });
  return blocks;
}

/** The line of `key = …` between lines `from` and `to` (1-based, inclusive), if it is there. */
export function keyLine(
  text: string | readonly string[],
  key: string,
  from = 1,
  to = Number.MAX_SAFE_INTEGER,
): number | undefined {
  const lines = linesOf(text);
  const k = escapeRegExp(key);
  const re = new RegExp(`^\\s*(?:${k}|"${k}"|'${k}')\\s*=`);
  for (let n = from; n <= to && n <= lines.length; n++) if (re.test(lines[n - 1])) return n;
  return undefined;
}

const count = (line: string, delim: string) => line.split(delim).length - 1;
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
