// A raw newline-delimited client for the socket tests: what `nc -U` would do.
import net from "node:net";

export interface RawLineClient {
  send(text: string): void;
  /** The next answer line, parsed. */
  next(): Promise<unknown>;
  /** Resolves when the server closes the connection. */
  readonly closed: Promise<void>;
  end(): void;
}

export async function openRawClient(path: string): Promise<RawLineClient> {
  const socket = net.connect(path);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  const lines: string[] = [];
  const waiters: ((line: string) => void)[] = [];
  let buffered = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf("\n"); nl !== -1; nl = buffered.indexOf("\n")) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      const waiter = waiters.shift();
      if (waiter) waiter(line);
      else lines.push(line);
    }
  });
  socket.on("error", () => {});
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  return {
    send: (text) => void socket.write(text),
    next: () =>
      new Promise((resolve, reject) => {
        const line = lines.shift();
        if (line !== undefined) return resolve(JSON.parse(line));
        const timer = setTimeout(() => reject(new Error("no answer line within 5 s")), 5000);
        waiters.push((l) => {
          clearTimeout(timer);
          resolve(JSON.parse(l));
        });
      }),
    closed,
    end: () => socket.end(),
  };
}
