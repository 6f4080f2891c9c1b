// Progress frames go upstream in batches: the first frame opens a short window, everything that
// arrives in it travels in one call. One call is in flight at a time, so frames keep their order and
// what arrives meanwhile goes in the next. Streamed text is joined into lines first
// (line-joiner.ts), then redacted, so a secret cut across two pieces is still found.
//
// Progress is best effort and bounded: while the tower takes frames slower than the run makes them,
// at most `maxQueuedChars` of them wait (and one batch carries at most `maxBatchChars`); the frames
// beyond are dropped, and one `status` frame says how many before the next that goes. The run is
// never slowed down by its audience; its whole output is in its spool, its tail in the result.
import type { Clock, ClockTimer } from "../../common/clock.js";
import type { ProgressFrame } from "../runtimes/runtime.js";
import { createLineJoiner } from "./line-joiner.js";

export interface FrameBatcher {
  push(frame: ProgressFrame): void;
  /** Sends everything buffered (a piece of line held back included) and waits for the sends in flight. */
  flush(): Promise<void>;
}

/** How long a piece of streamed line waits for the rest before it goes as it is. */
export const LINE_IDLE_MS = 300;
/** What waits for the tower at most (frames' text and a little for the rest of each), per run. */
export const MAX_QUEUED_CHARS = 256 * 1024;
/** What one ReportProgress carries at most, well under the tower's 1 MiB request body. */
export const MAX_BATCH_CHARS = 128 * 1024;

/**
 * A frame's size as counted against the limits: its text, and a flat allowance for its kind and data (clipped by the
 * runtimes).
 */
const sizeOf = (f: ProgressFrame) => f.text.length + 256;

export function createFrameBatcher(opts: {
  clock: Clock;
  windowMs: number;
  maxBatch?: number;
  maxBatchChars?: number;
  maxQueuedChars?: number;
  /** Applied to each frame once its line is whole (the run's secrets redactor). */
  redact?: (frame: ProgressFrame) => ProgressFrame;
  send(frames: ProgressFrame[]): Promise<void>;
}): FrameBatcher {
  const max = opts.maxBatch ?? 500;
  const maxBatchChars = opts.maxBatchChars ?? MAX_BATCH_CHARS;
  const maxQueued = opts.maxQueuedChars ?? MAX_QUEUED_CHARS;
  let buffer: ProgressFrame[] = [];
  /** chars of the frames buffered and in flight */
  let queued = 0;
  let dropped = 0;
  let timer: ClockTimer | undefined;
  let sending: Promise<void> | undefined;

  const nextBatch = (): ProgressFrame[] => {
    let n = 0;
    let chars = 0;
    while (n < buffer.length && n < max && (n === 0 || chars + sizeOf(buffer[n]!) <= maxBatchChars))
      chars += sizeOf(buffer[n++]!);
    const batch = buffer.slice(0, n);
    buffer = buffer.slice(n);
    return batch;
  };
  const pump = async () => {
    while (buffer.length) {
      const batch = nextBatch();
      // a batch the tower did not take is dropped and the next one still goes; the link logs its own failures
      await opts.send(batch).catch(() => undefined);
      for (const f of batch) queued -= sizeOf(f);
    }
  };
  const drain = (): Promise<void> => {
    if (timer) opts.clock.clearTimeout(timer);
    timer = undefined;
    sending ??= pump().finally(() => {
      sending = undefined;
      if (buffer.length) void drain(); // came in as the last send settled
    });
    return sending;
  };
  const enqueue = (frame: ProgressFrame) => {
    buffer.push(frame);
    queued += sizeOf(frame);
    if (buffer.length >= max) void drain();
    else timer ??= opts.clock.setTimeout(() => void drain(), opts.windowMs);
  };
  const noteDropped = () => {
    if (!dropped) return;
    enqueue({
      kind: "status",
      text:
        `${dropped} progress frames dropped: the run wrote faster than the tower ` +
        `took them (its output is whole in the result's tail and the run's spool)`,
      data: { dropped },
    });
    dropped = 0;
  };
  const lines = createLineJoiner({
    clock: opts.clock,
    idleMs: LINE_IDLE_MS,
    emit(frame) {
      // a frame that cannot wait is dropped before anything is spent on it (its redaction)
      if (queued + sizeOf(frame) > maxQueued) {
        dropped++;
        return;
      }
      noteDropped();
      enqueue(opts.redact ? opts.redact(frame) : frame);
    },
  });
  return {
    push: (frame) => lines.push(frame),
    async flush() {
      lines.flush();
      // what is queued goes, then the note of the frames dropped last
      while (buffer.length || sending) await drain();
      noteDropped();
      while (buffer.length || sending) await drain();
    },
  };
}
