// Progress frames go upstream in batches: the first frame opens a short window, everything that
// arrives in it travels in one call. Sends are sequential so frames keep their order.
import type { Clock, ClockTimer } from "../../common/clock.js";
import type { ProgressFrame } from "../runtimes/runtime.js";

export interface FrameBatcher {
  push(frame: ProgressFrame): void;
  /** Sends everything buffered and waits for the sends in flight. */
  flush(): Promise<void>;
}

export function createFrameBatcher(opts: {
  clock: Clock;
  windowMs: number;
  maxBatch?: number;
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
  return {
    push(frame) {
      buffer.push(frame);
      if (buffer.length >= max) void drain();
      else timer ??= opts.clock.setTimeout(() => void drain(), opts.windowMs);
    },
    flush: drain,
  };
}
