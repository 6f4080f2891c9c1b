// A TCP proxy in front of a real tower, for tests that need the network to misbehave in one
// particular way (a connection reset, a stream held back), and a counter of the tower's calls.
import { createServer, connect, type Server, type Socket } from "node:net";

/** Each side of one proxied connection; `handle` decides what crosses (by default nothing does). */
export interface ProxiedConnection {
  client: Socket;
  upstream: Socket;
}

/** Listens on a free loopback port; every connection gets its own upstream to `targetPort`, closed with it. */
export async function tcpProxy(targetPort: number, handle: (c: ProxiedConnection) => void) {
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    open.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    handle({ client, upstream });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () => new Promise<void>((r) => (open.forEach((s) => s.destroy()), server.close(() => r()))),
  };
}

/**
 * Counts the requests a tower's HTTP server receives, by RPC method (`/ep.tower.v1.WorkService/FailTask` → `FailTask`).
 */
export function countCalls(server: {
  on(event: "request", listener: (req: { url?: string }) => void): unknown;
}): Map<string, number> {
  const calls = new Map<string, number>();
  server.on("request", (req) => {
    const method = req.url!.replace(/^\/ep\.tower\.v1\.\w+\//, "");
    calls.set(method, (calls.get(method) ?? 0) + 1);
  });
  return calls;
}
