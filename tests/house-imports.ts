// The import graph of the TypeScript sources, read from their import lines (static imports and
// re-exports, `import type` included, and dynamic `import("…")` of a literal path), for the house
// rules in tests/house.test.ts: no cycles, edges call the domain, the CLI stays out of the daemon.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

/** Relative imports of each source file (repo-relative paths), by file. */
export type ImportGraph = Map<string, string[]>;

const SOURCE_ROOTS = [
  "common",
  "tower",
  "daemon",
  "cli",
  "web/src",
  "test-support",
  "tests",
  "bench",
  "scripts",
  "gen",
];
const IMPORT_LINE = new RegExp(
  [
    /(?:^|[\s;])(?:import|export)\s[^"'`]*?\sfrom\s*["']([^"']+)["']/, // import … from "x", export … from "x"
    /(?:^|[\s;(=])import\s*\(\s*["']([^"']+)["']\s*\)/, // import("x")
    /^\s*import\s+["']([^"']+)["']/, // import "x"
  ]
    .map((r) => r.source)
    .join("|"),
  "gm",
);

function sourceFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name === "node_modules" || e.name === "dist" || e.name.startsWith(".")) continue;
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (/\.(ts|tsx)$/.test(e.name) && !e.name.endsWith(".d.ts")) out.push(relative(root, path));
    }
  };
  for (const top of SOURCE_ROOTS) if (existsSync(join(root, top))) walk(join(root, top));
  return out.sort();
}

/** The file a relative specifier names (`./x.js` is `./x.ts` or `./x.tsx`, a folder its index). */
function resolveSpecifier(root: string, from: string, spec: string): string | undefined {
  const base = normalize(join(dirname(from), spec));
  const stem = base.replace(/\.(js|jsx|mjs)$/, "");
  for (const c of [base, `${stem}.ts`, `${stem}.tsx`, join(base, "index.ts"), join(base, "index.tsx")]) {
    const p = join(root, c);
    if (existsSync(p) && statSync(p).isFile()) return c;
  }
  return undefined;
}

/** Comments out of the way (an import in a doc comment is not an import). */
const stripComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");

export function importGraph(root: string): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const file of sourceFiles(root)) {
    const text = stripComments(readFileSync(join(root, file), "utf8"));
    const targets = new Set<string>();
    for (const m of text.matchAll(IMPORT_LINE)) {
      const spec = m[1] ?? m[2] ?? m[3];
      if (!spec?.startsWith(".")) continue; // a package, not one of ours
      const target = resolveSpecifier(root, file, spec);
      if (target) targets.add(target);
    }
    graph.set(file, [...targets].sort());
  }
  return graph;
}

/** Test code: test files, tests/, test-support/ (what product code must never import). */
export const isTestCode = (file: string) =>
  /\.test\.tsx?$/.test(file) || file.startsWith("tests/") || file.startsWith("test-support/");

/** Product code: what ships (common, tower, daemon, cli, web), without its tests. */
export const isProduct = (file: string) => /^(common|tower|daemon|cli|web\/src)\//.test(file) && !isTestCode(file);

/** The import cycles among `files`: each strongly connected group of two or more, sorted (Tarjan). */
export function importCycles(graph: ImportGraph, keep: (file: string) => boolean): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of (graph.get(v) ?? []).filter(keep)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(group.sort());
    }
  };
  for (const v of [...graph.keys()].filter(keep)) if (!index.has(v)) visit(v);
  return cycles.sort((a, b) => a[0].localeCompare(b[0]));
}

/** Every import from a file `from` matches to a file `to` matches, as "from -> to". */
export function importsBetween(
  graph: ImportGraph,
  from: (file: string) => boolean,
  to: (file: string) => boolean,
): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) if (from(file)) for (const t of targets) if (to(t)) out.push(`${file} -> ${t}`);
  return out;
}

/** The concept folder of tower/domain a file is in (`work` for tower/domain/work/claims.ts), if any. */
export const conceptFolderOf = (file: string) => /^tower\/domain\/([^/]+)\//.exec(file)?.[1];

/**
 * Imports that reach past a concept folder's face: from a file outside the folder to one of its
 * files other than index.ts (the face) and types.ts (its shared types), for the folders that have
 * an index.ts. Within a folder, files import each other freely.
 */
export function faceBreaches(graph: ImportGraph, from: (file: string) => boolean): string[] {
  const faced = new Set(
    [...graph.keys()].map((f) => /^tower\/domain\/([^/]+)\/index\.ts$/.exec(f)?.[1]).filter((f) => f !== undefined),
  );
  const out: string[] = [];
  for (const [file, targets] of graph) {
    if (!from(file)) continue;
    for (const t of targets) {
      const folder = conceptFolderOf(t);
      if (folder && faced.has(folder) && conceptFolderOf(file) !== folder && !/\/(index|types)\.ts$/.test(t))
        out.push(`${file} -> ${t}`);
    }
  }
  return out;
}
