// Following one AI session live: its stored events, then the ones committed since, without a gap
// or a repeat; a follower too far behind is ended (it resumes with Last-Event-ID).
import { EpError } from "../../../common/errors.js";
import type { EventRow } from "../../store/store.js";
import type { Deps } from "../deps.js";

/** A live session stream ends (the client resumes) rather than buffer more than this. */
const STREAM_BUFFER = 10_000;

/** A session's events after afterId: stored ones, then live, each once. */
export async function* sessionEvents(
  deps: Deps,
  sessionId: string,
  afterId: number,
  signal: AbortSignal,
): AsyncGenerator<EventRow> {
  const queue: EventRow[] = [];
  let overflow = false;
  let wake: (() => void) | undefined;
  // subscribe before the replay so nothing committed meanwhile is missed; ids dedupe the overlap
  const unsubscribe = deps.hub.subscribe((events) => {
    for (const e of events) if (e.sessionId === sessionId) queue.push(e);
    if (queue.length > STREAM_BUFFER) overflow = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort);
  let last = afterId;
  try {
    for (;;) {
      const page = await deps.store.listEvents({ sessionId, afterId: last, limit: 500 });
      for (const e of page) {
        if (signal.aborted) return;
        yield e;
        last = e.id;
      }
      if (page.length < 500) break;
    }
    while (!signal.aborted) {
      if (overflow)
        throw new EpError(
          "unavailable",
          `the session stream fell more than ${STREAM_BUFFER} events behind; reconnect with Last-Event-ID ${last}`,
        );
      const e = queue.shift();
      if (e) {
        if (e.id <= last) continue;
        yield e;
        last = e.id;
        continue;
      }
      await new Promise<void>((r) => (wake = r));
      wake = undefined;
    }
  } finally {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
  }
}
