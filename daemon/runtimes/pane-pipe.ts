// tmux's pipe-pane hands a pane's output to a shell command. Pointing that command at a FIFO
// the daemon reads keeps the raw output off the disk: the daemon decides what is written where
// (a profile agent's pane log is written redacted, a task run's output stays in memory).
//
// The FIFO is opened read-write, so the daemon never sees end-of-file while tmux's writer comes
// and goes, and that writer never gets EPIPE while the daemon reads. It stays in place when the
// daemon stops: a pane re-adopted by the next daemon keeps writing into the same FIFO. Output a
// pane prints while no daemon reads is held by the pipe (64 KiB) and then by tmux; when the
// daemon is gone for good the writer dies on EPIPE and tmux drops the pipe (the next daemon
// pipes the pane again when it has no live pipe).
import { spawnSync } from "node:child_process";
import { constants, lstatSync, openSync, rmSync } from "node:fs";
import { Socket } from "node:net";
import { StringDecoder } from "node:string_decoder";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";

export interface PanePipe {
  /** the FIFO tmux writes into */
  readonly path: string;
  /** bytes read so far */
  readonly bytes: number;
  /** Stops reading (the FIFO stays for the next reader unless `remove`). */
  close(opts?: { remove?: boolean }): void;
}

/** Creates the FIFO at `path` (0600) unless one is there, and reads it; `onText` gets UTF-8 text. */
export function openPanePipe(path: string, onText: (text: string) => void): PanePipe {
  let stat: ReturnType<typeof lstatSync> | undefined;
  try {
    stat = lstatSync(path);
  } catch {
    stat = undefined;
  }
  if (stat && !stat.isFIFO()) {
    rmSync(path, { force: true });
    stat = undefined;
  }
  if (!stat) {
    const made = spawnSync("mkfifo", ["-m", "600", path], { encoding: "utf8" });
    if (made.status !== 0) {
      throw new EpError(
        "internal",
        `cannot create the pane pipe ${path}: ${made.error?.message ?? made.stderr.trim()}`,
      );
    }
  }
  const fd = openSync(path, constants.O_RDWR | constants.O_NONBLOCK);
  const socket = new Socket({ fd, readable: true, writable: false });
  const decoder = new StringDecoder("utf8");
  let bytes = 0;
  socket.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    const text = decoder.write(chunk);
    if (text) onText(text);
  });
  socket.on("error", () => {}); // only on close races; the pipe is gone either way
  return {
    path,
    get bytes() {
      return bytes;
    },
    close(opts = {}) {
      socket.destroy();
      if (opts.remove) rmSync(path, { force: true });
    },
  };
}

export interface LineWriter {
  push(text: string): void;
  /** Writes what is held (a line without its end yet). */
  flush(): void;
  close(): void;
}

/** Lines held back at most this long before a partial line is written anyway. */
const HOLD_MAX = 64 * 1024;

/**
 * Writes text line by line through `redact`: redaction matches whole values within a line
 * (docs/secrets.md), so text is held until its line ends, or until the pane has been quiet
 * for `idleMs` (a prompt waiting for input), or HOLD_MAX characters are held.
 */
export function createLineWriter(opts: {
  write(text: string): void;
  redact(text: string): string;
  clock: Clock;
  idleMs?: number;
}): LineWriter {
  const idleMs = opts.idleMs ?? 500;
  let held = "";
  let timer: ClockTimer | undefined;
  const out = (text: string) => {
    if (text) opts.write(opts.redact(text));
  };
  const flush = () => {
    if (timer) opts.clock.clearTimeout(timer);
    timer = undefined;
    const text = held;
    held = "";
    out(text);
  };
  return {
    push(text) {
      held += text;
      const end = Math.max(held.lastIndexOf("\n"), held.lastIndexOf("\r"));
      if (end >= 0) {
        const lines = held.slice(0, end + 1);
        held = held.slice(end + 1);
        out(lines);
      }
      if (held.length > HOLD_MAX) return flush();
      if (timer) opts.clock.clearTimeout(timer);
      timer = held ? opts.clock.setTimeout(flush, idleMs) : undefined;
    },
    flush,
    close: flush,
  };
}
