// A process run's record on disk, so that neither a run's output nor its end depends on epd's
// memory: the output spool (the run's stdout as it came, redacted before it is written: secrets
// never touch disk) and the exit status, written by the run's own wrapper once its command exited.
// Both live in the daemon home's `runs/`, beside the run's directory rather than in it: the agent's
// working directory stays as it was (and a confined run cannot reach them: EP_HOME is hidden from
// it). A restarted epd reads them to report a run that ended while it was down (docs/daemon.md,
// "Restart safety").
import {
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  fstatSync,
  lstatSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";

export interface RunRecord {
  /** the spool: the run's stdout, redacted */
  output: string;
  /**
   * the exit status, written by the wrapper once the command exited; absent when the run is not one epd may report
   * after a restart
   */
  exit?: string;
}

/** The record of task `taskId` in the daemon home. */
export function runRecordOf(daemonHome: string, taskId: string): Required<RunRecord> {
  const base = join(daemonHome, "runs", taskId);
  return { output: `${base}.out`, exit: `${base}.exit` };
}

/**
 * Forgets what an earlier run of the same task left (a task retried on this node), before the new
 * run is journaled: a restart must never read an old run's status as the new one's.
 */
export function clearRunRecord(record: RunRecord): void {
  mkdirSync(dirname(record.output), { recursive: true, mode: 0o700 });
  for (const path of [record.output, record.exit]) {
    // looked up first: usually there is none, and a thrown ENOENT costs ~10 µs per file per run
    if (!path || !lstatSync(path, { throwIfNoEntry: false })) continue;
    try {
      unlinkSync(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
}

/**
 * The wrapper: `sh` runs the command (already inside its confinement, if any) as its child and,
 * once it exited, writes its status to `exitFile` and exits the same way. It leads the run's
 * process group and session (epd spawns it detached), outside bubblewrap, and outlives epd. It
 * ignores the SIGTERM/SIGINT/SIGHUP that end the group (the command gets them as before), so the
 * status is written also for a cancelled run; a command killed by a signal is reported as killed
 * by it (the wrapper re-raises it on itself; not the stop signals, nor those ignored by default).
 * One `echo` writes the status: a reader that finds the file empty treats the run as not ended.
 */
const WRAPPER = [
  "trap : HUP INT TERM",
  'f=$1; shift; "$@"; c=$?',
  'echo $c >"$f"',
  "case $c in 14[5-9]|150|151|156) ;; 129|1[3-5][0-9]) trap - HUP INT TERM; kill -$((c - 128)) $$ ;; esac",
  "exit $c",
].join("\n");

export function wrapCommand(exitFile: string, command: readonly string[]): string[] {
  return ["/bin/sh", "-c", WRAPPER, "ep-run", exitFile, ...command];
}

export interface Spool {
  write(text: string): void;
  close(): void;
}

/**
 * The run's spool, made at its first output (most runs print little or nothing; a file is an inode,
 * docs/PERFORMANCE.md). Written synchronously, so nothing waits in memory for the disk; a spool
 * that cannot be written is given up (`onError`) and the run goes on.
 */
export function openSpool(path: string, onError: (err: Error) => void): Spool {
  let fd: number | undefined;
  let failed = false;
  return {
    write(text) {
      if (failed || !text) return;
      try {
        fd ??= openSync(path, "w", 0o600);
        writeSync(fd, text);
      } catch (err) {
        failed = true;
        onError(err as Error);
      }
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}

/** The last `chars` characters (about) of a spool, or "" when there is none. */
export function spoolTail(path: string, chars: number): string {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw err;
  }
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, chars);
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, size - length);
    // a cut through a multi-byte character leaves a replacement character at the start
    const text = buf.toString("utf8");
    return length < size ? text.replace(/^\uFFFD+/, "") : text;
  } finally {
    closeSync(fd);
  }
}

/**
 * A run whose wrapper wrote its exit status: the status and the spool's tail; undefined while the
 * run has not ended (or was never wrapped).
 */
export function finishedRun(
  record: RunRecord,
  tailChars: number,
): { exitCode: number; outputTail: string } | undefined {
  if (!record.exit) return undefined;
  let status: string;
  try {
    status = readFileSync(record.exit, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  if (!/^\d+\n$/.test(status)) return undefined;
  return { exitCode: Number(status.trim()), outputTail: spoolTail(record.output, tailChars) };
}
