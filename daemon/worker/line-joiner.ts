// Streamed text arrives in pieces (gemini's `delta: true` messages, ACP agent_message_chunk): a
// word, half a sentence, "1". Frames marked `data.delta` are joined here into lines before they go
// upstream; every other frame passes as it is. A piece of line is let out when a non-delta frame
// comes (so order holds), when the stream goes quiet for `idleMs`, when it grows past `maxChars`,
// and on flush() at the end of the run.
import type { Clock, ClockTimer } from "../../common/clock.js";
import type { ProgressFrame } from "../runtimes/runtime.js";

export interface LineJoiner {
  push(frame: ProgressFrame): void;
  /** Lets out the piece of line held back, if any. */
  flush(): void;
}

export function createLineJoiner(opts: {
  clock: Clock;
  idleMs: number;
  maxChars?: number;
  emit(frame: ProgressFrame): void;
}): LineJoiner {
  const maxChars = opts.maxChars ?? 4000;
  let held = "";
  /** The held text's frame data without `delta` (a thought and a reply are joined apart). */
  let heldData: Record<string, unknown> | undefined;
  let heldKey = "";
  let timer: ClockTimer | undefined;

  const out = (text: string, data: Record<string, unknown> | undefined) => {
    if (text.trim() === "") return;
    opts.emit(data ? { kind: "text", text, data } : { kind: "text", text });
  };
  const flush = () => {
    if (timer) opts.clock.clearTimeout(timer);
    timer = undefined;
    const text = held;
    held = "";
    out(text, heldData);
  };

  return {
    push(frame) {
      if (frame.kind !== "text" || frame.data?.delta !== true) {
        flush();
        opts.emit(frame);
        return;
      }
      const { delta: _delta, ...rest } = frame.data;
      const data = Object.keys(rest).length > 0 ? rest : undefined;
      const key = JSON.stringify(data ?? {});
      if (key !== heldKey) flush();
      heldKey = key;
      heldData = data;
      held += frame.text;
      const cut = held.lastIndexOf("\n");
      if (cut >= 0) {
        for (const line of held.slice(0, cut).split("\n")) out(line, data);
        held = held.slice(cut + 1);
      }
      if (held.length >= maxChars) flush();
      if (timer) opts.clock.clearTimeout(timer);
      timer = held ? opts.clock.setTimeout(flush, opts.idleMs) : undefined;
    },
    flush,
  };
}
