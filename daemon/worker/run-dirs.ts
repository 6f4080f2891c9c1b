// Each run gets a fresh, empty work/<task_id>/ (its cwd, where its MCP config is written). Making
// an inode is the dearest thing epd does for a task on some disks: on this project's VMs (ext4,
// mounted with discard) a mkdir or a new file costs 0.5–0.9 ms of kernel time, more than the rest
// of a claimed task's work together, while a rename costs ~30 µs and overwriting a file ~50 µs
// (docs/perf-history.md, "Run directories recycled"). So the directory a finished run left with
// nothing in it but its MCP config is kept as a spare, and the next run's directory is that spare
// renamed (its config then overwritten in place). A directory the run wrote anything into is left
// where it is for the operator, as before (collected after a week, work-gc.ts). The same holds for
// the parents' files epd writes for a task with depends_on (parents/, parent-results.ts): a spare
// may keep that folder, and the next task with parents renames and overwrites its files instead of
// making four new inodes (a chained shell task's epd CPU, docs/perf-history.md, 2026-12-03).
import { type Dirent, mkdirSync, readdirSync, renameSync, rmSync, unlinkSync, utimesSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { MCP_CONFIG_FILE } from "../mcp/agent-config.js";

/** The folder of the run directory the parents' files are in (EP_PARENTS_DIR). */
export const PARENTS_DIR = "parents";
/** The names epd gives the parents' files (parent-results.ts): a folder with anything else is the run's. */
const PARENT_FILE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.(out|json)$/;

/** Spares kept at most (one per agent that ran is enough; more is only disk entries). */
export const MAX_SPARES = 64;

export interface RunDirs {
  /**
   * Makes `dir` an empty directory, or one holding only a previous run's MCP config (`recycled`),
   * which the caller overwrites or removes (dropStaleConfig).
   */
  fresh(dir: string, withParents?: boolean): Promise<{ recycled: boolean; parentFiles?: string[] }>;
  /** After a run is over (its process gone): keeps `dir` as a spare when the run left nothing in it. */
  release(dir: string): void;
  /** Spares held now (for tests and the daemon's status). */
  spares(): number;
}

export function createRunDirs(nowMs: () => number = Date.now): RunDirs {
  /** `parentFiles`: the spare holds parents/ with these files (none: no such folder) */
  const spares: { dir: string; parentFiles?: string[] }[] = [];
  /** The last spare of the kind wanted (with parents/ or without), else the last one. */
  const pick = (withParents: boolean) => {
    for (let i = spares.length - 1; i >= 0; i--)
      if ((spares[i]!.parentFiles !== undefined) === withParents) return spares.splice(i, 1)[0]!;
    return spares.pop()!;
  };

  async function fresh(dir: string, withParents = false): Promise<{ recycled: boolean; parentFiles?: string[] }> {
    let cleared = false;
    while (spares.length) {
      const spare = pick(withParents);
      try {
        renameSync(spare.dir, dir);
        const now = new Date(nowMs());
        utimesSync(dir, now, now); // its age is the new run's (work-gc.ts keeps it a week from now)
        if (spare.parentFiles === undefined) return { recycled: true };
        if (withParents) return { recycled: true, parentFiles: spare.parentFiles };
        rmSync(join(dir, PARENTS_DIR), { recursive: true, force: true }); // no parents this time
        return { recycled: true };
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOENT") continue; // the spare was collected or removed meanwhile
        spares.push(spare);
        if ((code === "ENOTEMPTY" || code === "EEXIST") && !cleared) {
          // the task ran here before: its old directory goes first, as without spares
          cleared = true;
          await rm(dir, { recursive: true, force: true });
          continue;
        }
        break;
      }
    }
    await makeEmpty(dir);
    return { recycled: false };
  }

  function release(dir: string): void {
    if (spares.length >= MAX_SPARES || spares.some((s) => s.dir === dir)) return;
    let entries: Dirent[];
    let parentFiles: string[] | undefined;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
      if (entries.some((e) => e.name === PARENTS_DIR && e.isDirectory())) {
        const files = readdirSync(join(dir, PARENTS_DIR), { withFileTypes: true });
        if (!files.every((e) => e.isFile() && PARENT_FILE.test(e.name))) return;
        parentFiles = files.map((e) => e.name);
      }
    } catch {
      return;
    }
    // only the config, as a regular file (a symlink in its place would be written through), and epd's parents/
    if (
      entries.every(
        (e) => (e.name === MCP_CONFIG_FILE && e.isFile()) || (e.name === PARENTS_DIR && parentFiles !== undefined),
      )
    )
      spares.push({ dir, ...(parentFiles ? { parentFiles } : {}) });
  }

  return { fresh, release, spares: () => spares.length };
}

/** A recycled directory whose run writes no MCP config must not offer the previous run's. */
export function dropStaleConfig(dir: string): void {
  try {
    unlinkSync(join(dir, MCP_CONFIG_FILE));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

/**
 * An empty directory at `dir`: made at once when it is new (the usual case, one mkdir), emptied
 * first when a task runs here again. Synchronous on the fast path: the promise round trips of
 * rm + mkdir cost more CPU than the calls.
 */
async function makeEmpty(dir: string): Promise<void> {
  try {
    mkdirSync(dir, { mode: 0o700 });
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") await rm(dir, { recursive: true, force: true });
    else if (code !== "ENOENT") throw err;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}
