// One Unix socket, two protocols: each connection's first bytes decide whether it
// is HTTP/1.1 (served by Connect) or newline-delimited JSON (JSON-RPC on mgmt.sock,
// the one-line secrets protocol on secrets.sock).
import { chmodSync, lstatSync, unlinkSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { mendProtocolErrors } from "../../common/connect-errors.js";
import { EpError, invalidField } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";

/** The body and line limit of every daemon socket. */
export const MAX_LINE_BYTES = 1024 * 1024;

/** sockaddr_un.sun_path holds 108 bytes including the terminating NUL. */
const MAX_SOCKET_PATH_BYTES = 107;

/** A protocol of one JSON object per line, answered in order. */
export interface LineHandler {
  /** Answers one line (newline stripped); `undefined` sends nothing back (a JSON-RPC notification). */
  handleLine(line: string): Promise<string | undefined>;
  /** The reply sent to a line longer than `maxLineBytes`, just before the connection is closed. */
  lineTooLong(maxLineBytes: number): string;
}

export interface UnixSocketServerOptions {
  path: string;
  /** File mode of the socket; only the daemon's user may connect by default. */
  mode?: number;
  /** Connect services served over HTTP/1.1 on the socket. */
  routes: (router: ConnectRouter) => void;
  /** JSON-RPC 2.0 handler for connections that start with JSON (mgmt.sock). */
  jsonRpc?: LineHandler;
  /** Any other line protocol for connections that start with JSON (secrets.sock). */
  lineProtocol?: LineHandler;
  log: Logger;
  /** Longest accepted line and HTTP request body; 1 MiB unless told. */
  maxLineBytes?: number;
}

export interface UnixSocketServer {
  readonly path: string;
  /** Stops accepting, drops open connections and removes the socket file. */
  close(): Promise<void>;
}

/** Listens on `path`, replacing a stale socket file but never a live daemon's socket. */
export async function serveUnixSocket(opts: UnixSocketServerOptions): Promise<UnixSocketServer> {
  const { path, log } = opts;
  const mode = opts.mode ?? 0o600;
  const maxLineBytes = opts.maxLineBytes ?? MAX_LINE_BYTES;
  if (opts.jsonRpc && opts.lineProtocol) {
    throw invalidField(
      "lineProtocol",
      "give either jsonRpc or lineProtocol, not both: one socket speaks one line protocol",
    );
  }
  const lines = opts.jsonRpc ?? opts.lineProtocol;
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) {
    throw invalidField("path", `a Unix socket path is limited to ${MAX_SOCKET_PATH_BYTES} bytes: ${path}`);
  }
  await removeStaleSocket(path);

  const httpServer = http.createServer(
    connectNodeAdapter({
      routes: (router) => {
        opts.routes(router);
        // a malformed protobuf body is invalid_argument, without the parser's text (common/connect-errors.ts)
        mendProtocolErrors(router.handlers, maxLineBytes);
      },
      interceptors: [epErrorInterceptor(log)],
      readMaxBytes: maxLineBytes,
      // a field the method does not know is an error, as on the JSON-RPC face and the tower
      jsonOptions: { ignoreUnknownFields: false },
    }),
  );
  httpServer.on("clientError", (err, socket) => {
    log.debug("bad HTTP request on socket", { path, error: err.message });
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
    else socket.destroy();
  });

  const connections = new Set<net.Socket>();
  // allowHalfOpen: a line client may send its request and end its side before our reply is written.
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    connections.add(socket);
    socket.on("close", () => connections.delete(socket));
    socket.on("error", (err) => log.debug("socket connection error", { path, error: err.message }));
    sniff(socket, (kind, head, ended) => {
      if (kind === "http") {
        socket.unshift(head);
        httpServer.emit("connection", socket);
        socket.resume();
      } else if (lines) {
        serveLines(socket, head, ended, lines, maxLineBytes, log);
      } else {
        socket.end("only HTTP/1.1 (Connect) is served on this socket\n");
      }
    });
  });

  await listen(server, path, mode);
  log.info("socket listening", { path, mode: "0" + mode.toString(8) });

  let closed: Promise<void> | undefined;
  return {
    path,
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of connections) socket.destroy();
        httpServer.close();
      }).then(() => {
        removeSocketFile(path);
        log.info("socket closed", { path });
      });
      return closed;
    },
  };
}

type ConnectionKind = "http" | "lines";

/** "POST /…", "GET /…": an HTTP method is a short run of capitals followed by a space. */
const MAX_METHOD_LENGTH = 16;

function classify(head: Buffer): ConnectionKind | undefined {
  for (let i = 0; i < head.length; i++) {
    const c = head[i];
    if (c >= 0x41 && c <= 0x5a && i < MAX_METHOD_LENGTH) continue;
    return c === 0x20 && i > 0 ? "http" : "lines";
  }
  return undefined;
}

