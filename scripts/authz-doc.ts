// Writes the authorization matrix (tests/authz-table.ts) into docs/security.md between its
// markers: node scripts/run-ts.mjs scripts/authz-doc.ts. tests/authz-matrix.test.ts checks the
// document carries the current table.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderMatrix } from "../tests/authz-table.js";

const path = join(process.cwd(), "docs", "security.md");
const doc = readFileSync(path, "utf8");
const start = doc.indexOf("<!-- authz matrix:");
const endMarker = "<!-- end of authz matrix -->";
const end = doc.indexOf(endMarker);
if (start < 0 || end < 0)
  throw new Error(`docs/security.md has no authz matrix markers ("<!-- authz matrix:" … "${endMarker}")`);
writeFileSync(path, doc.slice(0, start) + renderMatrix() + doc.slice(end + endMarker.length));
console.log(`wrote the authorization matrix into ${path}`);
