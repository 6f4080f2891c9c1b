// Small JSON files in the daemon home, written atomically (temp file + rename) and coalesced:
// a save while another is in flight is folded into one more write of the newest state.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { EpError } from "../../common/errors.js";

export async function readJsonFile<T>(path: string, fallback: T): Promise<T> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return fallback;
    throw unreadable(path, err);
  }
  return parseJsonFile<T>(path, text);
}

/** readJsonFile, synchronously (a small file read where waiting on a promise costs more than the read). */
export function readJsonFileSync<T>(path: string, fallback: T): T {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return fallback;
    throw unreadable(path, err);
  }
  return parseJsonFile<T>(path, text);
}

const unreadable = (path: string, err: unknown) =>
  new EpError("config_invalid", `${path}: cannot read: ${(err as Error).message}`, { file: path });

function parseJsonFile<T>(path: string, text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new EpError("config_invalid", `${path} is not valid JSON (${(err as Error).message}); fix or remove it`, {
      file: path,
    });
  }
}

export interface JsonFileWriter {
  /**
   * Persists the value `snapshot()` returns at write time; resolves once a write that includes this call's state is on
   * disk.
   */
  save(): Promise<void>;
}

export function createJsonFileWriter(path: string, snapshot: () => unknown): JsonFileWriter {
  let writing: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  let seq = 0;
  const writeOnce = async () => {
    const tmp = `${path}.${process.pid}.${++seq}.tmp`;
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    await writeFile(tmp, JSON.stringify(snapshot(), null, 1) + "\n", { mode: 0o600 });
    await rename(tmp, path);
  };
  return {
    save() {
      if (!writing) {
        writing = writeOnce().finally(() => (writing = undefined));
        return writing;
      }
      if (!queued) {
        // the failed write's caller got its error; the next write runs regardless
        queued = writing
          .catch(() => undefined)
          .then(() => {
            queued = undefined;
            writing = writeOnce().finally(() => (writing = undefined));
            return writing;
          });
      }
      return queued;
    },
  };
}

/** Writes `value` to `path` atomically (temp file + rename), synchronously: for small files on the hot path. */
export function writeJsonFileSync(path: string, value: unknown): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(value, null, 1) + "\n", { mode: 0o600 });
  renameSync(tmp, path);
}
