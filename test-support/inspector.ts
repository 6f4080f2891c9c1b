// A child Node process's garbage collector, driven through its inspector: a memory test asks
// whether memory can be collected, and need not wait for V8 to decide when to collect (an idle
// process may not collect for minutes). The child runs with INSPECT_ARGS; the inspector listens
// on a free loopback port and prints its address on stderr.
import { once } from "node:events";
import WebSocket from "ws";

export const INSPECT_ARGS = ["--inspect=127.0.0.1:0"];

export interface Inspector {
  /** A full garbage collection in the child; resolves when it is done. */
  collectGarbage(): Promise<void>;
  close(): void;
}

/** Connects to the inspector whose address the child printed ("Debugger listening on ws://…") on `stderr`. */
export async function connectInspector(stderr: string): Promise<Inspector> {
  const url = /Debugger listening on (ws:\/\/\S+)/.exec(stderr)?.[1];
  if (!url)
    throw new Error(
      `the child printed no inspector address (started without ${INSPECT_ARGS.join(" ")}?): ${stderr.slice(0, 500)}`,
    );
  const ws = new WebSocket(url);
  await once(ws, "open");
  let nextId = 1;
  const pending = new Map<number, { resolve(): void; reject(err: Error): void }>();
  ws.on("message", (data) => {
    const msg = JSON.parse(String(data)) as { id?: number; error?: { message: string } };
    const waiter = msg.id === undefined ? undefined : pending.get(msg.id);
    if (!waiter) return; // an event, not an answer
    pending.delete(msg.id!);
    if (msg.error) waiter.reject(new Error(`inspector: ${msg.error.message}`));
    else waiter.resolve();
  });
  ws.on("close", () => {
    for (const waiter of pending.values()) waiter.reject(new Error("the inspector connection closed"));
    pending.clear();
  });
  const call = (method: string) =>
    new Promise<void>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method }));
    });
  return {
    collectGarbage: () => call("HeapProfiler.collectGarbage"),
    close: () => ws.close(),
  };
}
