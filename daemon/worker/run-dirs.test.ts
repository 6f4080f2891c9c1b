import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MCP_CONFIG_FILE } from "../mcp/agent-config.js";
import { createRunDirs, dropStaleConfig, MAX_SPARES } from "./run-dirs.js";

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});
function workRoot(): string {
  const r = mkdtempSync(join(tmpdir(), "ep-run-dirs-"));
  roots.push(r);
  return r;
}
/** A finished run's directory holding `files`. */
function ranIn(dir: string, files: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  for (const [name, body] of Object.entries(files)) writeFileSync(join(dir, name), body);
}

describe("run directories", () => {
  it("are made empty when there is no spare, and a task that runs again starts from an empty one", async () => {
    const root = workRoot();
    const dirs = createRunDirs();
    expect(await dirs.fresh(join(root, "tsk_a"))).toEqual({ recycled: false });
    expect(readdirSync(join(root, "tsk_a"))).toEqual([]);
    writeFileSync(join(root, "tsk_a", "left.txt"), "x");
    expect(await dirs.fresh(join(root, "tsk_a"))).toEqual({ recycled: false });
    expect(readdirSync(join(root, "tsk_a"))).toEqual([]);
  });

  it("recycle a directory its run left with only its MCP config: renamed to the next run's, dated now", async () => {
    const root = workRoot();
    let now = Date.parse("2026-11-26T12:00:00Z");
    const dirs = createRunDirs(() => now);
    ranIn(join(root, "tsk_a"), { [MCP_CONFIG_FILE]: '{"old":true}' });
    utimesSync(join(root, "tsk_a"), new Date(0), new Date(0));
    dirs.release(join(root, "tsk_a"));
    expect(dirs.spares()).toBe(1);
    now += 1000;
    expect(await dirs.fresh(join(root, "tsk_b"))).toEqual({ recycled: true });
    expect(existsSync(join(root, "tsk_a"))).toBe(false);
    expect(readdirSync(join(root, "tsk_b"))).toEqual([MCP_CONFIG_FILE]);
    expect(statSync(join(root, "tsk_b")).mtimeMs).toBe(now); // not collected as a week-old directory
    expect(dirs.spares()).toBe(0);
  });

  it("keep a directory the run wrote into where it is, and do not take one twice", async () => {
    const root = workRoot();
    const dirs = createRunDirs();
    ranIn(join(root, "tsk_a"), { [MCP_CONFIG_FILE]: "{}", "out.txt": "result" });
    dirs.release(join(root, "tsk_a"));
    dirs.release(join(root, "tsk_gone")); // not there (collected): nothing to keep
    expect(dirs.spares()).toBe(0);
    ranIn(join(root, "tsk_b"), {});
    dirs.release(join(root, "tsk_b"));
    dirs.release(join(root, "tsk_b"));
    expect(dirs.spares()).toBe(1);
    expect(await dirs.fresh(join(root, "tsk_c"))).toEqual({ recycled: true });
    expect(readFileSync(join(root, "tsk_a", "out.txt"), "utf8")).toBe("result");
  });

  it("do not take a directory whose config was replaced by a symlink", () => {
    const root = workRoot();
    const dirs = createRunDirs();
    ranIn(join(root, "tsk_a"), { "target.txt": "x" });
    ranIn(join(root, "tsk_b"), {});
    symlinkSync(join(root, "tsk_a", "target.txt"), join(root, "tsk_b", MCP_CONFIG_FILE));
    dirs.release(join(root, "tsk_b"));
    expect(dirs.spares()).toBe(0);
  });

  it("fall back to a new directory when a spare was removed meanwhile", async () => {
    const root = workRoot();
    const dirs = createRunDirs();
    ranIn(join(root, "tsk_a"), {});
    dirs.release(join(root, "tsk_a"));
    rmSync(join(root, "tsk_a"), { recursive: true });
    expect(await dirs.fresh(join(root, "tsk_b"))).toEqual({ recycled: false });
    expect(readdirSync(join(root, "tsk_b"))).toEqual([]);
  });

  it("clear a task's own old directory before taking a spare for it", async () => {
    const root = workRoot();
    const dirs = createRunDirs();
    ranIn(join(root, "tsk_a"), { "old-output.txt": "from the first attempt" });
    ranIn(join(root, "tsk_spare"), { [MCP_CONFIG_FILE]: "{}" });
    dirs.release(join(root, "tsk_spare"));
    expect(await dirs.fresh(join(root, "tsk_a"))).toEqual({ recycled: true });
    expect(readdirSync(join(root, "tsk_a"))).toEqual([MCP_CONFIG_FILE]);
    expect(existsSync(join(root, "tsk_spare"))).toBe(false);
  });

  it("hold at most MAX_SPARES", () => {
    const root = workRoot();
    const dirs = createRunDirs();
    for (let i = 0; i < MAX_SPARES + 3; i++) {
      ranIn(join(root, `tsk_${i}`), {});
      dirs.release(join(root, `tsk_${i}`));
    }
    expect(dirs.spares()).toBe(MAX_SPARES);
  });

  it("drop a previous run's config when the new run writes none", () => {
    const root = workRoot();
    ranIn(join(root, "tsk_b"), { [MCP_CONFIG_FILE]: '{"task":"tsk_a"}' });
    dropStaleConfig(join(root, "tsk_b"));
    expect(readdirSync(join(root, "tsk_b"))).toEqual([]);
    dropStaleConfig(join(root, "tsk_b")); // nothing there: fine
  });

  it(
    "keep epd's parents/ folder in a spare for the next " + "task with parents; one without parents gets none",
    async () => {
      const root = workRoot();
      const dirs = createRunDirs();
      ranIn(join(root, "tsk_a"), { [MCP_CONFIG_FILE]: "{}" });
      ranIn(join(root, "tsk_a", "parents"), { "tsk_p.out": "x", "tsk_p.json": "{}", "index.json": "[]" });
      ranIn(join(root, "tsk_b"), { [MCP_CONFIG_FILE]: "{}" });
      dirs.release(join(root, "tsk_a"));
      dirs.release(join(root, "tsk_b"));
      expect(dirs.spares()).toBe(2);
      // the one with parents/ goes to the task with parents, though it is not the last kept
      const withParents = await dirs.fresh(join(root, "tsk_c"), true);
      expect(withParents.recycled).toBe(true);
      expect(withParents.parentFiles?.sort()).toEqual(["index.json", "tsk_p.json", "tsk_p.out"]);
      expect(existsSync(join(root, "tsk_a"))).toBe(false);
      expect(await dirs.fresh(join(root, "tsk_d"), true)).toEqual({ recycled: true }); // the plain one: no parentFiles
      expect(readdirSync(join(root, "tsk_d"))).toEqual([MCP_CONFIG_FILE]);
      // a spare with parents/ for a task without parents: the folder goes
      dirs.release(join(root, "tsk_c"));
      expect(await dirs.fresh(join(root, "tsk_e"))).toEqual({ recycled: true });
      expect(readdirSync(join(root, "tsk_e"))).toEqual([MCP_CONFIG_FILE]);
    },
  );

  it("leave a directory whose parents/ holds anything epd did not write there for the operator", async () => {
    const root = workRoot();
    const dirs = createRunDirs();
    ranIn(join(root, "tsk_a", "parents"), { "tsk_p.out": "x", "notes.txt": "the run's" });
    ranIn(join(root, "tsk_b", "parents", "sub"), {});
    ranIn(join(root, "tsk_c", "parents"), { "index.json": "[]" });
    writeFileSync(join(root, "tsk_c", "out.txt"), "the run's");
    for (const t of ["tsk_a", "tsk_b", "tsk_c"]) dirs.release(join(root, t));
    expect(dirs.spares()).toBe(0);
  });
});
