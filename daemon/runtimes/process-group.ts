// Process-group plumbing shared by the one-shot runtimes: finding the executable on the run's
// PATH, filling argument templates, and ending a whole group (SIGTERM, then SIGKILL).
import { accessSync, constants, readdirSync, readFileSync, statSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import type { Clock } from "../../common/clock.js";

/** Absolute path of `command` as `PATH` would find it, or undefined when there is none. */
export function resolveExecutable(
  command: string,
  env: Record<string, string | undefined>,
  cwd?: string,
): string | undefined {
  if (command.includes("/")) {
    const path = isAbsolute(command) ? command : resolve(cwd ?? process.cwd(), command);
    return isExecutableFile(path) ? path : undefined;
  }
  const searchPath = env.PATH ?? process.env.PATH ?? "";
  for (const dir of searchPath.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, command);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

function isExecutableFile(path: string): boolean {
  try {
    // no error built for a PATH entry without the file (most of a lookup): a thrown ENOENT costs 3× the stat
    if (!statSync(path, { throwIfNoEntry: false })?.isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Replaces `{name}` placeholders in each argument; unknown names are left as written. */
export function fillArgs(args: readonly string[], values: Record<string, string>): string[] {
  return args.map((arg) =>
    arg.replace(/\{([a-z_]+)\}/g, (whole, name: string) => (Object.hasOwn(values, name) ? values[name]! : whole)),
  );
}

const hasProc = (() => {
  try {
    return statSync("/proc/self/stat").isFile();
  } catch {
    return false;
  }
})();

/** State letter of a process from /proc (`R`, `S`, `Z`…), or undefined when it does not exist. */
function procState(pid: number): { state: string; pgrp: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name is in parentheses and may contain spaces; fields after it are fixed.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: rest[0]!, pgrp: Number(rest[2]) };
  } catch {
    return undefined;
  }
}

/**
 * True when the process no longer runs. A zombie counts as gone: it runs nothing and holds no
 * resources, and where PID 1 does not reap orphans (some containers) it would otherwise look alive.
 */
export function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
  if (!hasProc) return false;
  const state = procState(pid)?.state;
  return state === undefined || state === "Z";
}

/** Pids of the group's members that still run (zombies excluded). */
export function liveGroupMembers(pgid: number): number[] {
  if (!hasProc) {
    try {
      process.kill(-pgid, 0);
      return [pgid];
    } catch {
      return [];
    }
  }
  // Fast path: no process at all in the group (the common case once a run ended and was reaped).
  // Scanning /proc costs milliseconds of blocked event loop on a busy machine.
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return [];
  }
  const members: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const info = procState(Number(entry));
    if (info && info.pgrp === pgid && info.state !== "Z") members.push(Number(entry));
  }
  return members;
}

export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

const POLL_MS = 25;

/**
 * Ends every process of the group: SIGTERM, then SIGKILL once `graceMs` passed with members left.
 * Resolves when no member runs any more (or shortly after SIGKILL if the kernel is slow to tell).
 */
export function terminateGroup(pgid: number, graceMs: number, clock: Clock): Promise<void> {
  if (liveGroupMembers(pgid).length === 0) return Promise.resolve();
  signalGroup(pgid, "SIGTERM");
  const termAt = clock.now();
  return new Promise((resolveDone) => {
    let killedAt: number | undefined;
    const check = () => {
      if (liveGroupMembers(pgid).length === 0) return resolveDone();
      const now = clock.now();
      if (killedAt === undefined && now - termAt >= graceMs) {
        killedAt = now;
        signalGroup(pgid, "SIGKILL");
      }
      if (killedAt !== undefined && now - killedAt > 2000) return resolveDone();
      clock.setTimeout(check, POLL_MS);
    };
    clock.setTimeout(check, Math.min(POLL_MS, graceMs));
  });
}

/**
 * Splits a stream into lines (without the newline); a trailing partial line is flushed at end. A
 * line longer than `maxLine` is let out in pieces of `maxLine` (`whole` false for all but its last),
 * so a stream without newlines never piles up in memory.
 */
export function createLineSplitter(
  onLine: (line: string, whole: boolean) => void,
  maxLine = Infinity,
): { push(chunk: Buffer | string): void; end(): void } {
  let pending = "";
  return {
    push(chunk) {
      const text = pending + chunk.toString();
      let from = 0;
      for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", from)) {
        onLine(text.slice(from, nl).replace(/\r$/, ""), true);
        from = nl + 1;
      }
      for (; text.length - from > maxLine; from += maxLine) onLine(text.slice(from, from + maxLine), false);
      pending = text.slice(from);
    },
    end() {
      if (pending.length > 0) onLine(pending.replace(/\r$/, ""), true);
      pending = "";
    },
  };
}

/**
 * Keeps the last `limit` characters of what is appended (outputs and stderr tails stay bounded), as
 * the pieces that came rather than one string: a string re-cut at every megabyte is a large object
 * each time, which only a full collection frees (a 50 MB output grew epd by tens of MB that way).
 */
export function createTailBuffer(limit: number): { append(text: string): void; text(): string } {
  let parts: string[] = [];
  let head = 0;
  let length = 0;
  return {
    append(text) {
      if (!text) return;
      parts.push(text);
      length += text.length;
      while (parts.length - head > 1 && length - parts[head]!.length >= limit) {
        length -= parts[head]!.length;
        parts[head++] = "";
      }
      if (head > 1024 && head * 2 > parts.length) {
        parts = parts.slice(head);
        head = 0;
      }
    },
    text() {
      const all = parts.slice(head).join("");
      parts = [all];
      head = 0;
      return all.length > limit ? all.slice(-limit) : all;
    },
  };
}
