// Finds fixed sleeps in the test code: a test waits on the condition (test-support/wait.ts) or
// drives an injected clock (test-support/fake-clock.ts), never on the wall clock alone. Used by
// tests/house.test.ts; the allow-list there names the few waits that are what a test measures.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

export interface Sleep {
  file: string;
  line: number;
  text: string;
}

/** Shapes of a fixed sleep: a promise resolved by a timer, node's promise timers, a sleep helper. */
const SLEEP_SHAPES: RegExp[] = [
  /new Promise\b[^;]*\bsetTimeout\s*\(/, // await new Promise((r) => setTimeout(r, 100))
  /\bsetTimeout\s*\(\s*(r|res|resolve|wake)\s*,/, // a resolver handed to a timer, however it is wrapped
  /from\s+["']node:timers\/promises["']/, // setTimeout / scheduler.wait as promises
  /\b(sleep|delay|pause)\s*\(\s*[\d_]+/, // sleep(100), delay(50)
];

/** Test code: test files anywhere, tests/ helpers, test-support/. Skips node_modules, gen and builds. */
export function testFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name === "node_modules" || e.name === "dist" || e.name === "gen" || e.name.startsWith(".")) continue;
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (/\.(ts|tsx)$/.test(e.name)) {
        const rel = relative(root, path);
        if (/\.test\.tsx?$/.test(e.name) || rel.startsWith("tests/") || rel.startsWith("test-support/")) out.push(rel);
      }
    }
  };
  for (const top of ["common", "tower", "daemon", "cli", "web", "tests", "test-support", "bench", "scripts"]) {
    try {
      walk(join(root, top));
    } catch {
      // a folder this checkout does not have
    }
  }
  return out.sort();
}

/** The polling helper itself, and this finder and its test (they spell the shapes out). */
const SELF = ["test-support/wait.ts", "tests/house-sleeps.ts", "tests/house.test.ts"];

/** Every line of `files` that has the shape of a fixed sleep (line comments are not code). */
export function findSleeps(root: string, files: string[]): Sleep[] {
  const found: Sleep[] = [];
  for (const file of files) {
    if (SELF.includes(file)) continue;
    readFileSync(join(root, file), "utf8")
      .split("\n")
      .forEach((raw, i) => {
        const code = raw.replace(/^\s*\/\/.*$/, "").replace(/\s\/\/\s.*$/, "");
        if (SLEEP_SHAPES.some((re) => re.test(code))) found.push({ file, line: i + 1, text: raw.trim() });
      });
  }
  return found;
}
