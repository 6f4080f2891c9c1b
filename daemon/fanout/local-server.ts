// The fan-out's loopback server: GET /events as SSE or WebSocket (resuming from Last-Event-ID or
// ?last_event_id), GET /stats, every client fed from the local feed (feed.ts).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import { EpError } from "../../common/errors.js";
import type { LocalClient, LocalFeed } from "./feed.js";

function sseClient(res: ServerResponse, cursor: number): LocalClient {
  let ended = false;
  return {
    cursor,
    send(e) {
      if (!ended) res.write(e.sse);
    },
    buffered: () => res.writableLength,
    keepAlive() {
      if (!ended) res.write(": keep-alive\n\n");
    },
    end(reason) {
      if (ended) return;
      ended = true;
      if (reason) res.write(`event: error\ndata: ${JSON.stringify({ error: reason })}\n\n`);
      res.end();
    },
  };
}

function wsClient(ws: WebSocket, cursor: number): LocalClient {
  let ended = false;
  return {
    cursor,
    send(e) {
      // tower chunks go as they came; local events carry their name (matrix-down, mqtt.message…)
      if (!ended) ws.send(e.json);
    },
    buffered: () => ws.bufferedAmount,
    keepAlive() {
      if (!ended && ws.readyState === ws.OPEN) ws.ping();
    },
    end(reason) {
      if (ended) return;
      ended = true;
      if (ws.readyState !== ws.OPEN) return;
      if (reason) ws.send(JSON.stringify({ error: reason }));
      ws.close(reason ? 4008 : 1001, reason?.code ?? "going away");
    },
  };
}

const lastIdOf = (req: IncomingMessage, u: URL) =>
  (req.headers["last-event-id"] as string | undefined) || u.searchParams.get("last_event_id") || undefined;

export function createLocalServer(feed: LocalFeed, stats: () => unknown) {
  const { clients } = feed;
  const join = (c: LocalClient) => {
    clients.add(c);
    if (!feed.paused()) feed.deliver(c);
  };
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://fanout");
    if (req.method === "GET" && u.pathname === "/stats") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(stats()));
      return;
    }
    if (req.method !== "GET" || u.pathname !== "/events") {
      res
        .writeHead(404, { "content-type": "application/json" })
        .end(
          JSON.stringify(
            new EpError("route_not_found", `no route ${req.method} ${u.pathname}; use GET /events`).toJSON(),
          ),
        );
      return;
    }
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "close",
    });
    res.write("retry: 1000\n: ep local fan-out\n\n");
    const c = sseClient(res, feed.cursorFor(lastIdOf(req, u)));
    res.on("close", () => clients.delete(c));
    res.socket?.once("end", () => res.destroy());
    join(c);
  });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const u = new URL(req.url ?? "/", "http://fanout");
    if (u.pathname !== "/events") {
      socket.end("HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
      return;
    }
    const lastId = lastIdOf(req, u);
    wss.handleUpgrade(req, socket, head, (ws) => {
      const c = wsClient(ws, feed.cursorFor(lastId));
      ws.on("close", () => clients.delete(c));
      ws.on("error", () => clients.delete(c));
      join(c);
    });
  });

  return {
    /** Binds host:port; answers the port bound. */
    listen(port: number, host: string): Promise<number> {
      return new Promise<number>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve((server.address() as { port: number }).port);
        });
      });
    },
    close(): Promise<void> {
      for (const ws of wss.clients) ws.terminate();
      return new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}
