#!/usr/bin/env node
// `npm run format`: the one command that lays out the whole tree (docs/house-style.md). Biome
// formats and applies its safe fixes (biome.json), then scripts/wrap-long-lines.mjs wraps the
// comments and strings still over the width, and Biome formats again, until a round changes
// nothing (Biome itself settles some member chains only on its second pass). Deterministic: the
// same tree gives the same result, and `npm run lint` then passes unless a finding needs a person.
import { readFileSync, writeFileSync } from "node:fs";
import { biome } from "./biome.mjs";
import { longLines, sourceFiles } from "./long-lines.mjs";
import { wrapSource } from "./wrap-long-lines.mjs";

const ROUNDS = 10; // a string cut too coarsely for its final indent is cut again the next round
const quiet = { stdio: ["inherit", "ignore", "inherit"] };
const root = process.cwd();
const snapshot = () => new Map(sourceFiles(root).map((f) => [f, readFileSync(f, "utf8")]));
const same = (a, b) => a.size === b.size && [...a].every(([f, text]) => b.get(f) === text);

// format plus the safe fixes; findings it cannot fix are `npm run lint`'s to report
biome(["check", "--write", "--reporter=summary", "--max-diagnostics=0"], quiet);
let before = snapshot();
for (let round = 1; ; round++) {
  if (round > ROUNDS) {
    console.error(`format: still changing after ${ROUNDS} rounds (a wrap and Biome disagree); see git diff`);
    process.exit(1);
  }
  if (biome(["format", "--write"], quiet) !== 0) {
    console.error("format: Biome could not format the tree (above)");
    process.exit(1);
  }
  for (const file of new Set(longLines(root).map((l) => l.file))) {
    const text = readFileSync(file, "utf8");
    const next = wrapSource(file, text);
    if (next !== text) writeFileSync(file, next);
  }
  const after = snapshot();
  if (same(before, after)) break;
  before = after;
}
const left = longLines(root);
console.log(
  `format: done; ${left.length} line(s) still over the width${left.length ? " (npm run lint lists them)" : ""}`,
);
