// Server-Sent Events parsing for every Node client of the stream (the CLI's `events tail` and
// `task watch`, epd's local fan-out): `eventsource-parser` (the WHATWG rules: data/id/event/retry
// fields, comments, CR, LF and CRLF line ends, a chunk split anywhere), wrapped in the two shapes
// the callers use. One parser, so a fix reaches every client.
import { createParser } from "eventsource-parser";

export interface SseMessage {
  /** the id field of this message, if it had one */
  id?: string;
  /** the event name; undefined means the default "message" */
  event?: string;
  data: string;
}

export interface SseHandlers {
  message(m: SseMessage): void;
  comment?(text: string): void;
  retry?(ms: number): void;
}

/** Feeds decoded text as it arrives; calls the handlers for each complete message. */
export function createSseStream(handlers: SseHandlers): { push(text: string): void } {
  const parser = createParser({
    onEvent: (e) =>
      handlers.message({
        data: e.data,
        ...(e.id !== undefined ? { id: e.id } : {}),
        ...(e.event !== undefined ? { event: e.event } : {}),
      }),
    onComment: handlers.comment ? (c) => handlers.comment!(c.trimStart()) : undefined,
    onRetry: handlers.retry,
  });
  return { push: (text) => parser.feed(text) };
}

/** The same, returning the messages each push completed. */
export function createSseParser(): { push(text: string): SseMessage[] } {
  let out: SseMessage[] = [];
  const stream = createSseStream({ message: (m) => out.push(m) });
  return {
    push(text) {
      out = [];
      stream.push(text);
      return out;
    },
  };
}
