// Incremental Server-Sent Events parser (the WHATWG field rules: data/id/event/retry,
// comments, CR/LF/CRLF line ends). Feed it decoded text as it arrives.

export interface SseMessage {
  /** the id field of this message, if it had one */
  id?: string;
  /** the event name; undefined means the default "message" */
  event?: string;
  data: string;
}

export interface SseParser {
  push(text: string): void;
}

export function createSseParser(handlers: { message(m: SseMessage): void; comment?(text: string): void; retry?(ms: number): void }): SseParser {
  let buf = "";
  let data: string[] = [];
  let id: string | undefined;
  let event: string | undefined;
  let sawField = false;

  const line = (l: string) => {
    if (l === "") {
      if (sawField && (data.length || event)) handlers.message({ id, event, data: data.join("\n") });
      data = [];
      id = undefined;
      event = undefined;
      sawField = false;
      return;
    }
    if (l.startsWith(":")) {
      handlers.comment?.(l.slice(1).trimStart());
      return;
    }
    const i = l.indexOf(":");
    const field = i < 0 ? l : l.slice(0, i);
    const value = i < 0 ? "" : l.slice(i + 1).replace(/^ /, "");
    sawField = true;
    if (field === "data") data.push(value);
    else if (field === "id") {
      if (!value.includes("\0")) id = value;
    } else if (field === "event") event = value;
    else if (field === "retry" && /^\d+$/.test(value)) handlers.retry?.(Number(value));
  };

  return {
    push(text) {
      buf += text;
      let start = 0;
      for (let i = 0; i < buf.length; i++) {
        const c = buf.charCodeAt(i);
        if (c === 10 || c === 13) {
          // a CR at the very end may be the first half of a CRLF: wait for more
          if (c === 13 && i === buf.length - 1) break;
          line(buf.slice(start, i));
          if (c === 13 && buf.charCodeAt(i + 1) === 10) i++;
          start = i + 1;
        }
      }
      buf = buf.slice(start);
    },
  };
}
