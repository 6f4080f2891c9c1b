#!/usr/bin/env node
// The line-length check of `npm run lint`: no line of a source file (.ts .tsx .mjs .js) over
// WIDTH characters outside gen/ (docs/house-style.md). Biome's formatter keeps code to the width;
// this also holds comments and the string literals the formatter will not break, which
// scripts/wrap-long-lines.mjs (part of `npm run format`) wraps.
// Usage: node scripts/long-lines.mjs   (prints file:line: length, exits 1 on a finding)
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** biome.json's formatter.lineWidth. */
export const WIDTH = 120;
const SOURCE = /\.(ts|tsx|mjs|js)$/;

/** Characters of a line as an editor counts them (code points, not UTF-16 units). */
export const widthOf = (line) => (line.length <= WIDTH ? line.length : [...line].length);

/** The source files of the tree at `root`: tracked and new (not ignored) ones, without gen/. */
export function sourceFiles(root) {
  const out = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  return out
    .split("\0")
    .filter((f) => SOURCE.test(f) && !f.startsWith("gen/") && existsSync(join(root, f)))
    .sort();
}

/** Every line over WIDTH in `files` (paths relative to `root`), in file order. */
export function longLines(root, files = sourceFiles(root)) {
  const found = [];
  for (const file of files) {
    const lines = readFileSync(join(root, file), "utf8").split("\n");
    lines.forEach((text, i) => {
      const width = widthOf(text);
      if (width > WIDTH) found.push({ file, line: i + 1, width, text });
    });
  }
  return found;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const found = longLines(process.cwd());
  for (const f of found) console.log(`${f.file}:${f.line}: ${f.width} characters (over ${WIDTH})`);
  if (found.length) {
    console.log(`${found.length} line(s) over ${WIDTH} characters: \`npm run format\` wraps comments and strings`);
    process.exit(1);
  }
}
