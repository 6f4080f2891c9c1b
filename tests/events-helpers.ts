// Helpers for the event-stream tests: emitting events through the real commit path, a
// TCP proxy that can cut connections (a real network fault), and a small SSE reader.
import { createServer, connect, type Server, type Socket } from "node:net";
import type { Tower } from "../tower/app.js";
import { commit } from "../tower/domain/event-hub.js";
import type { NewEvent } from "../tower/store/store.js";

/** Emits `count` matrix events in transactions of `batch`, the way every domain emitter does. */
export async function emitEvents(
  tower: Tower,
  count: number,
  opts: { batch?: number; start?: number; extra?: Partial<NewEvent>; pauseEvery?: number } = {},
): Promise<void> {
  const batch = opts.batch ?? 100;
  const start = opts.start ?? 0;
  for (let i = 0; i < count; i += batch) {
    const n = Math.min(batch, count - i);
    await commit(tower.deps, async (_tx, emit) => {
      for (let j = 0; j < n; j++)
        emit({ type: "matrix", name: "test.tick", status: "ok", payload: { n: start + i + j }, ...opts.extra });
    });
    if (opts.pauseEvery && (i / batch) % opts.pauseEvery === 0) await new Promise((r) => setImmediate(r));
  }
}

export interface TcpProxy {
  port: number;
  /** cuts every open connection (the client sees a dropped stream) */
  cutAll(): void;
  retarget(port: number): void;
  connections(): number;
  close(): Promise<void>;
}

export async function tcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target, "127.0.0.1");
    open.add(client);
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    cutAll() {
      for (const s of open) s.destroy();
      open.clear();
    },
    retarget(port) {
      target = port;
    },
    connections: () => open.size,
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** Parses SSE text incrementally (the spec's field rules, enough for tests). */
export function sseParser(
  onMessage: (m: SseMessage) => void,
  onComment?: (c: string) => void,
): (chunk: string) => void {
  let buf = "";
  let msg: { id?: string; event?: string; data: string[] } = { data: [] };
  return (chunk) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (msg.data.length || msg.event) onMessage({ id: msg.id, event: msg.event, data: msg.data.join("\n") });
        msg = { data: [] };
      } else if (line.startsWith(":")) onComment?.(line.slice(1).trim());
      else {
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (field === "data") msg.data.push(value);
        else if (field === "id") msg.id = value;
        else if (field === "event") msg.event = value;
      }
    }
  };
}

/** Opens an SSE stream with fetch and collects its messages until `close()`. */
export async function openSse(
  url: string,
  headers: Record<string, string>,
): Promise<{
  status: number;
  messages: SseMessage[];
  comments: string[];
  done: Promise<void>;
  close(): void;
  body: string;
}> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: ac.signal });
  const messages: SseMessage[] = [];
  const comments: string[] = [];
  const out = { status: res.status, messages, comments, body: "", done: Promise.resolve(), close: () => ac.abort() };
  if (res.status !== 200) {
    out.body = await res.text();
    return out;
  }
  const parse = sseParser(
    (m) => messages.push(m),
    (c) => comments.push(c),
  );
  out.done = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>)
        parse(decoder.decode(chunk, { stream: true }));
    } catch {
      // aborted by close()
    }
  })();
  return out;
}
