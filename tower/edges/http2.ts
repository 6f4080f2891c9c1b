// HTTP/1.1 and HTTP/2 on one port. Cleartext: a connection that opens with the HTTP/2 preface
// ("prior knowledge", what gRPC clients, `buf curl --http2-prior-knowledge` and `grpcurl
// -plaintext` send) goes to an HTTP/2 session, any other to the HTTP/1.1 server. TLS: ALPN picks
// (h2 or http/1.1). Both hand their requests to the same listener (Fastify), which sees Node's
// HTTP/2 compatibility request and response where the client spoke HTTP/2.
import { createServer as createH2Server, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { Server as HttpServer, RequestListener } from "node:http";
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** Settings for the HTTP/2 sessions: enough concurrent streams for a node's link, claims and events. */
const H2_SETTINGS = { maxConcurrentStreams: 1000 };

/**
 * Routes each new connection of `server` (node:http or node:https) to HTTP/2 when the client
 * speaks it. `event` is the server's connection event: "connection" for node:http,
 * "secureConnection" for node:https (whose ALPN offer must include "h2").
 */
export function serveHttp2Too(
  server: HttpServer,
  listener: RequestListener,
  event: "connection" | "secureConnection",
  firstBytesTimeoutMs: number,
): Http2Server {
  const h2 = createH2Server({ settings: H2_SETTINGS }, listener as never);
  const sessions = new Set<ServerHttp2Session>();
  h2.on("session", (s: ServerHttp2Session) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  // connections whose first bytes have not arrived yet (a browser's speculative preconnect):
  // neither server knows them, so closing must end them here or close() waits for their timeout
  const sniffing = new Set<Socket>();
  // when the server closes (Fastify calls closeIdleConnections then), every HTTP/2 session is
  // closed gracefully: its open streams finish, no new one starts (GOAWAY); a connection that
  // has sent nothing is idle
  const closeIdle = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = () => {
    closeIdle();
    for (const s of sessions) s.close();
    for (const socket of sniffing) socket.destroy();
  };
  const closeAll = server.closeAllConnections.bind(server);
  server.closeAllConnections = () => {
    closeAll();
    for (const s of sessions) s.destroy();
    for (const socket of sniffing) socket.destroy();
  };
  const http1 = server.listeners(event) as ((socket: Socket) => void)[];
  server.removeAllListeners(event);
  server.on(event, (socket: Socket) => {
    if (event === "secureConnection") {
      const alpn = (socket as TLSSocket).alpnProtocol;
      if (alpn === "h2") return void h2.emit("connection", socket);
      for (const fn of http1) fn.call(server, socket);
      return;
    }
    sniffing.add(socket);
    socket.once("close", () => sniffing.delete(socket));
    sniff(socket, firstBytesTimeoutMs, (isH2, seen) => {
      sniffing.delete(socket);
      if (isH2) {
        // the HTTP/2 session reads what the socket has buffered before its native reads
        socket.unshift(seen);
        h2.emit("connection", socket);
        return;
      }
      // the HTTP/1.1 parser reads the socket's handle directly from now on: the bytes already
      // read are given to it first, as the data event it also listens to
      for (const fn of http1) fn.call(server, socket);
      socket.emit("data", seen);
      socket.resume();
    });
  });
  return h2;
}

/** Waits for the first bytes of a cleartext connection and says whether they open HTTP/2. */
function sniff(socket: Socket, timeoutMs: number, decide: (isH2: boolean, seen: Buffer) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  // a connection that sends nothing is cut off like one that never finishes its headers
  const timer = setTimeout(() => {
    done();
    socket.destroy();
  }, timeoutMs);
  const onData = (chunk: Buffer) => {
    seen = seen.length ? Buffer.concat([seen, chunk]) : chunk;
    const n = Math.min(seen.length, PREFACE.length);
    const prefix = seen.subarray(0, n).equals(PREFACE.subarray(0, n));
    if (prefix && seen.length < PREFACE.length) return; // a preface split over packets: wait for the rest
    done();
    decide(prefix, seen);
  };
  const onEnd = () => {
    done();
    socket.destroy();
  };
  function done() {
    clearTimeout(timer);
    socket.off("data", onData);
    socket.off("end", onEnd);
    socket.off("error", onEnd);
    socket.pause();
  }
  socket.on("data", onData);
  socket.on("end", onEnd);
  socket.on("error", onEnd);
}
