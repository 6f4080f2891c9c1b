// Progress frames go upstream in batches: the first frame opens a short window, everything that
// arrives in it travels in one call. Sends are sequential so frames keep their order. Streamed text
// is joined into lines first (line-joiner.ts), then redacted, so a secret cut across two pieces is
// still found.
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

export function createFrameBatcher(opts: {
  clock: Clock;
  windowMs: number;
  maxBatch?: number;
  /** Applied to each frame once its line is whole (the run's secrets redactor). */
  redact?: (frame: ProgressFrame) => ProgressFrame;
  send(frames: ProgressFrame[]): Promise<void>;
}): FrameBatcher {
  const max = opts.maxBatch ?? 500;
  let buffer: ProgressFrame[] = [];
  let timer: ClockTimer | undefined;
  let chain: Promise<void> = Promise.resolve();
  const drain = () => {
    if (timer) opts.clock.clearTimeout(timer);
    timer = undefined;
    while (buffer.length) {
      const batch = buffer.slice(0, max);
      buffer = buffer.slice(max);
      // progress is best effort (the outcome is journaled and retried, frames are not): a batch the
      // tower did not take is dropped and the next one still goes; the link logs its own failures
      chain = chain.then(() => opts.send(batch)).catch(() => undefined);
    }
    return chain;
  };
  const lines = createLineJoiner({
    clock: opts.clock,
    idleMs: LINE_IDLE_MS,
    emit(frame) {
      buffer.push(opts.redact ? opts.redact(frame) : frame);
      if (buffer.length >= max) void drain();
      else timer ??= opts.clock.setTimeout(() => void drain(), opts.windowMs);
    },
  });
  return {
    push: (frame) => lines.push(frame),
    flush() {
      lines.flush();
      return drain();
    },
  };
}
