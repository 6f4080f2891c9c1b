// Run directories are collected once untouched for the keep period, never while their run is held.
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { gcWorkDirs, WORK_KEEP_MS } from "./work-gc.js";

describe("run directory collection", () => {
  let home: string;
  const now = Date.parse("2026-11-26T12:00:00Z");
  const dirAt = (name: string, ms: number) => {
    const p = join(home, "work", name);
    mkdirSync(p, { recursive: true });
    writeFileSync(join(p, ".ep-mcp.json"), "{}\n");
    utimesSync(p, new Date(ms), new Date(ms));
  };
  beforeEach(() => void (home = mkdtempSync(join(tmpdir(), "ep-workgc-"))));
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it("removes what is older than the keep period and not held; keeps the rest", async () => {
    dirAt("tsk_old", now - WORK_KEEP_MS - 1);
    dirAt("tsk_held", now - 30 * 86_400_000);
    dirAt("tsk_recent", now - WORK_KEEP_MS + 60_000);
    writeFileSync(join(home, "work", "stray-file"), "x");
    utimesSync(join(home, "work", "stray-file"), new Date(0), new Date(0));
    expect(await gcWorkDirs(home, now, new Set(["tsk_held"]))).toEqual(["tsk_old"]);
    expect(existsSync(join(home, "work", "tsk_old"))).toBe(false);
    for (const kept of ["tsk_held", "tsk_recent", "stray-file"])
      expect(existsSync(join(home, "work", kept))).toBe(true);
  });

  it("collects run records (output spool, exit status) the same way", async () => {
    mkdirSync(join(home, "runs"));
    const fileAt = (name: string, ms: number) => {
      writeFileSync(join(home, "runs", name), "x");
      utimesSync(join(home, "runs", name), new Date(ms), new Date(ms));
    };
    fileAt("tsk_old.out", now - WORK_KEEP_MS - 1);
    fileAt("tsk_old.exit", now - WORK_KEEP_MS - 1);
    fileAt("tsk_held.exit", now - 30 * 86_400_000);
    fileAt("tsk_recent.out", now - 60_000);
    fileAt("other", 0);
    expect((await gcWorkDirs(home, now, new Set(["tsk_held"]))).sort()).toEqual(["tsk_old.exit", "tsk_old.out"]);
    for (const kept of ["tsk_held.exit", "tsk_recent.out", "other"])
      expect(existsSync(join(home, "runs", kept))).toBe(true);
  });

  it("a node that never ran a task has nothing to collect", async () => {
    expect(await gcWorkDirs(home, now, new Set())).toEqual([]);
  });
});