function sniff(socket: net.Socket, decide: (kind: ConnectionKind, head: Buffer, ended: boolean) => void): void {
  let head: Buffer = Buffer.alloc(0);
  const finish = (kind: ConnectionKind, ended = false) => {
    socket.removeListener("data", onData);
    socket.removeListener("end", onEnd);
    socket.pause();
    decide(kind, head, ended);
  };
  const onData = (chunk: Buffer) => {
    head = head.length ? Buffer.concat([head, chunk]) : chunk;
    const kind = classify(head);
    if (kind) finish(kind);
  };
  // A client that sends a few capitals and hangs up gets them read as a (malformed) line.
  const onEnd = () => finish("lines", true);
  socket.on("data", onData);
  socket.on("end", onEnd);
}

function serveLines(
  socket: net.Socket,
  head: Buffer,
  ended: boolean,
  handler: LineHandler,
  maxLineBytes: number,
  log: Logger,
): void {
  let partial: Buffer[] = [];
  let partialBytes = 0;
  let stopped = false;
  let queue: Promise<void> = Promise.resolve();

  // Replies go out in request order; a slow call delays the replies after it.
  const answer = (line: string) => {
    queue = queue.then(async () => {
      let reply: string | undefined;
      try {
        reply = await handler.handleLine(line);
      } catch (err) {
        log.error("line handler failed", { error: err instanceof Error ? err.message : String(err) });
        return;
      }
      if (reply !== undefined && socket.writable) socket.write(reply + "\n");
    });
  };
  const refuseTooLong = () => {
    stopped = true;
    partial = [];
    socket.removeListener("data", onData);
    log.warn("line over the size limit; closing the connection", { maxLineBytes });
    queue = queue.then(() => {
      if (socket.writable) socket.end(handler.lineTooLong(maxLineBytes) + "\n");
      // The client may still be sending the rest of its huge line; stop reading it.
      socket.resume();
      setTimeout(() => socket.destroy(), 1000).unref();
    });
  };
  const onData = (chunk: Buffer) => {
    if (stopped) return;
    let start = 0;
    for (let nl = chunk.indexOf(0x0a, start); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, nl);
      if (partialBytes + piece.length > maxLineBytes) return refuseTooLong();
      const line = partialBytes ? Buffer.concat([...partial, piece]) : piece;
      partial = [];
      partialBytes = 0;
      start = nl + 1;
      const text = line.toString("utf8").trim();
      if (text) answer(text);
    }
    if (start < chunk.length) {
      partial.push(chunk.subarray(start));
      partialBytes += chunk.length - start;
      if (partialBytes > maxLineBytes) refuseTooLong();
    }
  };
  const onEnd = () => {
    if (stopped) return;
    stopped = true;
    const last = Buffer.concat(partial).toString("utf8").trim();
    if (last) answer(last);
    queue = queue.then(() => {
      socket.end();
    });
  };
  if (head.length) onData(head);
  if (ended) return onEnd();
  socket.on("data", onData);
  socket.once("end", onEnd);
  socket.resume();
}

/** Keeps EpError's code through Connect: the client rebuilds it with toEpError(). */
function epErrorInterceptor(log: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (err instanceof EpError) throw err.toConnectError();
      if (err instanceof ConnectError) throw err;
      log.error("handler failed", { procedure: req.url, error: err instanceof Error ? err.stack : String(err) });
      throw new EpError("internal", "internal error; see the epd log").toConnectError();
    }
  };
}

async function removeStaleSocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  if (!isSocket) {
    throw invalidField("path", `${path} exists and is not a socket; refusing to replace it`);
  }
  if (await answers(path)) {
    throw new EpError("already_exists", `another process is serving ${path}; stop it (ep daemon down) first`, { path });
  }
  removeSocketFile(path);
}

function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.connect(path);
    const done = (alive: boolean) => {
      probe.destroy();
      resolve(alive);
    };
    probe.once("connect", () => done(true));
    probe.once("error", () => done(false));
    probe.setTimeout(1000, () => done(false));
  });
}

function removeSocketFile(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

function listen(server: net.Server, path: string, mode: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    // bind(2) creates the file with the umask applied; narrowing it for the bind means
    // the socket is never reachable with looser permissions, not even for an instant.
    // (process.umask cannot be changed in worker threads; chmod below still applies.)
    let previous: number | undefined;
    try {
      previous = process.umask(0o777 & ~mode);
    } catch {
      previous = undefined;
    }
    try {
      server.listen(path, () => {
        server.removeListener("error", reject);
        try {
          chmodSync(path, mode);
          resolve();
        } catch (err) {
          server.close();
          reject(err);
        }
      });
    } finally {
      if (previous !== undefined) process.umask(previous);
    }
  });
}
