#!/usr/bin/env node
// `npm run lint` (and the first step of `npm test`): Biome's check (format and lint rules of
// biome.json, warnings fail too) and the line-length check (scripts/long-lines.mjs). Changes nothing.
import { biome } from "./biome.mjs";
import { longLines, WIDTH } from "./long-lines.mjs";

const checked = biome(["check", "--error-on-warnings", "--max-diagnostics=50"]);
const long = longLines(process.cwd());
for (const l of long) console.error(`${l.file}:${l.line}: ${l.width} characters, over ${WIDTH}`);
if (checked !== 0 || long.length > 0) {
  console.error(
    `\nlint failed${long.length ? ` (${long.length} line(s) over ${WIDTH} characters)` : ""}: ` +
      "`npm run format` fixes the layout and long comments and strings; the lint findings it leaves " +
      "name their rule (docs/house-style.md says which are off and why)",
  );
  process.exit(1);
}
