// The contract: buf lint (STANDARD) passes and gen/ is exactly what buf generates from proto/.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT, tempHome } from "./harness.js";

// buf runs through scripts/buf.mjs (pinned version via npx; see the note there)
const buf = (args: string[]) => execFileSync(process.execPath, [join(ROOT, "scripts", "buf.mjs"), ...args], { cwd: ROOT, stdio: "pipe" });
const tmp = tempHome("ep-gen-");
afterAll(() => tmp.cleanup());

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

describe("proto contract", () => {
  it("passes buf lint", () => {
    expect(() => buf(["lint"])).not.toThrow();
  });

  it("has gen/ up to date with proto/ (run `npm run gen` if this fails)", () => {
    buf(["generate", "--output", tmp.dir]);
    const fresh = join(tmp.dir, "gen");
    const committed = join(ROOT, "gen");
    const names = (d: string) => files(d).map((f) => relative(d, f)).sort();
    expect(names(committed)).toEqual(names(fresh));
    for (const name of names(fresh)) {
      expect(readFileSync(join(committed, name), "utf8"), name).toBe(readFileSync(join(fresh, name), "utf8"));
    }
  });
});
