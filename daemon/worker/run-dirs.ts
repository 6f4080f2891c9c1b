// Each run gets a fresh, empty work/<task_id>/ (its cwd, where its MCP config is written). Making
// an inode is the dearest thing epd does for a task on some disks: on this project's VMs (ext4,
// mounted with discard) a mkdir or a new file costs 0.5–0.9 ms of kernel time, more than the rest
// of a claimed task's work together, while a rename costs ~30 µs and overwriting a file ~50 µs
// (docs/perf-history.md, "Run directories recycled"). So the directory a finished run left with
// nothing in it but its MCP config is kept as a spare, and the next run's directory is that spare
// renamed (its config then overwritten in place). A directory the run wrote anything into is left
// where it is for the operator, as before (collected after a week, work-gc.ts).
import { type Dirent, mkdirSync, readdirSync, renameSync, unlinkSync, utimesSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { MCP_CONFIG_FILE } from "../mcp/agent-config.js";

/** Spares kept at most (one per agent that ran is enough; more is only disk entries). */
export const MAX_SPARES = 64;

export interface RunDirs {
  /**
   * Makes `dir` an empty directory, or one holding only a previous run's MCP config (`recycled`),
   * which the caller overwrites or removes (dropStaleConfig).
   */
  fresh(dir: string): Promise<{ recycled: boolean }>;
  /** After a run is over (its process gone): keeps `dir` as a spare when the run left nothing in it. */
  release(dir: string): void;
  /** Spares held now (for tests and the daemon's status). */
  spares(): number;
}

export function createRunDirs(nowMs: () => number = Date.now): RunDirs {
  const spares: string[] = [];

  async function fresh(dir: string): Promise<{ recycled: boolean }> {
    let cleared = false;
    while (spares.length) {
      const spare = spares.pop()!;
      try {
        renameSync(spare, dir);
        const now = new Date(nowMs());
        utimesSync(dir, now, now); // its age is the new run's (work-gc.ts keeps it a week from now)
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
    if (spares.length >= MAX_SPARES || spares.includes(dir)) return;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    // only the config, as a regular file (a symlink in its place would be written through)
    if (entries.every((e) => e.name === MCP_CONFIG_FILE && e.isFile())) spares.push(dir);
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
