#!/usr/bin/env node
// The shape budget of issue 19: source files over 500 lines and functions over 120 lines
// (gen/ and tests excluded), largest first. Report only; exits 0. Usage: node scripts/sizes.mjs
import { execSync } from "node:child_process";
import { readFileSync } from "node:fs";
import ts from "typescript";

const files = execSync("git ls-files '*.ts' '*.tsx'", { encoding: "utf8" })
  .split("\n")
  .filter((f) => f && !f.startsWith("gen/"));
const longFiles = [];
const longFunctions = [];
for (const f of files) {
  const text = readFileSync(f, "utf8");
  const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
  if (lines > 500) longFiles.push([lines, f]);
  if (/\.test\.tsx?$/.test(f)) continue;
  const src = ts.createSourceFile(f, text, ts.ScriptTarget.Latest, true);
  const visit = (n) => {
    if (
      ts.isFunctionDeclaration(n) ||
      ts.isFunctionExpression(n) ||
      ts.isArrowFunction(n) ||
      ts.isMethodDeclaration(n)
    ) {
      const from = src.getLineAndCharacterOfPosition(n.getStart()).line;
      const to = src.getLineAndCharacterOfPosition(n.getEnd()).line;
      const name =
        n.name?.getText() ??
        (ts.isVariableDeclaration(n.parent) || ts.isPropertyAssignment(n.parent)
          ? n.parent.name.getText()
          : "(anonymous)");
      if (to - from + 1 > 120) longFunctions.push([to - from + 1, `${f}:${from + 1}`, name]);
    }
    ts.forEachChild(n, visit);
  };
  visit(src);
}
const show = (title, rows) => {
  console.log(`${title}: ${rows.length}`);
  for (const r of rows.sort((a, b) => b[0] - a[0])) console.log(`  ${r.join("  ")}`);
};
show("files over 500 lines (gen/ excluded)", longFiles);
show("functions over 120 lines (tests excluded)", longFunctions);
